"""The model reaches every job that needs it (issue 20 item 6, issue 21 item 6): with `[llm]`
configured, the diary and chat distillation use it whatever decides her actions, `yuiju memory
distill` distils, and so does the chat side's /distill."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from tests.conftest import TZ, at_time
from tests.openai_stub import OpenAIStub, StubAnswer
from yuiju import cli as yuiju_cli
from yuiju.config import YuijuConfig, load_config
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.episodes import Episode
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.service import build_memory
from yuiju.memory.vectors import QdrantClientStore
from yuiju.world.clock import SimClock
from yuiju.world.runtime import build_runtime

NOW = at_time("2026-09-01 22:00")


def memory_jobs_model(body: dict[str, Any]) -> StubAnswer:
    """A model that answers each memory job by the schema it asks for."""
    name = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    if name == "facts":
        return json.dumps(
            {"facts": [{"content": "这个用户喜欢猫。", "importance": 0.7}]}, ensure_ascii=False
        )
    if name == "diary":
        return json.dumps(
            {"paragraphs": [[{"text": "傍晚去公园散步了。", "episode_ids": ["bhv_1"]}]]},
            ensure_ascii=False,
        )
    if name == "diary_review":
        return '{"unsupported": []}'
    return "嗯嗯"


def asked(stub: OpenAIStub) -> list[str]:
    """The schema name of every request the stub got."""
    return [
        (r.get("response_format") or {}).get("json_schema", {}).get("name", "")
        for r in stub.requests
    ]


def config(tmp_path: Path, redis_url: str, stub: OpenAIStub) -> YuijuConfig:
    return load_config(
        environ={},
        overrides={
            "app": {"data_dir": str(tmp_path / "data")},
            "redis": {"url": redis_url, "prefix": f"mm-{tmp_path.name}"},
            "embeddings": {"provider": "hashing"},
            "world": {"policy": "utility"},
            "llm": {"base_url": stub.base_url, "model": "stub"},
        },
    )


@pytest.fixture
async def semantic() -> AsyncIterator[SemanticMemory]:
    store = await QdrantClientStore.open(collection="m", dim=64, location=":memory:")
    yield SemanticMemory(store, HashingEmbedder(64))
    await store.close()


async def test_under_the_utility_policy_the_diary_and_distillation_still_use_the_model(
    tmp_path: Path, redis_url: str, openai_stub: OpenAIStub, semantic: SemanticMemory
) -> None:
    """Before: the daemon's memory worker got the runtime's model, which existed only when the
    LLM decided; with `policy = "utility"` every diary was the factual summary and nothing was
    ever distilled."""
    openai_stub.handler = memory_jobs_model
    cfg = config(tmp_path, redis_url, openai_stub)
    runtime = await build_runtime(cfg, clock=SimClock(NOW))
    try:
        assert runtime.llm_policy is None  # the offline policy decides her actions
        # what the daemon's memory worker builds (yuiju run → run_memory_worker)
        memory = await build_memory(
            cfg, runtime.history, semantic, character_id="yuiju", chat_model=runtime.llm_model
        )
        await memory.episodes.put(
            Episode.model_validate(
                {
                    "_id": "bhv_1",
                    "character_id": "yuiju",
                    "type": "behavior",
                    "status": "completed",
                    "time": NOW - timedelta(hours=4),
                    "summary": "在南风公园散步",
                }
            )
        )
        await memory.chat.add("qq:1", "我家有两只猫", NOW - timedelta(hours=1))

        diary = await memory.diary.write_day("yuiju", NOW.date(), NOW)
        report = await memory.distiller.run(NOW)
    finally:
        await runtime.close()

    assert diary.source == "llm" and "散步" in diary.text
    assert (report.users, report.processed, report.facts_added) == (1, 1, 1)
    assert {"diary", "diary_review", "facts"} <= set(asked(openai_stub))


def write_config(tmp_path: Path, redis_url: str, stub: OpenAIStub) -> Path:
    path = tmp_path / "yuiju.toml"
    path.write_text(
        f"""
[app]
data_dir = "{(tmp_path / "data").as_posix()}"
[redis]
url = "{redis_url}"
prefix = "mm-{tmp_path.name}"
[embeddings]
provider = "hashing"
[world]
policy = "utility"
[llm]
base_url = "{stub.base_url}"
model = "stub"
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.usefixtures("clean_config_env")
def test_yuiju_memory_distill_distils_pending_chat_memories(
    tmp_path: Path, redis_url: str, openai_stub: OpenAIStub, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `yuiju memory distill` built the memory without a model and printed
    `DistillReport(users=0, ...)` over any number of pending chat memories."""
    openai_stub.handler = memory_jobs_model
    config_file = write_config(tmp_path, redis_url, openai_stub)
    log = tmp_path / "chat.jsonl"
    log.write_text(
        json.dumps(
            {
                "time": (datetime.now(TZ) - timedelta(hours=1)).isoformat(),
                "user_id": "qq:1",
                "text": "我家有两只猫",
            },
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )
    assert (
        yuiju_cli.main(["--config", str(config_file), "memory", "import", str(log), "--quiet"]) == 0
    )

    assert yuiju_cli.main(["--config", str(config_file), "memory", "distill"]) == 0

    out = capsys.readouterr().out
    assert "users=1" in out and "facts_added=1" in out, out
    assert asked(openai_stub) == ["facts"]


async def test_the_chat_sides_distill_command_distils(
    tmp_path: Path, redis_url: str, openai_stub: OpenAIStub
) -> None:
    """Before: the chat side (`yuiju bot`, the plugin in a NoneBot app) built its memory without
    the model, so /distill answered 没有要整理的聊天记忆 over every pending chat memory."""
    from tests.chatkit import RecordingSender
    from yuiju.message.bot import build_service

    openai_stub.handler = memory_jobs_model
    cfg = config(tmp_path, redis_url, openai_stub)
    on_stop: list[Any] = []
    try:
        # opens its own stores and memory, as `yuiju bot` does
        service = await build_service(cfg, sender=RecordingSender(), on_stop=on_stop)
        memory = service.deps.memory
        assert memory is not None
        await memory.chat.add("qq:1", "我家有两只猫", service.now() - timedelta(minutes=5))

        answer = await service.admin.run(cast("Any", None), "distill")
    finally:
        for close in reversed(on_stop):
            await close()

    assert "整理了 1 个人的 1 条聊天" in answer and "新记下 1 条" in answer, answer
    assert asked(openai_stub) == ["facts"]


async def test_without_a_model_distillation_says_what_waits_and_why(
    sqlite_history: Any, semantic: SemanticMemory
) -> None:
    """Not 没有要整理的聊天记忆 over pending memories: the admin learns that [llm] is missing."""
    from yuiju.message.tools import distill_text

    memory = await build_memory(YuijuConfig(), sqlite_history, semantic, character_id="yuiju")
    await memory.chat.add("qq:1", "我家有两只猫", NOW - timedelta(hours=1))
    await memory.chat.add("qq:2", "今天练琴了", NOW - timedelta(hours=1))

    report = await memory.distiller.run(NOW)

    assert (report.users, report.waiting_without_model) == (0, 2)
    text = distill_text(report)
    assert "2 条" in text and "[llm]" in text and "没有要整理" not in text, text
