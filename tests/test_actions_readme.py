"""actions/README.md's worked example (actions/_template.py) loads, is offered, and runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import make_ctx
from yuiju.world.errors import InvalidDecision
from yuiju.world.loader import load_actions
from yuiju.world.policies.utility import UtilityPolicy
from yuiju.world.policy import DecisionRequest, RawDecision, validate_decision
from yuiju.world.randomness import Randomness

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_points_at_the_template_and_the_helpers_it_names_exist() -> None:
    readme = (ROOT / "actions" / "README.md").read_text(encoding="utf-8")
    assert "_template.py" in readme
    import yuiju.world.action as api

    for helper in (
        "between",
        "at_least",
        "below",
        "school_day",
        "not_done_today",
        "has_item",
        "condition",
        "choose_minutes",
        "until",
        "travel",
        "one_of",
        "some_of",
    ):
        assert helper in readme and hasattr(api, helper), helper


def _copy_template(tmp_path: Path) -> Path:
    folder = tmp_path / "my_actions"
    folder.mkdir()
    shutil.copy(ROOT / "actions" / "_template.py", folder / "snacks.py")  # copied: no leading "_"
    return folder


def test_the_template_is_never_loaded_from_actions() -> None:
    assert "eat_snack" not in load_actions().actions


async def test_the_template_offers_a_snack_in_the_bag_never_a_fish(tmp_path: Path) -> None:
    snack = load_actions(package=None, extra_dirs=[_copy_template(tmp_path)]).actions["eat_snack"]

    only_a_fish = make_ctx("2026-09-05 15:00", satiety=40, inventory={"鲫鱼": 1})
    assert not snack.available(only_a_fish)
    assert snack.why_not(only_a_fish) == "背包里没有零食"

    ctx = make_ctx("2026-09-05 15:00", satiety=40, inventory={"鲫鱼": 1, "铜锣烧": 1})
    assert snack.available(ctx)
    assert snack.choices is not None and snack.choices(ctx) == {"snack": {"enum": ["铜锣烧"]}}
    decision = await UtilityPolicy(all_actions=[snack]).decide(
        DecisionRequest(ctx=ctx, candidates=[snack], randomness=Randomness.seeded(1))
    )
    assert decision.params is not None and decision.params.snack == "铜锣烧"


async def test_a_copied_template_loads_is_offered_and_runs(tmp_path: Path) -> None:
    catalogue = load_actions(package=None, extra_dirs=[_copy_template(tmp_path)])
    assert not catalogue.broken
    snack = catalogue.actions["eat_snack"]

    hungry_without_snacks = make_ctx("2026-09-05 15:00", satiety=40)
    assert not snack.available(hungry_without_snacks)
    assert snack.why_not(hungry_without_snacks) == "背包里没有零食"

    ctx = make_ctx("2026-09-05 15:00", satiety=40, inventory={"铜锣烧": 2})
    assert snack.available(ctx)
    # the offline policy fills the parameter, the same validation as the LLM's answer applies
    decision = await UtilityPolicy(all_actions=list(catalogue)).decide(
        DecisionRequest(ctx=ctx, candidates=[snack], randomness=Randomness.seeded(1))
    )
    assert decision.params is not None and decision.params.snack == "铜锣烧"
    ctx.params = decision.params
    summary = snack.run(ctx)
    assert summary == "吃了一个铜锣烧"
    assert ctx.character.inventory == {"铜锣烧": 1} and ctx.character.satiety == 48

    wrong = RawDecision(action="吃零食", reason="饿了", params={})
    with pytest.raises(
        InvalidDecision, match="snack"
    ):  # a missing parameter goes back to the model
        validate_decision(wrong, [snack], "test", ctx)
