"""Her diary lines pass the closed-world grounding check (issue 30): a diary line she did not
live is sent back to the model with the claim it names and cut after the last round, even when
the model's own review waves everything through; what she did, in the diary's own words, passes
unchanged; people she names must be people she met that day."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TZ, cards_of
from yuiju import cli as yuiju_cli
from yuiju.config import YuijuConfig, load_config
from yuiju.llm import FunctionChatModel
from yuiju.llm.model import ChatMessage, JsonSchema
from yuiju.memory.diary import DIARIES, DiaryVoice, DiaryWriter
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.episodes import Episode, EpisodeRepo
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.vectors import QdrantClientStore
from yuiju.message.diary_grounding import DiaryGrounding
from yuiju.storage.history import HistoryStore
from yuiju.world.clock import SimClock
from yuiju.world.loader import load_actions
from yuiju.world.runtime import build_runtime
from yuiju.world.town import HAURA

CATALOGUE = load_actions("yuiju.actions")
ACTIONS = {a.id: a for a in CATALOGUE}
DAY = date(2026, 9, 1)  # a Tuesday: no week or month summary follows
BEDTIME = datetime(2026, 9, 1, 22, 30, tzinfo=TZ)
VOICE = DiaryVoice(name="悠酱", persona="你是悠酱，十六岁的高中生。")
CHECK = DiaryGrounding.build(CATALOGUE, cards_of(["yuiju", "chika", "kaede"]), tz=TZ)


def done(
    action_id: str, when: str, minutes: int = 30, result: str = "", *, day: date = DAY
) -> Episode:
    """A behavior episode as the engine writes it."""
    action = ACTIONS[action_id]
    place = action.at or "home"
    hour, minute = map(int, when.split(":"))
    start = datetime(day.year, day.month, day.day, hour, minute, tzinfo=TZ)
    return Episode.model_validate(
        {
            "_id": f"{action_id}-{day.isoformat()}-{when}",
            "character_id": "yuiju",
            "type": "behavior",
            "time": start,
            "end_time": start + timedelta(minutes=minutes),
            "status": "completed",
            "summary": f"悠酱在{HAURA.place_name(place)}开始{action.name}",
            "data": {
                "action": action_id,
                "name": action.name,
                "place": place,
                "reason": "",
                "decided_by": "utility",
                "result": result,
            },
        }
    )


def met(who: str, name: str, when: str, action_id: str = "coast_walk_together") -> Episode:
    """A meeting's conversation episode, as `world.social` writes it."""
    hour, minute = map(int, when.split(":"))
    start = datetime(DAY.year, DAY.month, DAY.day, hour, minute, tzinfo=TZ)
    return Episode.model_validate(
        {
            "_id": f"cnv_{who}_{when}",
            "character_id": "yuiju",
            "type": "conversation",
            "time": start,
            "end_time": start + timedelta(minutes=40),
            "status": "logged",
            "summary": f"悠酱和{name}一起在月汐海岸散步。{name}说「海风好舒服」",
            "data": {
                "meeting_id": f"m_{who}",
                "with": [{"id": who, "name": name}],
                "place": "coast",
                "action": action_id,
                "lines": [{"speaker": who, "name": name, "text": "海风好舒服"}],
                "news": [],
            },
        }
    )


THE_DAY = [
    done("wake_up", "07:00", 10),
    done("eat_breakfast", "07:10", 20),
    done("go_to_park", "14:00", 20),
    done("walk_in_park", "14:20", 60, "在公园捡到了野莓"),
    done("go_home_from_park", "15:20", 20),
    done("cook_and_eat", "18:30", 40),
]


def draft(*sentences: str, cite: str = "walk_in_park-2026-09-01-14:20") -> str:
    return json.dumps(
        {"paragraphs": [[{"text": t, "episode_ids": [cite]} for t in sentences]]},
        ensure_ascii=False,
    )


def waving_through(drafts: Sequence[str]) -> FunctionChatModel:
    """A model whose drafts are scripted and whose review finds every sentence supported."""
    left = list(drafts)

    def answer(messages: list[ChatMessage], schema: JsonSchema | None) -> str:
        assert schema is not None
        if schema.name == "diary_review":
            return '{"unsupported": []}'
        if schema.name == "diary":
            return left.pop(0)
        return json.dumps({"text": "这段时间过得很平静。"}, ensure_ascii=False)

    return FunctionChatModel(answer)


async def writer(
    history: HistoryStore,
    model: FunctionChatModel,
    episodes: Sequence[Episode] = THE_DAY,
    *,
    rounds: int = 1,
    check: DiaryGrounding | None = CHECK,
) -> DiaryWriter:
    repo = EpisodeRepo(history)
    await repo.ensure()
    for e in episodes:
        await repo.put(e)
    w = DiaryWriter(
        history, repo, model=model, voice=VOICE, tz=TZ, review_rounds=rounds, claim_check=check
    )
    await w.ensure()
    return w


def revision_requests(model: FunctionChatModel) -> list[str]:
    """What the model read when asked to revise its draft."""
    return [
        str(call[-1]["content"])
        for call, schema in zip(model.calls, model.schemas, strict=True)
        if schema is not None and schema.name == "diary" and len(call) > 1
    ]


