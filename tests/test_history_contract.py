"""One contract for both history backends (SQLite on a temp file, MongoDB via mongomock-motor)."""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from yuiju.storage import (
    CollectionSpec,
    CorruptValue,
    HistoryStore,
    InvalidDocument,
    StoreUnavailable,
    UndeclaredField,
    open_history,
)
from yuiju.storage.sqlite_history import SqliteHistory

EPISODES = CollectionSpec(
    name="episodes",
    fields=("character_id", "type", "time"),
    indexes=(("character_id", "time"), ("character_id", "type", "time")),
)
SHANGHAI = timezone(timedelta(hours=8))
T0 = datetime(2026, 11, 30, 8, 0, tzinfo=SHANGHAI)  # 00:00 UTC


def episode(n: int, *, character: str = "yuiju", kind: str = "behavior", **extra: object) -> dict:
    return {
        "_id": f"ep-{n:03d}",
        "character_id": character,
        "type": kind,
        "time": T0 + timedelta(minutes=n),
        **extra,
    }


@pytest.fixture
async def store(history: HistoryStore) -> HistoryStore:
    await history.ensure(EPISODES)
    return history


def ids(docs: list[dict]) -> list[str]:
    return [doc["_id"] for doc in docs]


async def test_round_trip_returns_nested_aware_datetimes_in_utc(store: HistoryStore) -> None:
    doc = episode(
        1,
        detail={"started": T0, "steps": [{"at": T0 + timedelta(seconds=1.5)}]},
        tags=("a", "b"),
        score=1.5,
        done=True,
        note=None,
        text="在公园散步",
    )
    await store.put("episodes", doc)

    got = await store.get("episodes", "ep-001")

    assert got is not None
    started = got["detail"]["started"]
    assert started == T0 and started.tzinfo == UTC
    assert started.hour == 0  # 08:00+08:00 is 00:00 UTC
    assert got["time"].tzinfo == UTC and got["time"] == T0 + timedelta(minutes=1)
    assert got["detail"]["steps"][0]["at"] == T0 + timedelta(seconds=1.5)
    assert got["tags"] == ["a", "b"]
    assert (got["score"], got["done"], got["note"], got["text"]) == (1.5, True, None, "在公园散步")


async def test_datetimes_are_kept_to_the_millisecond(store: HistoryStore) -> None:
    await store.put("episodes", episode(1, at=T0.replace(microsecond=123456)))
    got = await store.get("episodes", "ep-001")
    assert got is not None and got["at"].microsecond == 123000


async def test_get_of_an_unknown_id_returns_none(store: HistoryStore) -> None:
    assert await store.get("episodes", "nope") is None


async def test_put_replaces_the_whole_document(store: HistoryStore) -> None:
    await store.put("episodes", episode(1, status="running", extra=1))
    await store.put("episodes", episode(1, kind="plan", status="completed"))

    got = await store.get("episodes", "ep-001")

    assert got is not None and got["status"] == "completed" and "extra" not in got
    assert ids(await store.find("episodes", eq={"type": "plan"})) == ["ep-001"]
    assert await store.count("episodes", eq={"type": "behavior"}) == 0


async def test_insert_new_inserts_once_and_changes_nothing_after(store: HistoryStore) -> None:
    assert await store.insert_new("episodes", episode(1, status="first")) is True
    assert await store.insert_new("episodes", episode(1, status="second")) is False
    got = await store.get("episodes", "ep-001")
    assert got is not None and got["status"] == "first"
    assert await store.count("episodes") == 1


async def test_find_filters_sorts_and_limits(store: HistoryStore) -> None:
    for n in range(1, 7):
        await store.put("episodes", episode(n, kind="behavior" if n % 2 else "plan"))
    await store.put("episodes", episode(7, character="other"))

    by_eq = await store.find("episodes", eq={"character_id": "yuiju", "type": "plan"}, sort="time")
    newest = await store.find(
        "episodes", eq={"character_id": "yuiju"}, sort="time", descending=True, limit=2
    )
    window = await store.find(
        "episodes",
        eq={"character_id": "yuiju"},
        ranges={"time": (T0 + timedelta(minutes=2), T0 + timedelta(minutes=5))},
        sort="time",
    )
    open_low = await store.find("episodes", ranges={"time": (None, T0 + timedelta(minutes=3))})
    one_of = await store.find("episodes", eq={"character_id": ["other", "nobody"]})

    assert ids(by_eq) == ["ep-002", "ep-004", "ep-006"]
    assert ids(newest) == ["ep-006", "ep-005"]
    assert ids(window) == ["ep-002", "ep-003", "ep-004"]  # low inclusive, high exclusive
    assert sorted(ids(open_low)) == ["ep-001", "ep-002"]
    assert ids(one_of) == ["ep-007"]
    assert await store.find("episodes", eq={"character_id": []}) == []
    assert await store.find("episodes", sort="time", limit=0) == []
    assert await store.count("episodes") == 7
    assert await store.count("episodes", eq={"character_id": "yuiju", "type": ["plan"]}) == 3
    assert await store.count("episodes", ranges={"time": (T0 + timedelta(minutes=6), None)}) == 2


