"""Getting around 羽浦町: one movement each way along every link of the town map.

Generated from ``world/town.py``'s links, so a new link brings its two movements with it. Costs
come from the link. She may walk past closed shops (the commercial district's streets connect
the station to home); a closed place simply offers none of its own actions when she arrives.
"""

from yuiju.world.action import Action, Condition, always, between, school_day, travel
from yuiju.world.town import HAURA

OUTDOORS = {"park", "pond", "shrine", "coast"}
"""Places she does not set out for at night."""

NAMES = {("school", "home"): "放学回家"}
"""Names that read better than the generated 从X去Y / 从X回家."""

CONDITIONS: dict[tuple[str, str], Condition] = {
    ("home", "school"): school_day & between("06:30", "16:00"),
}
"""Extra preconditions for particular movements."""


def _id(src: str, dst: str) -> str:
    if src == "home":
        return f"go_to_{dst}"
    if dst == "home":
        return f"go_home_from_{src}"
    return f"go_from_{src}_to_{dst}"


def _name(src: str, dst: str) -> str:
    if (src, dst) in NAMES:
        return NAMES[(src, dst)]
    if dst == "home":
        return f"从{HAURA.place_name(src)}回家"
    return f"从{HAURA.place_name(src)}去{HAURA.place_name(dst)}"


def _movements() -> list[Action]:
    out = []
    for link in HAURA.links:
        for src, dst in ((link.a, link.b), (link.b, link.a)):
            when = CONDITIONS.get((src, dst), always)
            if (
                dst in OUTDOORS and src not in OUTDOORS
            ):  # heading back out of the park area is always fine
                when = when & between("05:30", "21:30")
            out.append(
                travel(
                    id=_id(src, dst),
                    name=_name(src, dst),
                    src=src,
                    dst=dst,
                    town=HAURA,
                    when=when,
                    label="回家" if dst == "home" else None,
                )
            )
    return out


MOVEMENTS = _movements()
