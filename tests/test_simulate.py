"""``yuiju simulate``: the real engine under a simulated clock, deterministic for a seed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from yuiju.config import load_config
from yuiju.world.simulate import TIMING_FIELDS, simulate


def without_timing(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in TIMING_FIELDS}


@pytest.fixture(scope="module")
async def two_days(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    """Two runs of the same two school days with seed 7 (computed once for this module)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("sim"))  # no stray yuiju.toml from the working dir
        cfg = load_config(environ={})
        first = await simulate(cfg, days=2, seed=7, progress=False)
        second = await simulate(cfg, days=2, seed=7, progress=False)
    return first, second


async def test_the_same_seed_gives_the_same_report(two_days: tuple[dict, dict]) -> None:
    first, second = two_days
    assert without_timing(first) == without_timing(second)
    assert set(TIMING_FIELDS) <= set(first)


async def test_a_simulated_life_breaks_no_invariant(two_days: tuple[dict, dict]) -> None:
    report, _ = two_days
    assert report["invariant_violations"] == []
    assert report["decisions"] > 10 and report["fallbacks"] == 0
    assert report["episodes"] == report["decisions"]  # every decision has exactly one episode
    assert report["completions"] in (report["decisions"], report["decisions"] - 1)


async def test_she_eats_every_day_and_attends_class_on_school_days(
    two_days: tuple[dict, dict],
) -> None:
    report, _ = two_days
    full_days = {
        day: stats
        for day, stats in report["per_day"].items()
        if day in ("2026-09-01", "2026-09-02")
    }
    assert len(full_days) == 2
    for day, stats in full_days.items():
        assert stats["meals"] >= 1, day
        assert stats["school_day"] is True
        assert stats["school_minutes"] > 0, day
        assert stats["min_satiety"] > 0 and stats["min_stamina"] > 0


async def test_a_different_seed_gives_a_different_life(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, two_days: tuple[dict, dict]
) -> None:
    monkeypatch.chdir(tmp_path)
    other = await simulate(load_config(environ={}), days=2, seed=8, progress=False)
    assert other["timeline"] != two_days[0]["timeline"]
    assert other["invariant_violations"] == []


async def test_a_weekend_has_no_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    report = await simulate(
        load_config(environ={}), days=1, seed=7, progress=False, start="2026-09-05T06:00"
    )  # Saturday
    assert "attend_class" not in report["action_histogram"]
    assert report["per_day"]["2026-09-05"]["meals"] >= 1
    assert report["invariant_violations"] == []


async def test_the_report_counts_llm_tokens_per_simulated_day_by_purpose_and_calls_per_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from yuiju.llm import FunctionChatModel
    from yuiju.llm.testing import schema_following

    monkeypatch.chdir(tmp_path)
    model = FunctionChatModel(schema_following(seed=1))
    report = await simulate(
        load_config(environ={}), days=2, seed=1, policy="llm", chat_model=model, progress=False
    )

    llm = report["llm"]
    decide = llm["by_purpose"]["decide"]
    assert decide["calls"] == len(model.calls) == report["llm_calls"]
    assert decide["prompt_tokens"] > 0 and decide["completion_tokens"] > 0 and decide["failed"] == 0
    assert llm["per_simulated_day"]["decide"]["prompt_tokens"] == round(
        decide["prompt_tokens"] / 2, 1
    )
    assert llm["calls_per_decision"] == round(decide["calls"] / report["decisions"], 3)
    assert llm["first_attempt_acceptance"] == 1.0 and llm["breaker"] == {"opened": 0, "rejected": 0}
    assert set(model.max_tokens) == {400} and set(model.purposes) == {
        "decide"
    }  # bounded, by purpose


async def test_the_report_lists_what_every_decision_offered(two_days: tuple[dict, dict]) -> None:
    """A new action can be seen offered (or never offered) from the report alone."""
    from yuiju.world.loader import load_actions

    report, _ = two_days
    offered = report["offered"]
    assert len(offered) == report["decisions"]  # no decision without a candidate here
    for decision in offered:
        assert decision["chosen"] in decision["candidates"], decision
        assert decision["character"] == "yuiju" and decision["decided_by"]
    # every action she did was chosen from what that decision offered
    chosen = [(d["time"], d["chosen"]) for d in offered]
    assert all((r["start"], r["id"]) in chosen for r in report["timeline"])
    counts = report["offered_histogram"]
    assert counts["wake_up"] == sum("wake_up" in d["candidates"] for d in offered) > 0
    everything = {a.id for a in load_actions()}
    assert report["never_offered"] == sorted(everything - set(counts))
    assert "work_at_cafe" in report["never_offered"]  # two school days: no time for the café
