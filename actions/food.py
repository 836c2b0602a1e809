"""Eating out and drinking coffee: 日和食堂 and 薄暮咖啡, plus the café part-time job."""

from pydantic import BaseModel, Field, ValidationInfo, model_validator

from yuiju.world.action import (
    Action,
    ActionContext,
    Condition,
    at_least,
    below,
    between,
    choose_minutes,
    decision_ctx,
    not_done_today,
    one_of,
    random_event,
)
from yuiju.world.clock import in_window, is_school_day, minutes_until
from yuiju.world.items import CAFE, DINER, WAGE_PER_HOUR, Item, affordable, price_list, price_range


def _order_model(menu: dict[str, Item], what: str) -> type[BaseModel]:
    class Order(BaseModel):
        item: str = Field(description=what)

        @model_validator(mode="after")
        def _check(self, info: ValidationInfo) -> "Order":
            if self.item not in menu:
                raise ValueError(f"菜单上没有「{self.item}」，只有：{'、'.join(menu)}")
            ctx = decision_ctx(info)
            price = menu[self.item].price or 0
            if ctx is not None and price > ctx.character.money:
                raise ValueError(f"{self.item}要 {price} 金币，她只有 {ctx.character.money}")
            return self

    return Order


DinerOrder = _order_model(DINER, "要点的餐")
CafeOrder = _order_model(CAFE, "要点的咖啡")


def _pay_for(menu: dict[str, Item]):
    def run(ctx: ActionContext) -> str:
        name = ctx.params.item  # type: ignore[union-attr]
        ctx.character.pay(menu[name].price or 0)
        return f"点了{name}，付了 {menu[name].price} 金币"

    return run


def _consume(menu: dict[str, Item], verb: str):
    def complete(ctx: ActionContext) -> str:
        assert ctx.running is not None and ctx.running.params
        food = menu[ctx.running.params["item"]]
        ctx.character.change(stamina=food.stamina, satiety=food.satiety)
        gain = ctx.character.recover_mood(food.mood)
        random_event(ctx, 0.1)
        return f"{verb}{food.name}，饱腹+{food.satiety:.0f}，心情+{gain:.0f}"

    return complete


def _affordable(menu: dict[str, Item]):
    def choose(ctx: ActionContext) -> dict:
        return {"item": ctx.rng.choice(affordable(menu, ctx.character.money))}

    return choose


eat_at_diner = Action(
    id="eat_at_diner",
    name="在日和食堂吃饭",
    description=f"{price_range(DINER)}。[饱腹+35~56][体力+6~12][30分钟]",
    menu=lambda ctx: price_list(affordable(DINER, ctx.character.money)),
    at="diner",
    when=at_least("money", min(i.price or 0 for i in DINER.values())) & below("satiety", 85),
    params=DinerOrder,
    run=_pay_for(DINER),
    complete=_consume(DINER, "在日和食堂吃了"),
    offline_params=_affordable(DINER),
    choices=lambda ctx: {"item": one_of(affordable(DINER, ctx.character.money))},
    duration=30,
    tags=frozenset({"meal"}),
)

drink_coffee = Action(
    id="drink_coffee",
    name="在咖啡店喝咖啡",
    description=f"一天一杯，{price_range(CAFE)}。[心情+2~5][体力+5][30分钟]",
    menu=lambda ctx: price_list(affordable(CAFE, ctx.character.money)),
    at="cafe",
    when=at_least("money", min(i.price or 0 for i in CAFE.values()))
    & not_done_today("drink_coffee"),
    params=CafeOrder,
    run=_pay_for(CAFE),
    complete=_consume(CAFE, "在薄暮咖啡喝了"),
    offline_params=_affordable(CAFE),
    choices=lambda ctx: {"item": one_of(affordable(CAFE, ctx.character.money))},
    duration=30,
    tags=frozenset({"leisure"}),
    share=False,
)


def _work(ctx: ActionContext) -> str:
    assert ctx.running is not None
    hours = round((ctx.running.ends_at - ctx.running.started_at).total_seconds() / 3600, 2)
    pay = round(WAGE_PER_HOUR * hours)
    ctx.character.money += pay
    ctx.character.change(stamina=-8 * hours, satiety=-6 * hours, mood=-3 * hours)
    random_event(ctx, 0.2)
    return f"在薄暮咖啡打工{hours:g}小时，赚了 {pay} 金币"


def _work_minutes(ctx: ActionContext) -> int:
    asked = choose_minutes(60, 120, 180, default=120)(ctx)
    return min(asked, minutes_until(ctx.now, "20:00"))


def _not_in_class(ctx: ActionContext) -> bool:
    return not (is_school_day(ctx.now.date()) and in_window(ctx.now, "07:00", "16:30"))


_work_minutes.tiers = (60, 120, 180)  # type: ignore[attr-defined]

work_at_cafe = Action(
    id="work_at_cafe",
    name="在咖啡店打工",
    description=f"时薪{WAGE_PER_HOUR}金币，19:00前开始。[体力-8/小时][心情-3/小时][60/120/180分钟]",
    at="cafe",
    when=between("10:00", "19:00")
    & at_least("stamina", 25)
    & at_least("satiety", 20)
    & Condition(_not_in_class, lambda _c: "现在要上课"),
    duration=_work_minutes,
    complete=_work,
    tags=frozenset({"work"}),
)
