"""南风公园: walks, and whatever fruit grew today."""

from world.action import Action, ActionContext, at_least, between, choose_minutes, travel
from world.town import HAURA

go_to_park = travel(
    id="go_to_park", name="从家去公园", src="home", dst="park", town=HAURA,
    when=between("06:00", "21:00"),
)

go_home_from_park = travel(id="go_home_from_park", name="从公园回家", src="park", dst="home", town=HAURA)

WALK_MOOD = {10: 2, 30: 5, 60: 9, 120: 15}


def _walk(ctx: ActionContext) -> str:
    assert ctx.running is not None
    minutes = int((ctx.running.ends_at - ctx.running.started_at).total_seconds() // 60)
    gain = ctx.character.recover_mood(WALK_MOOD.get(minutes, 5))
    ctx.character.change(stamina=-minutes / 15)
    found = ctx.take_resources("park")
    for item, count in found.items():
        ctx.character.add_item(item, count)
    picked = "，还摘到了" + "、".join(f"{n}个{k}" for k, n in found.items()) if found else ""
    return f"在公园散步{minutes}分钟，心情+{gain:.0f}{picked}"


walk_in_park = Action(
    id="walk_in_park",
    name="在公园散步",
    description="在南风公园散步，心情会变好，还可能摘到野果。[心情+2/5/9/15][耗时需要给出：10/30/60/120分钟]",
    at="park",
    when=between("06:00", "21:00") & at_least("stamina", 8),
    duration=choose_minutes(10, 30, 60, 120, default=30),
    complete=_walk,
    tags=frozenset({"leisure"}),
)
