"""Bad input: an action whose own code raises is skipped and reported once; a bad card stops start-up."""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.conftest import at_time, make_engine
from yuiju.characters import CARDS_DIR, CardError, load_card
from yuiju.storage.history import HistoryStore
from yuiju.world.loader import Catalogue, load_actions
from yuiju.world.policies.scripted import ScriptedPolicy
from yuiju.world.policy import DecisionRequest

HEADER = """
from yuiju.world.action import Action, Condition


def _nap(ctx):
    ctx.character.change(stamina=1)
    return "打了个盹"


nap = Action(id="nap", name="打盹", description="打个盹。[体力+1][耗时10分钟]", complete=_nap, duration=10,
             tags=frozenset({"rest"}))
"""

SNIPPETS = {
    "bad_precondition": """
def _explode(ctx):
    raise RuntimeError("boom in a precondition")


bad_precondition = Action(id="bad_precondition", name="条件会出错", description="它的条件有 bug。",
                          when=Condition(_explode, lambda _c: "?"), tags=frozenset({"leisure"}))
""",
    "bad_executor": """
def _half_then_raise(ctx):
    ctx.character.pay(100)
    ctx.character.add_item("百奇", 5)
    raise RuntimeError("boom in an executor")


bad_executor = Action(id="bad_executor", name="开始会出错", description="它的开始效果有 bug。", run=_half_then_raise,
                      duration=10, tags=frozenset({"leisure"}))
""",
    "bad_completion": """
def _start(ctx):
    ctx.character.pay(10)
    return "开始了"


def _complete_then_raise(ctx):
    ctx.character.money += 1000
    ctx.character.change(mood=-30, stamina=-30)
    ctx.character.add_item("月汐珍珠", 3)
    ctx.world.places["park"].resources = {"野莓": 99}
    raise RuntimeError("boom in a completion")


bad_completion = Action(id="bad_completion", name="结束会出错", description="它的结束效果有 bug。", run=_start,
                        complete=_complete_then_raise, duration=10, tags=frozenset({"leisure"}))
""",
}


def catalogue(tmp_path: Path, *names: str, real: bool = False) -> Catalogue:
    folder = tmp_path / f"broken_{'_'.join(names)}"
    folder.mkdir()
    source = HEADER + "".join(SNIPPETS[n] for n in names)
    if real:  # the real catalogue has its own idle; keep only the broken ones
        source = source.replace(
            'nap = Action(id="nap", name="打盹"', '_nap_action = Action(id="nap", name="打盹"'
        )
    (folder / "broken.py").write_text(textwrap.dedent(source), encoding="utf-8")
    loaded = load_actions(package="actions" if real else None, extra_dirs=[folder])
    assert loaded.broken == {}
    return loaded


def prefer(action_id: str, otherwise: str = "nap") -> ScriptedPolicy:
    """Choose ``action_id`` whenever it is a candidate, else ``otherwise``."""

    def choose(request: DecisionRequest) -> str:
        ids = {a.id for a in request.candidates}
        return action_id if action_id in ids else otherwise

    return ScriptedPolicy(choose)


def alternate(action_id: str, otherwise: str = "nap") -> ScriptedPolicy:
    """Choose ``action_id`` unless she has just done it (then ``otherwise``)."""

    def choose(request: DecisionRequest) -> str:
        return otherwise if request.ctx.character.last_action == action_id else action_id

    return ScriptedPolicy(choose)


def reports(caplog: pytest.LogCaptureFixture, action_id: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "yuiju.world.behavior" and f"action {action_id!r}" in r.getMessage()
    ]


async def test_an_action_whose_precondition_raises_is_skipped_and_reported_once(
    redis: aioredis.Redis,
    sqlite_history: HistoryStore,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = prefer("bad_precondition")
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=script,
        catalogue=catalogue(tmp_path, "bad_precondition"),
        start="2026-09-01 06:00",
    )

    with caplog.at_level(logging.ERROR, logger="yuiju.world.behavior"):
        await kit.engine.run(until=at_time("2026-09-01 09:00"))

    assert kit.stats.decisions >= 15 and kit.stats.completions >= 15  # she carries on
    assert all("bad_precondition" not in {a.id for a in r.candidates} for r in script.requests)
    assert kit.stats.broken_actions == {"bad_precondition": "precondition"}
    [record] = reports(caplog, "bad_precondition")
    assert record.levelno == logging.ERROR and "precondition" in record.getMessage()
    assert record.exc_info is not None and "boom in a precondition" in str(record.exc_info[1])
    assert kit.stats.fallbacks == 0


