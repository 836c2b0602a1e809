"""The episode outbox under bad input: a malformed entry is dead-lettered, the rest flows."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pymongo.errors
import pytest
import redis.asyncio as aioredis

from tests.conftest import at_time, make_engine
from tests.test_engine import FlakyHistory, idle_forever
from yuiju.config import load_config
from yuiju.memory.episodes import EpisodeRepo
from yuiju.storage.history import HistoryStore
from yuiju.storage.keys import Keys
from yuiju.storage.sqlite_history import SqliteHistory
from yuiju.world.behavior import outbox_entry
from yuiju.world.outbox import OutboxFlusher
from yuiju.world.store import StateStore, dumps_doc

POISON = {
    "not JSON": "not json",
    "a JSON object of the wrong shape": '{"foo": 1}',
    "a JSON list": "[1, 2]",
    "JSON null": "null",
    "no document": '{"collection": "episodes"}',
    "a document without an id": '{"collection": "episodes", "doc": {"summary": "没有 id"}}',
    "an unknown collection": '{"collection": "nope", "doc": {"_id": "x"}}',
    "a field the store refuses": '{"collection": "episodes", "doc": {"_id": "x", "$where": 1}}',
    "an integer past 64 bits": '{"collection": "episodes", "doc": {"_id": "x", "n": 9223372036854775808}}',
    "a date that is not a date": '{"collection": "episodes", "doc": {"_id": "x", "time": {"$date": "昨天"}}}',
}


def episode(n: int) -> str:
    return dumps_doc(
        outbox_entry(
            "episodes",
            {
                "_id": f"bhv_{n}",
                "character_id": "yuiju",
                "type": "behavior",
                "time": at_time("2026-09-01 06:00"),
                "status": "completed",
                "summary": f"第{n}件事",
            },
        )
    )


def dead_letter_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "dead-letter" in r.getMessage()]


@pytest.mark.parametrize("poison", list(POISON.values()), ids=list(POISON))
async def test_a_malformed_outbox_entry_is_dead_lettered_once_and_the_episodes_behind_it_are_written(
    redis: aioredis.Redis, history: HistoryStore, caplog: pytest.LogCaptureFixture, poison: str
) -> None:
    kit = await make_engine(redis, history, policy=idle_forever(), start="2026-09-01 06:00")
    await redis.rpush(kit.keys.episode_outbox, episode(1), poison, episode(2))

    with caplog.at_level(logging.WARNING, logger="yuiju.world.engine"):
        await kit.engine.run(until=at_time("2026-09-01 07:15"))  # idles at 06:00, 06:30, 07:00

    assert await kit.store.outbox_size() == 0
    ids = {d["_id"] for d in await history.find("episodes")}
    assert {"bhv_1", "bhv_2"} <= ids and len(ids) == 5  # 2 queued by hand + her 3 episodes
    dead = await kit.store.dead_letters()
    assert [d["entry"] for d in dead] == [poison]
    assert dead[0]["reason"]
    logged = dead_letter_logs(caplog)
    assert len(logged) == 1, [r.getMessage() for r in logged]  # reported once, not on every flush
    assert kit.keys.outbox_dead in logged[0].getMessage()


async def test_an_outbox_entry_that_is_not_utf8_is_dead_lettered_and_the_rest_flows(
    redis: aioredis.Redis,
    history: HistoryStore,
) -> None:
    # bytes no client of ours writes (a hand-edited list, a corrupt restore): reading them as text
    # raised on every flush, so the outbox stayed blocked behind them for good
    kit = await make_engine(redis, history, policy=idle_forever(), start="2026-09-01 06:00")
    await redis.rpush(kit.keys.episode_outbox, episode(1), b"\xff\xfe{not utf-8", episode(2))

    await kit.engine.run(until=at_time("2026-09-01 07:15"))

    assert await kit.store.outbox_size() == 0
    assert {"bhv_1", "bhv_2"} <= {d["_id"] for d in await history.find("episodes")}
    [dead] = await kit.store.dead_letters()
    assert "not UTF-8" in dead["reason"] and "{not utf-8" in dead["entry"]


async def test_a_history_store_that_is_down_keeps_a_malformed_entry_queued_with_the_rest(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    flaky = FlakyHistory(sqlite_history, down=True)
    kit = await make_engine(redis, flaky, policy=idle_forever())  # type: ignore[arg-type]
    await redis.rpush(kit.keys.episode_outbox, "not json", episode(1))

    assert await kit.engine.flush_outbox(force=True) == 0
    assert (
        await kit.store.outbox_size() == 2
    )  # nothing moves while the store cannot take the good ones
    assert await kit.store.dead_letters() == []

    flaky.down = False
    assert await kit.engine.flush_outbox(force=True) == 1
    assert await kit.store.outbox_size() == 0
    assert [d["entry"] for d in await kit.store.dead_letters()] == ["not json"]


async def test_a_store_that_refuses_one_document_dead_letters_only_that_one(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    class RefusesOne(FlakyHistory):
        """Up, but refuses bhv_2 with an error no one planned for (a backend limit, say)."""

        async def put(self, collection: str, doc: Mapping[str, Any]) -> None:
            if doc["_id"] == "bhv_2":
                raise RuntimeError("document too large (test)")
            await self.inner.put(collection, doc)

    kit = await make_engine(redis, RefusesOne(sqlite_history, down=False))  # type: ignore[arg-type]
    await redis.rpush(kit.keys.episode_outbox, episode(1), episode(2), episode(3))

    assert await kit.engine.flush_outbox(force=True) == 2

    assert {d["_id"] for d in await sqlite_history.find("episodes")} == {"bhv_1", "bhv_3"}
    dead = await kit.store.dead_letters()
    assert [d["entry"] for d in dead] == [episode(2)] and "too large" in dead[0]["reason"]


async def test_a_flush_whose_lock_ran_out_dead_letters_nothing_twice(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    first = await make_engine(redis, sqlite_history)
    await redis.rpush(first.keys.episode_outbox, "not json", episode(1))

    class SlowWrite(FlakyHistory):
        async def put(self, collection: str, document: Mapping[str, Any]) -> None:
            if (
                not self.puts
            ):  # this write outlives the flush lock; the other engine flushes meanwhile
                self.puts.append("-")
                await redis.delete(first.keys.outbox_lock)
                await first.engine.flush_outbox(force=True)
                await redis.rpush(first.keys.episode_outbox, "also not json", episode(2))
            await self.inner.put(collection, document)

    second = await make_engine(redis, SlowWrite(sqlite_history, down=False))  # type: ignore[arg-type]
    await second.engine.flush_outbox(force=True)  # its compare-and-trim fails: it moves nothing
    await first.engine.flush_outbox(force=True)

    assert {d["_id"] for d in await sqlite_history.find("episodes")} == {"bhv_1", "bhv_2"}
    assert [d["entry"] for d in await first.store.dead_letters()] == ["not json", "also not json"]
    assert await first.store.outbox_size() == 0


async def test_yuiju_status_reports_dead_lettered_outbox_entries(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from yuiju import cli as yuiju_cli

    cfg = load_config(environ={"YUIJU_REDIS__URL": redis_url, "YUIJU_APP__DATA_DIR": str(tmp_path)})
    kit = await make_engine(redis, None)
    await redis.rpush(kit.keys.episode_outbox, "not json")
    history = await _sqlite(tmp_path)
    kit.engine.history = history
    await kit.engine.flush_outbox(force=True)
    await history.close()

    assert await yuiju_cli._status(cfg, as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["outbox_dead_letters"]["count"] == 1
    assert report["outbox_dead_letters"]["latest"][0]["entry"] == "not json"

    assert await yuiju_cli._status(cfg, as_json=False) == 0
    text = capsys.readouterr().out
    assert "1" in text and kit.keys.outbox_dead in text


async def _sqlite(data_dir: Path) -> HistoryStore:
    from yuiju.memory.episodes import EpisodeRepo
    from yuiju.storage.history import open_history

    history = await open_history(None, "yuiju", data_dir)
    await EpisodeRepo(history).ensure()
    return history


async def test_entries_queued_by_other_writers_are_written_while_she_is_busy(
    redis: aioredis.Redis, history: HistoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # found by bench/faults.py: the chat's LLM ledger entries, queued by another StateStore, stayed
    # in Redis until her next own episode (an hour at real speed, or the next start)
    import asyncio

    import yuiju.world.engine

    monkeypatch.setattr(yuiju.world.engine, "QUEUED_FLUSH_SECONDS", 0.2)
    kit = await make_engine(redis, history, policy=idle_forever(), start="2026-09-01 06:00")

    async def busy(_when: Any) -> None:  # her action never ends during the test
        await asyncio.Event().wait()

    kit.clock.sleep_until = busy  # type: ignore[method-assign]
    running = asyncio.create_task(kit.engine.run())
    try:
        await asyncio.sleep(0.3)  # her first step is done and written
        await redis.rpush(kit.keys.episode_outbox, episode(1))  # another writer's entry
        for _ in range(40):
            if "bhv_1" in {d["_id"] for d in await history.find("episodes")}:
                break
            await asyncio.sleep(0.1)
        assert "bhv_1" in {d["_id"] for d in await history.find("episodes")}
        assert await kit.store.outbox_size() == 0
    finally:
        kit.engine.stop()
        await asyncio.wait_for(running, 5)


async def test_a_process_without_an_engine_flushes_the_outbox_by_itself(
    redis: aioredis.Redis, history: HistoryStore
) -> None:
    # the bot queues entries too (its LLM ledger); alone, it must write them, not only an engine
    import asyncio

    await EpisodeRepo(history).ensure()
    keys = Keys("bot-alone")
    await redis.rpush(keys.episode_outbox, episode(1), "not json")
    flusher = OutboxFlusher(StateStore(redis, keys), history)
    running = asyncio.create_task(flusher.run(every_seconds=0.05))
    try:
        for _ in range(40):
            if not await redis.llen(keys.episode_outbox):
                break
            await asyncio.sleep(0.05)
        await redis.rpush(keys.episode_outbox, episode(2))  # queued while it runs
        for _ in range(40):
            if "bhv_2" in {d["_id"] for d in await history.find("episodes")}:
                break
            await asyncio.sleep(0.05)
    finally:
        flusher.stop()
        await asyncio.wait_for(running, 5)

    assert {"bhv_1", "bhv_2"} <= {d["_id"] for d in await history.find("episodes")}
    assert await redis.llen(keys.episode_outbox) == 0
    assert [d["entry"] for d in await StateStore(redis, keys).dead_letters()] == ["not json"]
    assert await flusher.flush_once() == 0  # nothing twice


# -- what the history store's error says about the entry: by kind, never by message -----------------

SQLITE_WRITE_TROUBLE = {
    # real SQLite errors whose messages name no lock: the store cannot write now, the entry is fine
    "interrupted (SQLITE_INTERRUPT)": lambda db: db.set_progress_handler(lambda: 1, 1),
    "not authorized (SQLITE_AUTH)": lambda db: db.set_authorizer(lambda *_: sqlite3.SQLITE_DENY),
}


@pytest.mark.parametrize(
    "trouble", list(SQLITE_WRITE_TROUBLE.values()), ids=list(SQLITE_WRITE_TROUBLE)
)
async def test_a_sqlite_error_of_the_store_keeps_the_entry_queued_whatever_its_message(
    redis: aioredis.Redis,
    sqlite_history: SqliteHistory,
    trouble: Callable[[sqlite3.Connection], None],
) -> None:
    kit = await make_engine(redis, sqlite_history)
    await redis.rpush(kit.keys.episode_outbox, episode(1))
    trouble(sqlite_history._db)  # the writer's connection; reads (and ping) still work

    assert await kit.engine.flush_outbox(force=True) == 0
    assert await kit.store.dead_letters() == []
    assert await kit.store.outbox_size() == 1


async def test_a_document_sqlite_refuses_by_a_constraint_is_dead_lettered_alone(
    redis: aioredis.Redis, sqlite_history: SqliteHistory
) -> None:
    kit = await make_engine(redis, sqlite_history)
    sqlite_history._db.execute(
        "CREATE TRIGGER no_bhv_2 BEFORE INSERT ON episodes WHEN NEW._id = 'bhv_2' "
        "BEGIN SELECT RAISE(ABORT, 'not this one (test)'); END"
    )
    await redis.rpush(kit.keys.episode_outbox, episode(1), episode(2), episode(3))

    assert await kit.engine.flush_outbox(force=True) == 2

    [dead] = await kit.store.dead_letters()
    assert dead["entry"] == episode(2) and "SQLITE_CONSTRAINT" in dead["reason"]


class FailingMongo:
    """A MongoDB database whose writes raise ``error`` (what pymongo raises on a failover, a full
    disk, a refused document...) while it still answers ping."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getitem__(self, name: str) -> FailingMongo:
        return self

    async def create_index(self, *args: Any, **kwargs: Any) -> None:
        pass

    async def replace_one(self, *args: Any, **kwargs: Any) -> None:
        raise self.error

    async def command(self, name: str) -> dict[str, Any]:
        return {"ok": 1}