async def test_eq_none_matches_a_missing_or_null_field(store: HistoryStore) -> None:
    await store.put("episodes", {"_id": "no-type", "character_id": "yuiju", "time": T0})
    await store.put("episodes", episode(1))
    assert ids(await store.find("episodes", eq={"type": None})) == ["no-type"]
    assert ids(await store.find("episodes", eq={"type": [None, "nope"]})) == ["no-type"]


async def test_range_on_datetimes_compares_instants_across_time_zones(store: HistoryStore) -> None:
    utc_doc = {"_id": "utc", "character_id": "c", "time": datetime(2026, 11, 30, 1, 0, tzinfo=UTC)}
    cst_doc = {
        "_id": "cst",
        "character_id": "c",
        "time": datetime(2026, 11, 30, 8, 30, tzinfo=SHANGHAI),
    }
    await store.put("episodes", utc_doc)  # 01:00 UTC
    await store.put("episodes", cst_doc)  # 00:30 UTC, although 08:30 > 01:00 on the clock face

    ordered = await store.find("episodes", eq={"character_id": "c"}, sort="time")
    before_1am = await store.find(
        "episodes", ranges={"time": (None, datetime(2026, 11, 30, 9, 0, tzinfo=SHANGHAI))}
    )

    assert ids(ordered) == ["cst", "utc"]
    assert ids(before_1am) == ["cst"]
    exact = await store.find("episodes", eq={"time": datetime(2026, 11, 30, 0, 30, tzinfo=UTC)})
    assert ids(exact) == ["cst"]


async def test_delete_reports_whether_something_was_deleted(store: HistoryStore) -> None:
    await store.put("episodes", episode(1))
    assert await store.delete("episodes", "ep-001") is True
    assert await store.delete("episodes", "ep-001") is False
    assert await store.get("episodes", "ep-001") is None


async def test_ensure_is_idempotent(store: HistoryStore) -> None:
    await store.put("episodes", episode(1))
    await store.ensure(EPISODES, EPISODES)
    assert await store.count("episodes") == 1


async def test_queries_on_undeclared_fields_name_the_fix(store: HistoryStore) -> None:
    with pytest.raises(
        UndeclaredField, match=r"'episodes'.*'status'.*declare it in the CollectionSpec"
    ):
        await store.find("episodes", eq={"status": "running"})
    with pytest.raises(UndeclaredField, match="'status'"):
        await store.count("episodes", ranges={"status": ("a", None)})
    with pytest.raises(UndeclaredField, match="'status'"):
        await store.find("episodes", sort="status")
    assert await store.find("episodes", eq={"_id": "ep-001"}) == []  # _id is always declared


async def test_a_collection_that_was_not_ensured_is_refused(history: HistoryStore) -> None:
    with pytest.raises(UndeclaredField, match=r"'diaries' was not ensured.*ensure\(\)"):
        await history.put("diaries", {"_id": "d1"})
    with pytest.raises(UndeclaredField):
        await history.get("diaries", "d1")


async def test_naive_datetimes_are_rejected_with_the_fix(store: HistoryStore) -> None:
    naive = datetime(2026, 11, 30, 8, 0)  # noqa: DTZ001 - the point of the test
    with pytest.raises(
        InvalidDocument, match=r"episodes\['ep-001'\]\.detail\.at: naive datetime.*aware"
    ):
        await store.put("episodes", episode(1, detail={"at": naive}))
    with pytest.raises(InvalidDocument, match="naive datetime"):
        await store.find("episodes", ranges={"time": (naive, None)})
    assert await store.count("episodes") == 0