async def test_an_invented_line_is_sent_back_and_cut_though_the_review_passes_everything(
    history: HistoryStore,
) -> None:
    """Before: a review that waved everything through let 「下午在图书馆看书」 into her diary."""
    model = waving_through(
        [
            draft("下午去南风公园散步，还捡到了野莓。", "下午在图书馆看书。"),
            draft("下午去南风公园散步，还捡到了野莓。", "傍晚喂了一只猫。"),
        ]
    )
    w = await writer(history, model)

    diary = await w.write_day("yuiju", DAY, BEDTIME)

    assert diary.source == "llm" and diary.rounds == 1
    assert diary.text == "下午去南风公园散步，还捡到了野莓。"
    [asked_again] = revision_requests(model)
    assert "「下午在图书馆看书。」" in asked_again and "图书馆" in asked_again.split("：", 1)[1]
    assert [r["text"] for r in diary.rejected] == ["下午在图书馆看书。", "傍晚喂了一只猫。"]
    assert "猫" in diary.rejected[1]["reason"]


async def test_true_lines_in_the_diarys_own_words_pass_unchanged(history: HistoryStore) -> None:
    """Over-blocking is a failure too: what she did, said as a diary says it, is kept as is."""
    lines = (
        "早上在家吃了早饭，下午去南风公园散步。",
        "在公园里捡到了野莓，好开心！",
        "晚上自己做饭吃，味道还不错。",
        "今天过得很平静，明天也要加油。",
    )
    model = waving_through([draft(*lines)])
    w = await writer(history, model)

    diary = await w.write_day("yuiju", DAY, BEDTIME)

    assert diary.source == "llm" and diary.rounds == 0 and diary.rejected == []
    assert diary.text == "".join(lines)
    assert revision_requests(model) == []


async def test_a_diary_that_invents_every_line_twice_is_the_factual_summary(
    history: HistoryStore,
) -> None:
    model = waving_through([draft("下午在图书馆看书。"), draft("和凯一起去了海边。")])
    w = await writer(history, model)

    diary = await w.write_day("yuiju", DAY, BEDTIME)

    assert diary.source == "factual" and "图书馆" not in diary.text and "海边" not in diary.text
    assert diary.text.startswith("2026-09-01 的记录：")


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("下午和千夏一起在公园散步。", "千夏"),  # a character of her town she did not meet
        ("和凯一起去了海边。", "凯"),  # someone she does not know at all
        ("千夏跟我说明天会下雨。", "千夏"),  # told by someone she did not talk to
    ],
)
def test_a_person_she_did_not_meet_that_day_is_caught(line: str, named: str) -> None:
    verdict = CHECK.unbacked(
        character_id="yuiju", start=DAY, end=DAY, episodes=THE_DAY, sentences=[line]
    )
    assert list(verdict) == [0] and named in verdict[0], verdict


def test_a_person_she_met_that_day_and_what_they_said_pass() -> None:
    day = [*THE_DAY, met("chika", "千夏", "16:30")]
    lines = [
        "傍晚和千夏一起在海边散步。",
        "千夏说海风好舒服。",
        "今天见到了千夏，好开心。",
    ]
    verdict = CHECK.unbacked(
        character_id="yuiju", start=DAY, end=DAY, episodes=day, sentences=lines
    )
    assert verdict == {}
    other = CHECK.unbacked(
        character_id="yuiju", start=DAY, end=DAY, episodes=day, sentences=["今天见到了枫。"]
    )
    assert list(other) == [0] and "枫" in other[0]


def test_her_own_name_is_not_a_stranger() -> None:
    verdict = CHECK.unbacked(
        character_id="chika",
        start=DAY,
        end=DAY,
        episodes=[met("yuiju", "悠酱", "16:30")],
        sentences=["傍晚和悠酱一起在海边散步。"],
    )
    assert verdict == {}


async def test_a_check_that_fails_leaves_the_factual_summary(history: HistoryStore) -> None:
    class Broken:
        def unbacked(self, **_: Any) -> dict[int, str]:
            raise RuntimeError("lexicon not loaded")

    model = waving_through([draft("下午去南风公园散步。")])
    repo = EpisodeRepo(history)
    await repo.ensure()
    for e in THE_DAY:
        await repo.put(e)
    w = DiaryWriter(history, repo, model=model, voice=VOICE, tz=TZ, claim_check=Broken())
    await w.ensure()

    diary = await w.write_day("yuiju", DAY, BEDTIME)

    assert diary.source == "factual"


