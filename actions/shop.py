"""小町商店 and the supermarket: snacks, ingredients, and selling what she found."""

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from yuiju.world.action import (
    Action,
    ActionContext,
    Condition,
    at_least,
    decision_ctx,
    one_of,
    some_of,
)
from yuiju.world.items import (
    ALL,
    SHOP,
    SUPERMARKET,
    affordable,
    most_affordable,
    price_list,
    price_range,
    sellable,
)


class BuySnack(BaseModel):
    item: str = Field(description="要买的商品")
    quantity: int = Field(1, ge=1, le=3, description="数量 1-3")

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> "BuySnack":
        if self.item not in SHOP:
            raise ValueError(f"小町商店没有「{self.item}」，只有：{'、'.join(SHOP)}")
        ctx = decision_ctx(info)
        cost = SHOP[self.item].price * self.quantity  # type: ignore[operator]
        if ctx is not None and cost > ctx.character.money:
            raise ValueError(
                f"买 {self.quantity} 个{self.item}要 {cost} 金币，她只有 {ctx.character.money}"
            )
        return self


def _buy_snack(ctx: ActionContext) -> str:
    p = ctx.params
    assert isinstance(p, BuySnack)
    cost = SHOP[p.item].price * p.quantity  # type: ignore[operator]
    ctx.character.pay(cost)
    ctx.character.add_item(p.item, p.quantity)
    return f"在小町商店花 {cost} 金币买了{p.quantity}个{p.item}"


def _cheapest_snack(ctx: ActionContext) -> dict:
    affordable = [i for i in SHOP.values() if i.price <= ctx.character.money]  # type: ignore[operator]
    choice = (
        ctx.rng.choice(affordable) if affordable else min(SHOP.values(), key=lambda i: i.price or 0)
    )
    return {"item": choice.name, "quantity": 1}


def _snack_choices(ctx: ActionContext) -> dict:
    money = ctx.character.money
    names = affordable(SHOP, money)
    dearest = max((SHOP[n].price or 1 for n in names), default=1)
    return {"item": one_of(names), "quantity": {"maximum": max(1, min(3, money // dearest))}}


buy_snack = Action(
    id="buy_snack",
    name="在商店买零食",
    description=f"放进背包随时吃，{price_range(SHOP)}。[10分钟]",
    menu=lambda ctx: price_list(affordable(SHOP, ctx.character.money)),
    at="shop",
    when=at_least("money", min(i.price or 0 for i in SHOP.values())),
    params=BuySnack,
    run=_buy_snack,
    offline_params=_cheapest_snack,
    choices=_snack_choices,
    utility=lambda ctx: -0.8 if sum(ctx.character.inventory.get(n, 0) for n in SHOP) >= 3 else 0.0,
    duration=10,
    tags=frozenset({"shopping"}),
)


class BuyIngredients(BaseModel):
    items: list[str] = Field(min_length=1, max_length=4, description="要买的食材（各一份，1-4 种）")

    @field_validator("items")
    @classmethod
    def _known(cls, items: list[str], info: ValidationInfo) -> list[str]:
        unknown = [i for i in items if i not in SUPERMARKET]
        if unknown:
            raise ValueError(f"超市没有 {'、'.join(unknown)}")
        if len(set(items)) != len(items):
            raise ValueError("每种食材只写一次")
        ctx = decision_ctx(info)
        total = sum(SUPERMARKET[i].price or 0 for i in items)
        if ctx is not None and total > ctx.character.money:
            raise ValueError(f"一共 {total} 金币，她只有 {ctx.character.money}")
        return items


def _buy_ingredients(ctx: ActionContext) -> str:
    p = ctx.params
    assert isinstance(p, BuyIngredients)
    total = sum(SUPERMARKET[i].price or 0 for i in p.items)
    ctx.character.pay(total)
    for name in p.items:
        ctx.character.add_item(name)
    return f"在超市花 {total} 金币买了{'、'.join(p.items)}"


def _pick_ingredients(ctx: ActionContext) -> dict:
    budget = min(ctx.character.money, 40)
    staples = ["白米", "鸡蛋", "卷心菜", "豆腐", "味噌", "鸡腿肉", "速冻乌冬"]
    ctx.rng.shuffle(staples)
    chosen: list[str] = []
    total = 0
    for name in staples:
        price = SUPERMARKET[name].price or 0
        if total + price <= budget and len(chosen) < 3:
            chosen.append(name)
            total += price
    return {"items": chosen or ["鸡蛋"]}


buy_ingredients = Action(
    id="buy_ingredients",
    name="在超市买食材",
    description=f"做饭用，{price_range(SUPERMARKET)}。[15分钟]",
    menu=lambda ctx: price_list(affordable(SUPERMARKET, ctx.character.money)),
    at="supermarket",
    when=at_least("money", 6),
    params=BuyIngredients,
    run=_buy_ingredients,
    offline_params=_pick_ingredients,
    choices=lambda ctx: {
        "items": some_of(
            affordable(SUPERMARKET, ctx.character.money),
            at_most=most_affordable(SUPERMARKET, ctx.character.money),
        )
    },
    duration=15,
    tags=frozenset({"shopping"}),
)


class SellItems(BaseModel):
    items: list[str] = Field(min_length=1, description="要卖掉的东西（背包里每样全部卖掉）")

    @field_validator("items")
    @classmethod
    def _owned(cls, items: list[str], info: ValidationInfo) -> list[str]:
        ctx = decision_ctx(info)
        if ctx is not None:
            can = sellable(ctx.character.inventory)
            bad = [i for i in items if i not in can]
            if bad:
                raise ValueError(f"不能卖 {'、'.join(bad)}；能卖的只有：{'、'.join(can) or '无'}")
        return list(dict.fromkeys(items))


def _sell(ctx: ActionContext) -> str:
    p = ctx.params
    assert isinstance(p, SellItems)
    earned, sold = 0, []
    for name in p.items:
        qty = ctx.character.inventory.get(name, 0)
        ctx.character.consume_item(name, qty)
        earned += (ALL[name].sale_price or 0) * qty
        sold.append(f"{qty}个{name}")
    ctx.character.money += earned
    return f"在超市卖掉了{'、'.join(sold)}，得到 {earned} 金币"


sell_items = Action(
    id="sell_items",
    name="在超市卖东西",
    description="卖掉捡到的东西和钓到的鱼。[10分钟]",
    menu=lambda ctx: price_list(sellable(ctx.character.inventory), sale=True),
    at="supermarket",
    when=Condition(
        lambda c: bool(sellable(c.character.inventory)), lambda _c: "背包里没有能卖的东西"
    ),
    params=SellItems,
    run=_sell,
    offline_params=lambda ctx: {
        "items": [n for n in sellable(ctx.character.inventory) if "ingredient" not in ALL[n].kinds]
        or sellable(ctx.character.inventory)
    },
    choices=lambda ctx: {"items": some_of(sellable(ctx.character.inventory))},
    duration=10,
    tags=frozenset({"shopping", "work"}),
)
