"""The park area and the coast: walks, fruit and treasures, fishing at the pond, the shrine."""

from pydantic import BaseModel, Field, ValidationInfo, model_validator

from yuiju.world.action import (
    Action,
    ActionContext,
    at_least,
    between,
    choose_minutes,
    decision_ctx,
    not_done_today,
    random_event,
)
from yuiju.world.items import FISH_WEIGHTS


def _walk(place: str, mood: dict[int, int], minutes_per_stamina: int, what: str, found_verb: str):
    """A walk's completion: mood by how long she walked (diminishing), a little tiredness, whatever
    lies at ``place`` today goes into her bag, and sometimes a small surprise."""

    def complete(ctx: ActionContext) -> str:
        assert ctx.running is not None
        minutes = int((ctx.running.ends_at - ctx.running.started_at).total_seconds() // 60)
        gain = ctx.character.recover_mood(mood.get(minutes, mood[30]))
        ctx.character.change(stamina=-minutes / minutes_per_stamina)
        found = ctx.take_resources(place)
        for item, count in found.items():
            ctx.character.add_item(item, count)
        random_event(ctx, 0.2)
        picked = (
            f"，还{found_verb}" + "、".join(f"{n}个{k}" for k, n in found.items()) if found else ""
        )
        return f"在{what}散步{minutes}分钟，心情+{gain:.0f}{picked}"

    return complete


walk_in_park = Action(
    id="walk_in_park",
    name="在公园散步",
    description="可能摘到野果。[心情+2/5/9/15][10/30/60/120分钟]",
    at="park",
    when=between("06:00", "21:00") & at_least("stamina", 8),
    duration=choose_minutes(10, 30, 60, 120, default=30),
    complete=_walk("park", {10: 2, 30: 5, 60: 9, 120: 15}, 15, "公园", "摘到了"),
    tags=frozenset({"leisure"}),
)


def _fish(ctx: ActionContext) -> str:
    ctx.character.change(stamina=-3)
    if ctx.rng.random() < 0.2:
        gain = ctx.character.recover_mood(1)
        return f"在水音池钓了半小时，什么也没钓到，不过很安静，心情+{gain:.0f}"
    names, weights = zip(*FISH_WEIGHTS.items(), strict=True)
    fish = ctx.rng.choices(names, weights=weights)[0]
    ctx.character.add_item(fish)
    gain = ctx.character.recover_mood(4)
    random_event(ctx, 0.1)
    return f"在水音池钓到了一条{fish}，心情+{gain:.0f}"


fish_at_pond = Action(
    id="fish_at_pond",
    name="在水音池钓鱼",
    description="鱼能做菜或卖掉。[体力-3][心情+4][30分钟]",
    at="pond",
    when=between("06:00", "19:00") & at_least("stamina", 10),
    complete=_fish,
    duration=30,
    tags=frozenset({"leisure"}),
)


class PrayParams(BaseModel):
    offer: bool = Field(description="是否投 5 金币香火钱")
    wish: str = Field("希望明天也是好天气", max_length=40, description="许的愿望，40 字以内")

    @model_validator(mode="after")
    def _afford(self, info: ValidationInfo) -> "PrayParams":
        ctx = decision_ctx(info)
        if self.offer and ctx is not None and ctx.character.money < 5:
            raise ValueError("金币不足 5，不能投香火钱，offer 填 false")
        return self


def _pray(ctx: ActionContext) -> str:
    p = ctx.params
    assert isinstance(p, PrayParams)
    if p.offer:
        ctx.character.pay(5)
    gain = ctx.character.recover_mood(8 if p.offer else 4)
    return f"在结灯神社参拜{'，投了香火钱' if p.offer else ''}，许愿「{p.wish}」，心情+{gain:.0f}"


WISHES = (
    "希望考试顺利",
    "希望明天也是好天气",
    "希望大家都平平安安",
    "希望能钓到大鱼",
    "希望打工顺利",
)

pray_at_shrine = Action(
    id="pray_at_shrine",
    name="在神社参拜",
    description="可投5金币香火钱。[心情+4，投了+8][10分钟]",
    at="shrine",
    when=between("06:00", "21:00") & not_done_today("pray_at_shrine"),
    params=PrayParams,
    run=_pray,
    offline_params=lambda ctx: {"offer": ctx.character.money >= 50, "wish": ctx.rng.choice(WISHES)},
    choices=lambda ctx: {} if ctx.character.money >= 5 else {"offer": {"const": False}},
    duration=10,
    tags=frozenset({"leisure"}),
)


walk_on_coast = Action(
    id="walk_on_coast",
    name="在海边散步",
    description="可能捡到贝壳、海玻璃或珍珠。[心情+3/7/11/17][10/30/60/120分钟]",
    at="coast",
    when=between("05:30", "21:00") & at_least("stamina", 10),
    duration=choose_minutes(10, 30, 60, 120, default=60),
    complete=_walk("coast", {10: 3, 30: 7, 60: 11, 120: 17}, 12, "月汐海岸", "捡到了"),
    tags=frozenset({"leisure"}),
)
