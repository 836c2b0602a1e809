"""`yuiju simulate` with several characters: meetings counted, the social invariants checked from
what the history store recorded, the bar of issue 22 for three characters over a week."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.conftest import at_time
from yuiju.config import load_config
from yuiju.memory.episodes import Episode
from yuiju.world.simulate import simulate, social_checks

XIAOLIN = {"kind": "person", "id": "qq:123", "name": "小林"}
SEED_NEWS = {
    "type": "tell_news",
    "character_id": "yuiju",
    "by": XIAOLIN,
    "text": "小林下周要搬家",
    "about": XIAOLIN,
}


@pytest.fixture(scope="module")
async def week(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three classmates, one simulated week (seed 1, offline policy), a piece of news told to 悠酱
    at the start."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("sim"))
        cfg = load_config(
            environ={}, overrides={"world": {"characters": ["yuiju", "kaede", "chika"]}}
        )
        return await simulate(cfg, days=7, seed=1, progress=False, commands=[SEED_NEWS])


async def test_a_week_of_three_meets_the_bar_of_the_issue(week: dict[str, Any]) -> None:
    assert week["invariant_violations"] == []
    social = week["social"]
    for cid in ("yuiju", "kaede", "chika"):
        assert week["by_character"][cid]["meetings"] == social["meetings"][cid]
        assert social["meetings_per_day"][cid] >= 1.0, social["meetings_per_day"]
    checks = social["checks"]
    assert checks["no_overlapping_conversations"]["ok"]
    assert checks["both_sides_recorded"]["ok"]
    assert "meetings" in checks["both_sides_recorded"]["evidence"]
    (news,) = social["news"]
    assert news["text"] == "小林下周要搬家" and sorted(news["reached"]) == [
        "chika",
        "kaede",
        "yuiju",
    ]
    assert news["path"][0]["to"] == "yuiju" and news["path"][0]["from"] == "小林"
    assert social["invitations"]["accepted"] >= 1
    assert 0 <= social["invitations"]["kept_share"] <= 1


async def test_one_character_has_no_meetings_and_nothing_to_break(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    report = await simulate(load_config(environ={}), days=1, seed=2, progress=False)
    assert report["social"]["meetings"] == {"yuiju": 0}
    assert all(c["ok"] for c in report["social"]["checks"].values())


def talk(cid: str, other: str, meeting: str, start: str, minutes: int) -> Episode:
    begin = at_time(start)
    return Episode(
        _id=f"cnv_{meeting}_{cid}",
        character_id=cid,
        type="conversation",
        time=begin,
        end_time=begin + timedelta(minutes=minutes),
        summary="…",
        data={"meeting_id": meeting, "participants": [cid, other]},
    )


def test_the_social_checks_find_an_overlap_and_a_missing_side() -> None:
    found = social_checks(
        {
            "yuiju": [
                talk("yuiju", "kaede", "m1", "2026-09-01 12:00", 30),
                talk("yuiju", "chika", "m2", "2026-09-01 12:20", 20),
            ],
            "kaede": [talk("kaede", "yuiju", "m1", "2026-09-01 12:00", 30)],
            "chika": [],
        }
    )
    assert not found["no_overlapping_conversations"]["ok"]
    assert "yuiju" in found["no_overlapping_conversations"]["evidence"]
    assert not found["both_sides_recorded"]["ok"]
    assert "m2" in found["both_sides_recorded"]["evidence"]
