"""A well-formed user action module (loaded by tests/test_loader.py)."""

from yuiju.world.action import Action

water_plants = Action(
    id="water_plants",
    name="给花浇水",
    description="给阳台上的花浇水。[心情+2][耗时10分钟]",
    at="home",
    duration=10,
    tags=frozenset({"leisure"}),
)

ALIAS = water_plants  # the same object twice is one action, not a duplicate