MONGO_UNAVAILABLE = {
    "a failover (NotPrimaryError)": pymongo.errors.NotPrimaryError("not primary"),
    "shutting down (code 91)": pymongo.errors.OperationFailure("shutdown in progress", code=91),
    "primary stepped down (code 189)": pymongo.errors.OperationFailure("stepped down", code=189),
    "a write concern timeout": pymongo.errors.WTimeoutError("waiting for replication", code=64),
    "a slow server (code 50)": pymongo.errors.ExecutionTimeout("time limit", code=50),
    "a full disk (code 14031)": pymongo.errors.WriteError("out of disk space", code=14031),
    "a retryable write": pymongo.errors.OperationFailure(
        "try again", code=1, details={"errorLabels": ["RetryableWriteError"]}
    ),
}
MONGO_REFUSED = {
    "a document too large": pymongo.errors.DocumentTooLarge("BSON document too large"),
    "failed validation (code 121)": pymongo.errors.WriteError("validation", code=121),
}


@pytest.mark.parametrize(
    ("error", "kept"),
    [(e, True) for e in MONGO_UNAVAILABLE.values()] + [(e, False) for e in MONGO_REFUSED.values()],
    ids=[*MONGO_UNAVAILABLE, *MONGO_REFUSED],
)
async def test_a_mongo_error_dead_letters_the_entry_only_when_the_document_is_at_fault(
    redis: aioredis.Redis, error: Exception, kept: bool
) -> None:
    from yuiju.storage.mongo_history import MongoHistory

    kit = await make_engine(redis, MongoHistory(FailingMongo(error)))
    await redis.rpush(kit.keys.episode_outbox, episode(1))

    assert await kit.engine.flush_outbox(force=True) == 0

    assert await kit.store.outbox_size() == (1 if kept else 0)
    dead = await kit.store.dead_letters()
    assert len(dead) == (0 if kept else 1)
