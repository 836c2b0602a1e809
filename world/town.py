"""The town of 羽浦町: its places, opening hours, daily resources and travel links.

This is content, declared as frozen data. Actions refer to places by id (``"home"``); the
model and users read the Chinese names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class Place:
    id: str
    """Stable id used by actions and state, e.g. ``"cafe"``."""
    name: str
    """Chinese name the model and users read, e.g. ``"薄暮咖啡"``."""
    area: str
    """The district it belongs to, e.g. ``"商业区"``."""
    hours: tuple[str, str] | None = None
    """Opening hours ``("10:00", "20:00")`` in local time; None = always open."""
    resources: tuple[str, ...] = ()
    """Items that appear here every day (collected by walks)."""
    daily_resource_total: tuple[int, int] = (0, 0)
    """Min and max number of resource units that appear each morning."""
    private: bool = False
    """Each character has her own (home): two characters "at home" are not together."""
    aliases: tuple[str, ...] = ()
    """What people also call it in chat (公园, 海边); the actions done there add more
    (`place_words`)."""


@dataclass(frozen=True, kw_only=True)
class Link:
    a: str
    b: str
    minutes: int
    """Travel time either way."""
    stamina: int
    satiety: int
    fare: int = 0
    """Coins per trip (the train)."""


@dataclass(frozen=True, kw_only=True)
class Town:
    name: str
    places: dict[str, Place]
    links: tuple[Link, ...] = field(default_factory=tuple)

    def place_name(self, place_id: str) -> str:
        place = self.places.get(place_id)
        return place.name if place else place_id

    def at_place(self, place_id: str, doing: str) -> str:
        """What she does there, the place said once (`said_at`)."""
        return said_at(self.place_name(place_id), doing)

    def place_words(self, actions: Iterable[tuple[str | None, str]] = ()) -> dict[str, str]:
        """The words that name a place of the town in chat, by place id, longest first: each
        place's id, name and aliases, and the place nouns of the ``(at, name)`` of the actions
        done there (在图书馆自习 at school: 图书馆). A noun used at two places names neither,
        and never one the town's own words already name."""
        words: dict[str, str] = {}
        for pid, place in self.places.items():
            for word in (pid, place.name, *place.aliases):
                words.setdefault(word, pid)
        derived: dict[str, set[str]] = {}
        for at, name in actions:
            if at is not None and at in self.places and (m := PLACE_NOUN.match(name)):
                derived.setdefault(m.group(1), set()).add(at)
        for word, pids in derived.items():
            if word not in words and len(pids) == 1:
                words[word] = next(iter(pids))
        return dict(sorted(words.items(), key=lambda kv: -len(kv[0])))

    def neighbours(self, place_id: str) -> list[str]:
        return [k.b if k.a == place_id else k.a for k in self.links if place_id in (k.a, k.b)]

    def link(self, a: str, b: str) -> Link | None:
        for link in self.links:
            if {link.a, link.b} == {a, b}:
                return link
        return None


def said_at(place_name: str, doing: str) -> str:
    """What someone does at a place, said once: 在南风公园散步; what says where already
    (在家吃早饭, 一起在食堂吃午饭) as it is, never 在家在家吃早饭."""
    return doing if "在" in doing else f"在{place_name}{doing}"


PLACE_ENDINGS = "家店园池社边校馆堂室市站岸厅场塔山城院寺湖河楼街"
"""How Chinese place nouns end (公园, 图书馆, 海边): what tells a place in a sentence."""
PLACE_NOUN = re.compile(rf"^(?:一起)?在(.{{0,6}}[{PLACE_ENDINGS}])")
"""An action's name that says where: '在图书馆自习' → '图书馆' (the longest such noun)."""


HAURA = Town(
    name="羽浦町",
    places={
        p.id: p
        for p in (
            Place(id="home", name="家", area="家", private=True),
            Place(
                id="school",
                name="星见丘高校",
                area="星见丘高校",
                hours=("07:00", "18:00"),
                aliases=("学校",),
            ),
            Place(
                id="shop",
                name="小町商店",
                area="商业区",
                hours=("09:00", "21:00"),
                aliases=("商店", "便利店"),
            ),
            Place(id="supermarket", name="超市", area="商业区", hours=("09:00", "21:00")),
            Place(
                id="diner",
                name="日和食堂",
                area="商业区",
                hours=("07:00", "20:00"),
                aliases=("食堂", "饭馆"),
            ),
            Place(
                id="cafe",
                name="薄暮咖啡",
                area="商业区",
                hours=("10:00", "20:00"),
                aliases=("咖啡店", "咖啡馆", "咖啡厅"),
            ),
            Place(id="station", name="羽浦町站", area="商业区", aliases=("车站",)),
            Place(
                id="park",
                name="南风公园",
                area="公园周边",
                aliases=("公园",),
                resources=("野莓", "青苹果", "南风桃"),
                daily_resource_total=(1, 5),
            ),
            Place(id="pond", name="水音池", area="公园周边", aliases=("池塘",)),
            Place(id="shrine", name="结灯神社", area="公园周边", aliases=("神社",)),
            Place(
                id="coast",
                name="月汐海岸",
                area="海岸",
                aliases=("海边", "海滩", "海岸", "大海"),
                resources=("星砂贝壳", "海玻璃", "月汐珍珠"),
                daily_resource_total=(0, 2),
            ),
        )
    },
    links=(
        # home to everywhere nearby
        Link(a="home", b="school", minutes=20, stamina=7, satiety=5),
        Link(a="home", b="shop", minutes=10, stamina=5, satiety=3),
        Link(a="home", b="supermarket", minutes=10, stamina=5, satiety=3),
        Link(a="home", b="diner", minutes=10, stamina=5, satiety=3),
        Link(a="home", b="cafe", minutes=10, stamina=5, satiety=3),
        Link(a="home", b="park", minutes=10, stamina=3, satiety=2),
        Link(a="home", b="shrine", minutes=10, stamina=3, satiety=2),
        # school to the commercial district
        Link(a="school", b="shop", minutes=10, stamina=3, satiety=2),
        Link(a="school", b="supermarket", minutes=10, stamina=3, satiety=2),
        Link(a="school", b="diner", minutes=10, stamina=3, satiety=2),
        Link(a="school", b="cafe", minutes=10, stamina=3, satiety=2),
        # inside the commercial district
        Link(a="shop", b="supermarket", minutes=5, stamina=1, satiety=1),
        Link(a="shop", b="station", minutes=5, stamina=1, satiety=1),
        Link(a="supermarket", b="diner", minutes=5, stamina=1, satiety=1),
        Link(a="supermarket", b="station", minutes=5, stamina=1, satiety=1),
        Link(a="diner", b="cafe", minutes=5, stamina=1, satiety=1),
        Link(a="diner", b="station", minutes=5, stamina=1, satiety=1),
        Link(a="cafe", b="station", minutes=5, stamina=1, satiety=1),
        # the train to the coast
        Link(a="station", b="coast", minutes=15, stamina=7, satiety=5, fare=3),
        # the park area
        Link(a="park", b="pond", minutes=5, stamina=3, satiety=2),
        Link(a="park", b="shrine", minutes=5, stamina=3, satiety=2),
    ),
)
"""The default town (Yuiju's 羽浦町)."""
