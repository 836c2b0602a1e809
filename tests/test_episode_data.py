"""Typed episode records (issue 29): every episode the world writes fits its kind's model with
no key left over, and `Episode.typed()` gives it back typed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import at_time, make_character
from yuiju.config import load_config
from yuiju.memory.episode_data import BehaviorData, ConversationData, PlanData
from yuiju.memory.episodes import Episode
from yuiju.world.loader import load_actions
from yuiju.world.policy import Decision
from yuiju.world.simulate import simulate
from yuiju.world.town import HAURA
from yuiju.world.transitions import Env, apply_plans

XIAOLIN = {"kind": "person", "id": "qq:123", "name": "小林"}
COMMANDS = [
    {"type": "tell_news", "character_id": "yuiju", "by": XIAOLIN, "text": "小林下周要搬家"},
    {"type": "give_item", "character_id": "kaede", "by": XIAOLIN, "item": "铜锣烧"},
    {
        "type": "invite",
        "character_id": "yuiju",
        "by": XIAOLIN,
        "place": "park",
        "start": "2026-09-05T10:00:00+08:00",
        "activity": "一起散步",
        "lenient": True,
    },
    {
        "type": "remind",
        "character_id": "chika",
        "by": XIAOLIN,
        "text": "带伞",
        "at": "2026-09-02T08:00:00+08:00",
        "lenient": True,
    },
]


def written(data_dir: Path) -> list[Episode]:
    db = sqlite3.connect(data_dir / "history.sqlite3")
    try:
        docs = [json.loads(d) for (d,) in db.execute("SELECT _doc FROM episodes ORDER BY _id")]
    finally:
        db.close()
    return [Episode.model_validate(_dates(d)) for d in docs]


def _dates(value: Any) -> Any:
    """The stored form of a datetime (``{"$date": ...}``) back to its ISO text."""
    if isinstance(value, dict):
        if set(value) == {"$date"}:
            return value["$date"]
        return {k: _dates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_dates(v) for v in value]
    return value


@pytest.fixture(scope="module")
async def episodes(tmp_path_factory: pytest.TempPathFactory) -> list[Episode]:
    """Three characters for five days with news, a gift, an invitation and a reminder (utility
    policy), and a decision's plan changes."""
    out: list[Episode] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("cwd"))
        three = load_config(
            environ={}, overrides={"world": {"characters": ["yuiju", "kaede", "chika"]}}
        )
        town = tmp_path_factory.mktemp("town")
        await simulate(three, days=5, seed=1, progress=False, data_dir=town, commands=COMMANDS)
        out += written(town)
    out += plan_change_episodes()
    return out


def plan_change_episodes() -> list[Episode]:
    """The plan episodes of a decision that creates a plan and updates it."""
    catalogue = load_actions("actions")
    env = Env(town=HAURA, catalogue=catalogue)
    changes: list[dict[str, Any]] = [
        {"scope": "shortTerm", "changeType": "created", "nextPlan": "复习数学", "reason": "考试"},
        {
            "scope": "shortTerm",
            "changeType": "updated",
            "currentPlan": "复习数学",
            "nextPlan": "复习数学和英语",
        },
    ]
    decision = Decision(action=catalogue.actions["idle"], reason="想想", plan_changes=changes)
    entries = apply_plans(make_character(), decision, at_time("2026-09-01 08:00"), "bhv_x", env)
    assert len(entries) == 2
    return [Episode.model_validate(e["doc"]) for e in entries]


async def test_every_episode_written_fits_its_kind_with_nothing_left_over(
    episodes: list[Episode],
) -> None:
    kinds = {e.type for e in episodes}
    assert kinds >= {"behavior", "plan", "conversation"}
    for episode in episodes:
        data = episode.typed()
        if episode.type in ("weather", "system"):
            assert data is None
            continue
        assert data is not None and not data.model_extra, (episode.id, data.model_extra)
        assert data.dump() == episode.data  # read back, it writes the same document


async def test_typed_records_read_by_attribute(episodes: list[Episode]) -> None:
    behaviors = [e.typed() for e in episodes if e.type == "behavior" and e.status == "completed"]
    assert behaviors and all(isinstance(b, BehaviorData) for b in behaviors)
    assert all(b.duration_minutes is not None for b in behaviors if isinstance(b, BehaviorData))
    met = [
        d
        for e in episodes
        if isinstance(d := e.typed(), ConversationData) and d.meeting_id is not None
    ]
    assert met and all(d.partners and d.lines is not None for d in met)
    plans = [d for e in episodes if isinstance(d := e.typed(), PlanData)]
    assert any(d.change is not None for d in plans)  # a decision's plan changes
    assert any(d.note is not None for d in plans) and any(d.appointment for d in plans)