async def test_with_the_real_catalogue_a_broken_precondition_does_not_stop_her_day(
    redis: aioredis.Redis,
    sqlite_history: HistoryStore,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kit = await make_engine(
        redis,
        sqlite_history,
        catalogue=catalogue(tmp_path, "bad_precondition", real=True),
        start="2026-09-05 06:00",
    )

    with caplog.at_level(logging.ERROR, logger="yuiju.world.behavior"):
        await kit.engine.run(until=at_time("2026-09-06 09:00"))

    assert len(reports(caplog, "bad_precondition")) == 1
    done = {r["id"] for r in kit.stats.timeline}
    assert {"sleep", "wake_up"} <= done and len(done) >= 8
    assert kit.stats.no_candidates == 0


async def test_an_action_whose_executor_raises_is_skipped_for_that_decision_and_reported_once(
    redis: aioredis.Redis,
    sqlite_history: HistoryStore,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = prefer("bad_executor")
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=script,
        catalogue=catalogue(tmp_path, "bad_executor"),
        start="2026-09-01 06:00",
    )

    with caplog.at_level(logging.ERROR, logger="yuiju.world.behavior"):
        await kit.engine.run(until=at_time("2026-09-01 07:00"))

    her = await kit.character()
    assert her is not None
    assert her.money == 300 and "百奇" not in her.inventory  # nothing half-written
    assert {r["id"] for r in kit.stats.timeline} == {"nap"}  # she did something else each time
    assert kit.stats.completions >= 5
    assert kit.stats.broken_actions == {"bad_executor": "executor"}
    assert len(reports(caplog, "bad_executor")) == 1
    await kit.engine.flush_outbox(force=True)
    episodes = await sqlite_history.find("episodes", eq={"type": "behavior"})
    assert episodes and all(e["data"]["action"] == "nap" for e in episodes)


async def test_a_completion_that_raises_ends_the_action_without_its_effects_and_is_reported_once(
    redis: aioredis.Redis,
    sqlite_history: HistoryStore,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=alternate("bad_completion"),
        catalogue=catalogue(tmp_path, "bad_completion"),
        start="2026-09-01 06:00",
    )
    await kit.engine.run(max_steps=1)
    running = await kit.character()
    world_before = await kit.store.load_world()
    assert (
        running is not None
        and running.running is not None
        and running.running.action_id == "bad_completion"
    )
    assert running.money == 290  # the start effect stands
    eid = running.running.episode_id

    with caplog.at_level(logging.ERROR, logger="yuiju.world.behavior"):
        await kit.loop.step(at_time("2026-09-01 06:10"))  # no world tick in between: no needs drift
        after = await kit.character()
        world_after = await kit.store.load_world()
        await kit.engine.run(
            until=at_time("2026-09-01 08:00")
        )  # it crashes at every other completion

    assert after is not None
    keep = ("money", "stamina", "satiety", "mood", "inventory", "location", "asleep")
    assert {k: getattr(after, k) for k in keep} == {k: getattr(running, k) for k in keep}
    assert after.last_action == "bad_completion"
    assert after.last_event == "（这件事结束时出了点意外，没有带来变化）"
    assert world_before is not None and world_after is not None
    assert world_after.places["park"].resources == world_before.places["park"].resources

    assert kit.stats.completions >= 10
    assert sum(r["id"] == "bad_completion" for r in kit.stats.timeline) >= 5
    assert kit.stats.broken_actions == {"bad_completion": "completion"}
    assert len(reports(caplog, "bad_completion")) == 1
    await kit.engine.flush_outbox(force=True)
    episode = await sqlite_history.get("episodes", eid)
    assert episode is not None and episode["status"] == "completed"
    assert episode["data"]["notes"] == ["（这件事结束时出了点意外，没有带来变化）"]
    assert episode["data"]["stats_after"]["money"] == 290


async def test_the_decision_after_a_crashed_completion_sees_the_restored_state(
    redis: aioredis.Redis, sqlite_history: HistoryStore, tmp_path: Path
) -> None:
    script = alternate("bad_completion")
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=script,
        catalogue=catalogue(tmp_path, "bad_completion"),
        start="2026-09-01 06:00",
    )
    await kit.engine.run(max_steps=1)
    running = await kit.character()
    assert running is not None

    await kit.loop.step(at_time("2026-09-01 06:10"))

    seen = script.requests[1].ctx.character
    assert (seen.money, seen.mood, seen.inventory) == (
        running.money,
        running.mood,
        running.inventory,
    )
    assert seen.running is None


# -- character cards ---------------------------------------------------------------------------

YUIJU = (CARDS_DIR / "yuiju" / "card.toml").read_text(encoding="utf-8")


def write_card(tmp_path: Path, text: str, character_id: str = "yuiju") -> Path:
    folder = tmp_path / character_id
    folder.mkdir()
    path = folder / "card.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda t: t.replace('name = "悠酱"\n', ""), "name"),
        (lambda t: t.replace("persona = ", "persona_text = ", 1), "persona"),
        (lambda t: t.replace('likes = ["小说"', 'likes = "小说" #', 1), "likes"),
        (lambda t: t.replace("stamina = 80", "stamina = 180"), "start.stamina"),
        (lambda t: t.replace("money = 300", 'money = "很多"'), "start.money"),
        (lambda t: t.replace('id = "yuiju"', 'id = "Yuiju Chan"'), "id"),
    ],
    ids=[
        "missing-name",
        "missing-persona",
        "likes-not-a-list",
        "stamina-out-of-range",
        "money-not-a-number",
        "bad-id",
    ],
)
def test_a_card_with_a_missing_or_wrong_field_names_the_file_the_field_and_the_fix(
    tmp_path: Path, edit, field: str
) -> None:
    text = edit(YUIJU)
    assert text != YUIJU
    path = write_card(tmp_path, text)

    with pytest.raises(CardError) as raised:
        load_card("yuiju", folder=tmp_path)

    message = str(raised.value)
    assert str(path) in message and field in message and "Fix" in message, message


def test_the_shipped_card_loads_from_a_copy(tmp_path: Path) -> None:
    write_card(tmp_path, YUIJU)
    assert load_card("yuiju", folder=tmp_path) == load_card("yuiju")


def test_a_card_that_is_not_toml_names_the_file(tmp_path: Path) -> None:
    path = write_card(tmp_path, YUIJU + "\nthis is = = not toml\n")
    with pytest.raises(CardError, match="not valid TOML") as raised:
        load_card("yuiju", folder=tmp_path)
    assert str(path) in str(raised.value)
