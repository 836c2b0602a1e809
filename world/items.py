"""Things she can own, buy, sell, cook and eat, with prices anchored to wages.

One hour at the café pays 200 coins; a diner meal costs about 20–35, a coffee 35–55, a snack
7–15. Content, declared as frozen data like the town.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

WAGE_PER_HOUR = 200
"""What an hour of part-time work at the café pays: the anchor for every price."""


@dataclass(frozen=True, kw_only=True)
class Item:
    name: str
    kinds: frozenset[str]
    """food (eat as is), ingredient (cook), valuable (sell), fish."""
    price: int | None = None
    """Shop price; None = cannot be bought."""
    sale_price: int | None = None
    """What the supermarket pays; None = cannot be sold."""
    stamina: float = 0
    satiety: float = 0
    mood: float = 0


def _items(*items: Item) -> dict[str, Item]:
    return {i.name: i for i in items}


FOOD, ING, VAL, FISH = (
    frozenset({"food"}),
    frozenset({"ingredient"}),
    frozenset({"valuable"}),
    frozenset({"ingredient", "fish"}),
)

SHOP = _items(
    Item(name="百奇", kinds=FOOD, price=12, stamina=2, satiety=4, mood=3),
    Item(name="弹珠汽水糖", kinds=FOOD, price=8, stamina=1, satiety=2, mood=2),
    Item(name="抹茶布丁", kinds=FOOD, price=15, stamina=2, satiety=6, mood=4),
    Item(name="波子汽水", kinds=FOOD, price=10, stamina=2, satiety=2, mood=3),
    Item(name="铜锣烧", kinds=FOOD, price=12, stamina=3, satiety=6, mood=2),
    Item(name="盐味仙贝", kinds=FOOD, price=9, stamina=2, satiety=4, mood=1),
    Item(name="草莓牛奶", kinds=FOOD, price=11, stamina=3, satiety=5, mood=2),
    Item(name="红豆面包", kinds=FOOD, price=13, stamina=4, satiety=10, mood=2),
    Item(name="乌龙茶", kinds=FOOD, price=7, stamina=1, satiety=1, mood=1),
)
"""小町商店: snacks and drinks, eaten as they are."""

SUPERMARKET = _items(
    Item(name="白米", kinds=ING, price=8, stamina=4, satiety=14, mood=0),
    Item(name="鸡蛋", kinds=ING, price=6, stamina=3, satiety=8, mood=1),
    Item(name="豆腐", kinds=ING, price=6, stamina=2, satiety=7, mood=0),
    Item(name="卷心菜", kinds=ING, price=8, stamina=2, satiety=6, mood=0),
    Item(name="味噌", kinds=ING, price=8, stamina=1, satiety=3, mood=1),
    Item(name="速冻乌冬", kinds=ING, price=12, stamina=4, satiety=16, mood=1),
    Item(name="鸡腿肉", kinds=ING, price=18, stamina=6, satiety=14, mood=2),
    Item(name="鲑鱼切身", kinds=ING, price=24, stamina=6, satiety=12, mood=3),
    Item(name="咖喱块", kinds=ING, price=10, stamina=2, satiety=4, mood=2),
    Item(name="牛奶", kinds=FOOD | ING, price=10, stamina=2, satiety=5, mood=1),
)
"""超市: ingredients for cooking at home."""

DINER = _items(
    Item(name="乌冬面", kinds=FOOD, price=18, stamina=6, satiety=35, mood=2),
    Item(name="玉子烧定食", kinds=FOOD, price=22, stamina=7, satiety=40, mood=3),
    Item(name="咖喱饭", kinds=FOOD, price=26, stamina=8, satiety=45, mood=3),
    Item(name="亲子丼", kinds=FOOD, price=28, stamina=9, satiety=48, mood=4),
    Item(name="唐扬鸡块定食", kinds=FOOD, price=32, stamina=10, satiety=52, mood=4),
    Item(name="鲑鱼盐烤定食", kinds=FOOD, price=35, stamina=12, satiety=56, mood=5),
)
"""日和食堂: meals eaten on the spot."""

CAFE = _items(
    Item(name="深煎拼配", kinds=FOOD, price=35, stamina=5, satiety=8, mood=3),
    Item(name="浅煎拼配", kinds=FOOD, price=38, stamina=5, satiety=8, mood=3),
    Item(name="冰滴咖啡", kinds=FOOD, price=42, stamina=5, satiety=8, mood=4),
    Item(name="美式", kinds=FOOD, price=36, stamina=5, satiety=8, mood=2),
    Item(name="牛奶咖啡", kinds=FOOD, price=45, stamina=5, satiety=11, mood=4),
    Item(name="维也纳咖啡", kinds=FOOD, price=55, stamina=5, satiety=10, mood=5),
)
"""薄暮咖啡: coffee, drunk on the spot."""

FOUND = _items(
    Item(name="野莓", kinds=FOOD | ING, sale_price=8, stamina=3, satiety=8, mood=1),
    Item(name="青苹果", kinds=FOOD | ING, sale_price=12, stamina=5, satiety=12, mood=1),
    Item(name="南风桃", kinds=FOOD | ING, sale_price=20, stamina=6, satiety=16, mood=2),
    Item(name="星砂贝壳", kinds=VAL, sale_price=60),
    Item(name="海玻璃", kinds=VAL, sale_price=90),
    Item(name="月汐珍珠", kinds=VAL, sale_price=180),
    Item(name="鲫鱼", kinds=FISH, sale_price=18, stamina=5, satiety=12, mood=1),
    Item(name="泥鳅", kinds=FISH, sale_price=14, stamina=4, satiety=8, mood=0),
    Item(name="鲤鱼", kinds=FISH, sale_price=32, stamina=7, satiety=16, mood=2),
    Item(name="河虾", kinds=FISH, sale_price=24, stamina=4, satiety=8, mood=2),
    Item(name="鳑鲏", kinds=FISH, sale_price=16, stamina=3, satiety=6, mood=1),
    Item(name="麦穗鱼", kinds=FISH, sale_price=15, stamina=3, satiety=6, mood=1),
    Item(name="鳊鱼", kinds=FISH, sale_price=28, stamina=6, satiety=14, mood=2),
    Item(name="鲶鱼", kinds=FISH, sale_price=78, stamina=8, satiety=18, mood=3),
)
"""What she finds in the park and on the coast, or catches at the pond."""

FISH_WEIGHTS = {
    "鲫鱼": 20,
    "泥鳅": 15,
    "鲤鱼": 12,
    "河虾": 10,
    "鳑鲏": 8,
    "麦穗鱼": 7,
    "鳊鱼": 7,
    "鲶鱼": 3,
}

ALL: dict[str, Item] = {**SHOP, **SUPERMARKET, **DINER, **CAFE, **FOUND}


def item(name: str) -> Item | None:
    return ALL.get(name)


def owned(inventory: dict[str, int], kind: str) -> list[str]:
    """Names in the inventory (quantity > 0) whose item has ``kind``, in a stable order."""
    return sorted(
        n for n, q in inventory.items() if q > 0 and (i := ALL.get(n)) and kind in i.kinds
    )


def affordable(items: dict[str, Item], money: int) -> list[str]:
    """Names of ``items`` whose price is at most ``money``, in menu order."""
    return [i.name for i in items.values() if i.price is not None and i.price <= money]


def most_affordable(items: dict[str, Item], money: int) -> int:
    """How many different ``items`` any choice of that many, one each, is sure to be paid for:
    the largest n whose n dearest affordable items together cost at most ``money``."""
    prices = sorted((items[n].price or 0 for n in affordable(items, money)), reverse=True)
    total = count = 0
    for price in prices:
        if total + price > money:
            break
        total, count = total + price, count + 1
    return count


def sellable(inventory: dict[str, int]) -> list[str]:
    return sorted(n for n, q in inventory.items() if q > 0 and (i := ALL.get(n)) and i.sale_price)


def price_list(names: Iterable[str], *, sale: bool = False) -> str:
    """'乌冬面18、咖喱饭26' for the decision prompt: each item's price, or with ``sale`` what the
    supermarket pays for it."""
    return "、".join(f"{n}{ALL[n].sale_price if sale else ALL[n].price}" for n in names)


def price_range(items: dict[str, Item]) -> str:
    """'18~35金币': the cheapest and the dearest of ``items``, for an action's description."""
    prices = [i.price for i in items.values() if i.price is not None]
    return f"{min(prices)}~{max(prices)}金币"
