"""Things she can do wherever she is."""

from world.action import Action, ActionContext, choose_minutes


def _idle(ctx: ActionContext) -> str:
    assert ctx.running is not None  # a completion effect: the running record says how long
    minutes = round((ctx.running.ends_at - ctx.running.started_at).total_seconds() / 60)
    gain = {10: 1, 30: 3, 60: 5}.get(minutes, 3)
    ctx.character.change(stamina=gain)
    return f"发了{minutes}分钟呆"


idle = Action(
    id="idle",
    name="发呆",
    description="什么也不做，放空一会儿。[体力+1~5][耗时需要给出：10/30/60分钟]",
    duration=choose_minutes(10, 30, 60, default=10),
    complete=_idle,
    tags=frozenset({"idle", "rest"}),
    share=False,
)