def test_people_from_chat_that_day_are_known_and_checked_by_what_they_said() -> None:
    start = datetime(2026, 9, 1, 20, 0, tzinfo=TZ)
    window = Episode.model_validate(
        {
            "_id": "conv_window",
            "character_id": "yuiju",
            "type": "conversation",
            "time": start,
            "end_time": start + timedelta(minutes=20),
            "status": "logged",
            "summary": "和小林聊天：小林说他家有两只猫",
            "data": {
                "session_id": "group:qq:9",
                "counterparties": [{"user_id": "qq:1", "name": "小林"}],
                "messages": [{"speaker": "小林", "text": "我家有两只猫哦"}],
            },
        }
    )
    lines = [
        "晚上在群里和小林聊了好久。",
        "小林说他家有两只猫。",
        "小林跟我说他明天要考试。",
        "晚上和小林一起去了公园。",
    ]
    verdict = CHECK.unbacked(
        character_id="yuiju", start=DAY, end=DAY, episodes=[*THE_DAY, window], sentences=lines
    )
    assert sorted(verdict) == [2, 3], verdict
    assert "小林没说过" in verdict[2] and "没有和小林见过面" in verdict[3]


# -- the week's summary is checked against the week's episodes ------------------------------------

SUNDAY = date(2026, 9, 6)


async def test_the_weeks_summary_loses_what_her_week_does_not_back(history: HistoryStore) -> None:
    summaries = [
        "这周去公园散步，捡到了野莓。还在图书馆看了很多书。",
        "这周去公园散步，捡到了野莓。后来还喂了一只猫。",
    ]

    def answer(messages: list[ChatMessage], schema: JsonSchema | None) -> str:
        assert schema is not None
        if schema.name == "diary_review":
            return '{"unsupported": []}'
        if schema.name == "diary":
            return draft("下午去南风公园散步，还捡到了野莓。", cite=f"walk_in_park-{SUNDAY}-14:20")
        return json.dumps({"text": summaries.pop(0)}, ensure_ascii=False)

    model = FunctionChatModel(answer)
    sunday = [
        done("go_to_park", "14:00", 20, day=SUNDAY),
        done("walk_in_park", "14:20", 60, "在公园捡到了野莓", day=SUNDAY),
    ]
    w = await writer(history, model, [*THE_DAY, *sunday])

    await w.write_day("yuiju", SUNDAY, datetime(2026, 9, 6, 22, tzinfo=TZ))

    week = await w.get("yuiju", "week", SUNDAY - timedelta(days=6))
    assert week is not None and week.source == "llm" and week.rounds == 1
    assert week.text == "这周去公园散步，捡到了野莓。"
    assert [r["text"] for r in week.rejected] == ["还在图书馆看了很多书。", "后来还喂了一只猫。"]
    asked_again = str(model.calls[-1][-1]["content"])
    assert "图书馆" in asked_again


# -- wiring: the memory worker the daemon runs writes diaries with the check ----------------------


def daemon_config(tmp_path: Path, redis_url: str) -> YuijuConfig:
    return load_config(
        environ={},
        overrides={
            "app": {"data_dir": str(tmp_path / "data")},
            "redis": {"url": redis_url, "prefix": f"dg-{tmp_path.name}"},
            "embeddings": {"provider": "hashing"},
            "world": {"policy": "utility", "characters": ["yuiju"]},
        },
    )


@pytest.mark.usefixtures("clean_config_env")
async def test_the_daemons_memory_worker_rejects_an_invented_diary_line(
    tmp_path: Path, redis_url: str
) -> None:
    """`yuiju run`'s memory worker (`yuiju_cli.memory_worker`, over `run_memory_worker`) writes
    her diary through the check, built from the loaded actions and cards."""
    model = waving_through(
        [
            draft("下午去南风公园散步，还捡到了野莓。", "下午在图书馆看书。"),
            draft("下午去南风公园散步，还捡到了野莓。", "还喂了一只猫。"),
            draft("下午去南风公园散步，还捡到了野莓。", "还喂了一只猫。"),
            draft("下午去南风公园散步，还捡到了野莓。", "还喂了一只猫。"),
        ]
    )
    cfg = daemon_config(tmp_path, redis_url)
    runtime = await build_runtime(cfg, clock=SimClock(BEDTIME), chat_model=model)
    store = await QdrantClientStore.open(collection="dg", dim=64, location=":memory:")
    semantic = SemanticMemory(store, HashingEmbedder(64))
    stop = asyncio.Event()
    task: asyncio.Task[None] | None = None
    try:
        await runtime.history.ensure(DIARIES)
        for e in THE_DAY:
            await runtime.episodes.put(e)
        await runtime.redis.client.xadd(
            runtime.keys.events,
            {
                "type": "action_started",
                "character_id": "yuiju",
                "time": BEDTIME.isoformat(),
                "data": json.dumps({"action": "sleep", "episode_id": "bhv_sleep"}),
            },
        )
        task = asyncio.create_task(
            yuiju_cli.memory_worker(
                cfg, runtime, semantic=semantic, clock=runtime.engine.clock, stop_event=stop
            )
        )
        doc = None
        for _ in range(200):
            doc = await runtime.history.get(DIARIES.name, f"diary_yuiju_day_{DAY.isoformat()}")
            if doc is not None or task.done():
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        if task is not None:
            await asyncio.wait_for(task, 10)
        await store.close()
        await runtime.close()

    assert doc is not None, "the memory worker wrote no diary"
    assert doc["text"] == "下午去南风公园散步，还捡到了野莓。", doc
    assert [r["text"] for r in doc["rejected"]][:2] == ["下午在图书馆看书。", "还喂了一只猫。"]