async def test_unstorable_values_are_rejected(store: HistoryStore) -> None:
    with pytest.raises(InvalidDocument, match="set"):
        await store.put("episodes", episode(1, tags={"a"}))
    with pytest.raises(InvalidDocument, match=r"declared \(indexed\) field must hold a scalar"):
        await store.put("episodes", episode(2, kind=["a"]))
    with pytest.raises(InvalidDocument, match="_id must be a non-empty str"):
        await store.put("episodes", {"_id": 3})
    with pytest.raises(InvalidDocument, match=r"'\$set'"):
        await store.put("episodes", episode(4, detail={"$set": 1}))


def test_a_spec_refuses_fields_no_index_covers() -> None:
    with pytest.raises(ValueError, match=r"\['status'\] are in no index"):
        CollectionSpec(name="x", fields=("a", "status"), indexes=(("a",),))
    with pytest.raises(ValueError, match="declare the field first"):
        CollectionSpec(name="x", fields=("a",), indexes=(("a", "b"),))


# -- SQLite only ------------------------------------------------------------------------------


async def test_sqlite_history_persists_across_reopen(tmp_path: Path) -> None:
    first = await open_history(None, "yuiju", tmp_path)
    assert first.backend == "sqlite"
    await first.ensure(EPISODES)
    await first.put("episodes", episode(1, detail={"at": T0}))
    await first.close()

    second = await open_history(None, "yuiju", tmp_path)
    await second.ensure(EPISODES)
    got = await second.get("episodes", "ep-001")
    await second.close()

    assert (tmp_path / "history.sqlite3").exists()
    assert got is not None and got["detail"]["at"] == T0


async def test_sqlite_uses_the_declared_index(tmp_path: Path) -> None:
    store = SqliteHistory.open(tmp_path / "h.sqlite3")
    await store.ensure(EPISODES)

    plan = store.explain(
        "episodes",
        eq={"character_id": "yuiju"},
        ranges={"time": (T0, None)},
        sort="time",
        descending=True,
    )
    await store.close()

    assert any("USING INDEX ix_episodes__character_id__time" in line for line in plan), plan
    assert not any("TEMP B-TREE" in line for line in plan), plan


async def test_sqlite_backfills_a_newly_declared_field(tmp_path: Path) -> None:
    store = SqliteHistory.open(tmp_path / "h.sqlite3")
    await store.ensure(EPISODES)
    await store.put("episodes", episode(1, status="done"))
    wider = CollectionSpec(
        name="episodes",
        fields=(*EPISODES.fields, "status"),
        indexes=(*EPISODES.indexes, ("character_id", "status")),
    )
    await store.ensure(wider)
    found = await store.find("episodes", eq={"character_id": "yuiju", "status": "done"})
    await store.close()
    assert ids(found) == ["ep-001"]


async def test_sqlite_corrupt_row_raises_corrupt_value(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    store = SqliteHistory.open(path)
    await store.ensure(EPISODES)
    await store.put("episodes", episode(1))
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE episodes SET _doc = '{not json' WHERE _id = 'ep-001'")
    with pytest.raises(CorruptValue, match=r"episodes\['ep-001'\].*fix or delete that row"):
        await store.get("episodes", "ep-001")
    with pytest.raises(CorruptValue):
        await store.find("episodes", eq={"character_id": "yuiju"})
    await store.close()


async def test_a_closed_sqlite_store_is_unavailable(tmp_path: Path) -> None:
    store = SqliteHistory.open(tmp_path / "h.sqlite3")
    await store.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        await store.ping()


# -- MongoDB connection errors (real pymongo, closed loopback port) -----------------------------


async def test_unreachable_mongo_raises_store_unavailable_with_redacted_url(tmp_path: Path) -> None:
    url = "mongodb://yuiju:s3cret@127.0.0.1:1/?serverSelectionTimeoutMS=200&connectTimeoutMS=200"
    started = time.perf_counter()
    with pytest.raises(StoreUnavailable) as caught:
        await open_history(url, "yuiju", tmp_path)
    message = str(caught.value)
    assert "s3cret" not in message and "yuiju:***@127.0.0.1:1" in message
    assert "unset [mongo].url" in message
    assert time.perf_counter() - started < 5


async def test_put_many_upserts_in_order_as_one_batch(history: HistoryStore) -> None:
    spec = CollectionSpec(name="batch", fields=("n",), indexes=(("n",),))
    await history.ensure(spec)
    await history.put_many(
        "batch", [{"_id": "a", "n": 1}, {"_id": "b", "n": 2}, {"_id": "a", "n": 3}]
    )
    await history.put_many("batch", [])
    docs = await history.find("batch", sort="n")
    assert [(d["_id"], d["n"]) for d in docs] == [
        ("b", 2),
        ("a", 3),
    ]  # the later "a" replaced the first
