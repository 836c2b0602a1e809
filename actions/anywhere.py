"""Things she can do wherever she is."""

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from yuiju.world.action import (
    Action,
    ActionContext,
    Condition,
    at_least,
    below,
    choose_minutes,
    decision_ctx,
    one_of,
)
from yuiju.world.items import ALL, owned


def _idle(ctx: ActionContext) -> str:
    assert ctx.running is not None  # a completion effect: the running record says how long
    minutes = round((ctx.running.ends_at - ctx.running.started_at).total_seconds() / 60)
    gain = {10: 1, 30: 3, 60: 5}.get(minutes, 3)
    ctx.character.change(stamina=gain)
    return f"发了{minutes}分钟呆"


idle = Action(
    id="idle",
    name="发呆",
    description="放空一会儿。[体力+1~5][10/30/60分钟]",
    duration=choose_minutes(10, 30, 60, default=10),
    complete=_idle,
    tags=frozenset({"idle", "rest"}),
    share=False,
)


class EatItemParams(BaseModel):
    item: str = Field(description="要吃的东西，必须是背包里有的食物")

    @field_validator("item")
    @classmethod
    def _owned(cls, item: str, info: ValidationInfo) -> str:
        ctx = decision_ctx(info)
        if ctx is not None and item not in owned(ctx.character.inventory, "food"):
            have = "、".join(owned(ctx.character.inventory, "food")) or "无"
            raise ValueError(f"背包里没有可以直接吃的「{item}」；现有：{have}")
        return item


def _eat_item(ctx: ActionContext) -> str:
    p = ctx.params
    assert isinstance(p, EatItemParams)
    food = ALL[p.item]
    ctx.character.consume_item(p.item)
    ctx.character.change(stamina=food.stamina, satiety=food.satiety)
    gain = ctx.character.recover_mood(food.mood)
    return f"吃了一个{p.item}，饱腹+{food.satiety:.0f}，心情+{gain:.0f}"


eat_item = Action(
    id="eat_item",
    name="吃背包里的东西",
    description="[效果看食物][10分钟]",
    when=Condition(
        lambda c: bool(owned(c.character.inventory, "food")), lambda _c: "背包里没有能直接吃的东西"
    )
    & below("satiety", 90),
    params=EatItemParams,
    run=_eat_item,
    offline_params=lambda ctx: {"item": owned(ctx.character.inventory, "food")[0]},
    choices=lambda ctx: {"item": one_of(owned(ctx.character.inventory, "food"))},
    duration=10,
    tags=frozenset({"snack"}),
    share=False,
)

PHONE_APPS = (
    "看了一会儿同学群里的聊天",
    "刷了刷羽浦町的本地新闻",
    "玩了一局消除小游戏",
    "听了几首喜欢的歌",
    "看了几个猫咪视频",
)


def _use_phone(ctx: ActionContext) -> str:
    minutes = (
        round((ctx.running.ends_at - ctx.running.started_at).total_seconds() / 60)
        if ctx.running
        else 10
    )
    ctx.character.phone_battery = max(0.0, ctx.character.phone_battery - minutes)
    gain = ctx.character.recover_mood(2 if minutes <= 10 else 4)
    return f"玩了{minutes}分钟手机，{ctx.rng.choice(PHONE_APPS)}，心情+{gain:.0f}"


use_phone = Action(
    id="use_phone",
    name="玩手机",
    description="reason 里写用手机做什么。[心情+2~4][电量-1%/分钟][10/30分钟]",
    when=at_least("phone_battery", 30),
    duration=choose_minutes(10, 30, default=10),
    complete=_use_phone,
    tags=frozenset({"leisure", "phone"}),
    share=False,
)
