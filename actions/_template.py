"""A template for a new action module: copy this file to actions/<theme>.py and edit.

Files whose name starts with "_" are never loaded, so this one is only an example.
"""

from pydantic import BaseModel, Field

from yuiju.world.action import Action, ActionContext, between, choose_minutes, condition, one_of
from yuiju.world.items import SHOP


class SnackParams(BaseModel):
    """Parameters the decision fills in (the LLM writes them in `params`)."""

    snack: str = Field(description="要吃的零食，必须是背包里有的")


def snacks_in_bag(ctx: ActionContext) -> list[str]:
    """What 小町商店 sells that she has (her bag also holds fish, ingredients, shells...)."""
    return [name for name in SHOP if ctx.character.inventory.get(name, 0) > 0]


@condition("背包里没有零食")
def has_snack(ctx: ActionContext) -> bool:
    """Preconditions are cheap and pure, and say why not."""
    return bool(snacks_in_bag(ctx))


def _first_snack(ctx: ActionContext) -> dict[str, str]:
    """How the offline policy picks the parameter (the LLM picks it in its decision)."""
    return {"snack": snacks_in_bag(ctx)[0]}


def _eat_snack(ctx: ActionContext) -> str:
    params = ctx.params
    assert isinstance(params, SnackParams)
    ctx.character.consume_item(params.snack)  # raises if she has none: checked in `when`
    ctx.character.change(satiety=8)
    return f"吃了一个{params.snack}"


eat_snack = Action(
    id="eat_snack",  # stable, ASCII, unique
    name="吃零食",  # what the model and users read; unique
    description="从背包里拿零食吃。[饱腹+8][10分钟]",  # read by the model in every decision: keep it short
    at=None,  # anywhere; or a place id from world/town.py
    when=between("09:00", "22:00") & has_snack,
    params=SnackParams,
    choices=lambda ctx: {"snack": one_of(snacks_in_bag(ctx))},
    offline_params=_first_snack,
    run=_eat_snack,  # start effects; `complete=` for effects when the duration has passed
    duration=choose_minutes(10),
    tags=frozenset({"meal"}),
)
