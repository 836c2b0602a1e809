"""StateStore on real Redis: validation on read, optimistic transactions, leases, the outbox."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

import pytest
import redis as sync_redis
import redis.asyncio as aioredis

from tests.conftest import at_time, make_character, make_world, redis_calls
from yuiju.memory.event_data import OtherEvent
from yuiju.storage.keys import Keys
from yuiju.world.errors import CorruptState, LeaseLost
from yuiju.world.evolutions import Event
from yuiju.world.state import CharacterState
from yuiju.world.store import (
    LEASE_FREE,
    LEASE_MINE,
    Commit,
    LeaseView,
    Snapshot,
    StateStore,
    decode_doc,
    dumps_doc,
)

KEYS = Keys("yuiju")
CHAR_KEY = KEYS.character("yuiju")


@pytest.fixture
def store(redis: aioredis.Redis) -> StateStore:
    return StateStore(redis, KEYS)


async def save(store: StateStore, *characters: CharacterState, world: bool = True) -> None:
    def write(_snap: Snapshot) -> tuple[Commit, None]:
        return Commit(
            world=make_world(at_time("2026-09-01 08:00")) if world else None,
            characters={c.id: c for c in characters},
        ), None

    await store.transact(write, characters=[c.id for c in characters])


async def test_state_round_trips_through_redis(store: StateStore) -> None:
    her = make_character(stamina=33.5, inventory={"野莓": 2})
    await save(store, her)

    assert await store.load_character("yuiju") == her
    assert await store.load_world() == make_world(at_time("2026-09-01 08:00"))
    assert await store.load_character("nobody") is None


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ('{"id": "yuiju", "stamina": 500}', "stamina"),
        ('{"id": "yuiju", "money": -3}', "money"),
        ('{"id": "yuiju", "mood": 50, "hunger": 1}', "hunger"),
        ("{not json", "json"),
        ('{"stamina": 50}', "id"),
    ],
)
async def test_a_hand_edited_character_is_corrupt_state_naming_the_key(
    store: StateStore, redis: aioredis.Redis, raw: str, problem: str
) -> None:
    await redis.set(CHAR_KEY, raw)

    with pytest.raises(CorruptState) as caught:
        await store.load_character("yuiju")

    assert caught.value.key == CHAR_KEY
    assert CHAR_KEY in str(caught.value) and f"DEL {CHAR_KEY}" in str(caught.value)
    assert problem in caught.value.problem.lower()


async def test_a_corrupt_value_stops_a_transaction_before_it_writes(
    store: StateStore, redis: aioredis.Redis
) -> None:
    await redis.set(KEYS.world, '{"version": 1, "time": "yesterday"}')
    calls = []

    with pytest.raises(CorruptState, match=KEYS.world):
        await store.transact(lambda snap: (calls.append(snap), (Commit(), None))[1])

    assert calls == []
    assert await redis.get(KEYS.world) == '{"version": 1, "time": "yesterday"}'


async def test_transact_reruns_on_a_concurrent_write_and_loses_no_update(
    store: StateStore, redis_url: str
) -> None:
    await save(store, make_character(stamina=50, mood=50))
    other = sync_redis.Redis.from_url(redis_url, decode_responses=True)
    seen: list[CharacterState] = []

    def tire(snap: Snapshot) -> tuple[Commit, int]:
        her = snap.characters["yuiju"]
        assert her is not None
        seen.append(her.model_copy())
        if len(seen) == 1:  # another writer changes her mood between our read and our write
            rival = her.model_copy(update={"mood": 90.0})
            other.set(CHAR_KEY, rival.model_dump_json())
        her.change(stamina=-10)
        return Commit(characters={"yuiju": her}), len(seen)

    try:
        runs = await store.transact(tire, characters=["yuiju"])
    finally:
        other.close()

    assert runs == 2
    assert seen[1].mood == 90
    final = await store.load_character("yuiju")
    assert final is not None and (final.stamina, final.mood) == (40, 90)


def tire(seen: list[CharacterState]) -> Callable[[Snapshot], tuple[Commit, None]]:
    """A transaction function that takes 10 stamina off her and keeps what it saw."""

    def fn(snap: Snapshot) -> tuple[Commit, None]:
        her = snap.characters["yuiju"]
        assert her is not None
        seen.append(her.model_copy())
        her.change(stamina=-10)
        return Commit(characters={"yuiju": her}), None

    return fn


async def test_a_write_right_after_a_load_or_a_write_is_one_round_trip(
    store: StateStore, redis: aioredis.Redis
) -> None:
    # the engine loads her, completes her action and starts the next: it already knows the values
    await save(store, make_character(stamina=50))
    await store.load("yuiju")
    before = await redis_calls(redis)

    await store.transact(tire([]), characters=["yuiju"])
    await store.transact(tire([]), characters=["yuiju"])  # on the values the first one wrote

    # one script each and no read (the GETs checking the world and her run inside the script)
    assert await redis_calls(redis) - before == Counter({"evalsha": 2, "get": 2 * 2, "set": 2})
    final = await store.load_character("yuiju")
    assert final is not None and final.stamina == 30


async def test_known_values_another_writer_changed_are_read_again_before_anything_is_written(
    store: StateStore, redis: aioredis.Redis
) -> None:
    await save(store, make_character(stamina=50, mood=50))
    await store.load("yuiju")
    await redis.set(
        CHAR_KEY, make_character(stamina=50, mood=90).model_dump_json()
    )  # after our load
    seen: list[CharacterState] = []

    await store.transact(tire(seen), characters=["yuiju"])

    assert [s.mood for s in seen] == [50, 90]  # the script refused the write on the old values
    final = await store.load_character("yuiju")
    assert final is not None and (final.stamina, final.mood) == (40, 90)


async def test_a_transaction_writing_nothing_answers_from_values_read_not_known(
    store: StateStore, redis: aioredis.Redis
) -> None:
    # nothing to write means no script checks the values: the answer must rest on a read
    await save(store, make_character(money=5))
    await store.load("yuiju")
    await redis.set(CHAR_KEY, make_character(money=7).model_dump_json())

    def money(snap: Snapshot) -> tuple[Commit, int]:
        her = snap.characters["yuiju"]
        assert her is not None
        return Commit(), her.money

    assert await store.transact(money, characters=["yuiju"]) == 7


async def test_a_lost_lease_is_noticed_on_known_values_and_nothing_is_written(
    store: StateStore,
) -> None:
    await save(store, make_character(money=5))
    await store.sync_leases("engine-a", 10_000, characters=["yuiju"], take=1)
    await store.load("yuiju")
    spent: list[CharacterState] = []

    with pytest.raises(LeaseLost, match="yuiju"):
        await store.transact(tire(spent), characters=["yuiju"], lease=("yuiju", "engine-b"))

    after = await store.load_character("yuiju")
    assert after is not None and after.stamina == make_character().stamina


async def test_concurrent_transactions_on_one_key_all_apply(
    store: StateStore, redis: aioredis.Redis
) -> None:
    await save(store, make_character(money=0))
    stores = [
        StateStore(aioredis.Redis(connection_pool=redis.connection_pool), KEYS) for _ in range(5)
    ]

    def earn(snap: Snapshot) -> tuple[Commit, None]:
        her = snap.characters["yuiju"]
        assert her is not None
        her.money += 1
        return Commit(characters={"yuiju": her}), None

    await asyncio.gather(
        *(s.transact(earn, characters=["yuiju"]) for s in stores for _ in range(4))
    )

    final = await store.load_character("yuiju")
    assert final is not None and final.money == 20


async def test_a_commit_writes_state_events_and_outbox_together(
    store: StateStore, redis: aioredis.Redis
) -> None:
    now = at_time("2026-09-01 08:00")
    doc = {
        "collection": "episodes",
        "doc": {"_id": "bhv_1", "time": now, "data": {"end": now + timedelta(hours=1)}},
    }

    def write(_snap: Snapshot) -> tuple[Commit, None]:
        return Commit(
            characters={"yuiju": make_character()},
            outbox=[doc],
            events=[Event(OtherEvent.of("something", {"n": 1}), "yuiju")],
        ), None

    await store.transact(write, characters=["yuiju"], now=now)

    assert await store.load_character("yuiju") == make_character()
    entries = await store.peek_outbox()
    assert [{"collection": e.collection, "doc": e.doc} for e in entries] == [
        doc
    ]  # datetimes survive JSON
    raw = [e.raw for e in entries]
    [(_, fields)] = await redis.xrange(KEYS.events)
    assert fields == {
        "type": "something",
        "character_id": "yuiju",
        "time": now.isoformat(),
        "data": json.dumps({"n": 1}),
    }
    assert not await store.drop_outbox(
        raw, "token", 1000
    )  # not holding the flush lock: nothing trimmed
    assert await store.acquire_outbox_lock("token", 1000)
    await redis.rpush(KEYS.episode_outbox, "newer")
    assert await store.drop_outbox(
        raw, "token", 1000
    )  # exactly what was written, not the newer entry
    assert await redis.lrange(KEYS.episode_outbox, 0, -1) == ["newer"]


def test_documents_keep_aware_datetimes_through_json() -> None:
    doc = {"a": [at_time("2026-09-01 08:00"), {"b": at_time("2026-09-01 09:00")}], "c": 1}
    assert decode_doc(json.loads(dumps_doc(doc))) == doc


# -- leases -----------------------------------------------------------------------------------


async def test_a_write_under_someone_elses_lease_raises_lease_lost_and_writes_nothing(
    store: StateStore,
) -> None:
    await save(store, make_character(money=5))
    assert (await store.sync_leases("engine-a", 10_000, characters=["yuiju"], take=1)).characters[
        "yuiju"
    ] == LEASE_MINE

    def spend(snap: Snapshot) -> tuple[Commit, None]:
        her = snap.characters["yuiju"]
        assert her is not None
        her.money = 0
        return Commit(characters={"yuiju": her}), None

    with pytest.raises(LeaseLost, match="yuiju"):
        await store.transact(spend, characters=["yuiju"], lease=("yuiju", "engine-b"))
    after = await store.load_character("yuiju")
    assert after is not None and after.money == 5

    await store.transact(spend, characters=["yuiju"], lease=("yuiju", "engine-a"))
    after = await store.load_character("yuiju")
    assert after is not None and after.money == 0


async def test_a_write_under_an_expired_lease_raises_lease_lost(store: StateStore) -> None:
    await save(store, make_character())
    with pytest.raises(LeaseLost):
        await store.transact(
            lambda _s: (Commit(), None), characters=["yuiju"], lease=("yuiju", "gone")
        )


async def test_one_script_takes_renews_and_reports_a_towns_leases(
    store: StateStore, redis: aioredis.Redis
) -> None:
    both = ["yuiju", "kaede"]
    view = await store.sync_leases("a", 10_000, characters=both, take=1, take_town=True)
    assert view == LeaseView(
        town=LEASE_MINE, characters={"yuiju": LEASE_MINE, "kaede": LEASE_FREE}
    )  # a budget of one
    assert await store.lease_holder("yuiju") == await store.town_lease_holder() == "a"

    view = await store.sync_leases("b", 10_000, characters=both, take=5, take_town=True)
    assert (
        9_000 < view.town <= 10_000 and 9_000 < view.characters["yuiju"] <= 10_000
    )  # a's, with the ms it has left
    assert view.characters["kaede"] == LEASE_MINE  # the free one

    await store.sync_leases(
        "a", 60_000, characters=["yuiju"], renew_below_ms=5_000
    )  # 10 s left: not yet
    assert await redis.pttl(KEYS.lease("yuiju")) <= 10_000
    await store.sync_leases(
        "a", 60_000, characters=["yuiju"]
    )  # by default every held lease is renewed
    assert await redis.pttl(KEYS.lease("yuiju")) > 10_000
    assert await redis.pttl(KEYS.town_lease) > 10_000  # the town lease too, in the same script

    await store.release_leases("b", ["yuiju"], town=True)  # not b's: nothing happens
    assert await store.lease_holder("yuiju") == await store.town_lease_holder() == "a"
    await store.release_leases("a", ["yuiju", "kaede"], town=True)  # kaede is b's: kept
    assert await store.lease_holders(both) == {"yuiju": None, "kaede": "b"}
    assert await store.town_lease_holder() is None


async def test_the_worker_registry_lists_live_workers_and_forgets_stopped_ones(
    store: StateStore, redis: aioredis.Redis
) -> None:
    assert set(await store.heartbeat("a", 10_000, '{"name": "north"}')) == {"a"}
    assert (await store.heartbeat("a", 60_000, renew_below_ms=5_000))[
        "a"
    ] <= 10_000  # 10 s left: not yet
    live = await store.heartbeat("b", 50, '{"name": "south"}')
    assert set(live) == {"a", "b"} and 9_000 < live["a"] <= 10_000 and live["b"] <= 50
    await asyncio.sleep(0.12)  # b stops without a word
    assert set(await store.heartbeat("a", 10_000)) == {"a"}  # an empty info keeps a's
    assert await redis.hkeys(KEYS.worker_info) == ["a"]
    assert {tok: info for tok, (_, info) in (await store.workers()).items()} == {
        "a": {"name": "north"}
    }
    await store.leave_registry("a")  # a clean stop
    assert await store.workers() == {} and await redis.exists(KEYS.workers, KEYS.worker_info) == 0


async def test_an_expired_lease_can_be_taken_over(store: StateStore) -> None:
    await store.sync_leases("a", 50, characters=["yuiju"], take=1)
    await asyncio.sleep(0.12)
    assert (await store.sync_leases("a", 10_000, characters=["yuiju"])).characters[
        "yuiju"
    ] == LEASE_FREE  # gone
    assert (await store.sync_leases("b", 10_000, characters=["yuiju"], take=1)).characters[
        "yuiju"
    ] == LEASE_MINE
    assert await store.lease_holder("yuiju") == "b"


# -- writes sent together (`StateStore.batched`) -------------------------------------------------


def cheer(cid: str, mood: float = 77.0) -> Callable[[Snapshot], tuple[Commit, None]]:
    def fn(snap: Snapshot) -> tuple[Commit, None]:
        her = snap.characters[cid]
        assert her is not None
        her.mood = mood
        return Commit(
            characters={cid: her},
            outbox=[{"collection": "episodes", "doc": {"_id": f"{cid}-{mood}"}}],
        ), None

    return fn


async def test_writes_in_a_batch_are_sent_together_when_it_ends(
    store: StateStore, redis: aioredis.Redis
) -> None:
    await save(store, make_character(id="c0"), make_character(id="c1"))
    before = await redis_calls(redis)
    async with store.batched(["c0", "c1"]) as batch:
        await store.transact(cheer("c0"), characters=["c0"])
        await store.transact(cheer("c1"), characters=["c1"])
        assert len(batch.queued) == 2
    ran = await redis_calls(redis) - before
    assert (ran["mget"], ran["eval"], ran["evalsha"]) == (1, 2, 0)
    assert batch.sent == 2 and batch.redo == set()
    for cid in ("c0", "c1"):
        her = await store.load_character(cid)
        assert her is not None and her.mood == 77.0
    assert await redis.llen(KEYS.episode_outbox) == 2


async def test_a_reader_in_another_task_neither_sends_nor_loses_the_batchs_writes(
    store: StateStore, redis: aioredis.Redis
) -> None:
    # the terminal panel reads the engine's own store every second, from its own task
    await save(store, make_character(id="c0"), make_character(id="c1"))
    async with store.batched(["c0", "c1"]) as batch:
        await store.transact(cheer("c0"), characters=["c0"])
        reader = asyncio.create_task(store.load_world())
        await asyncio.sleep(0)  # the panel's read is in flight
        await store.transact(cheer("c1"), characters=["c1"])  # the engine queues meanwhile
        await reader
        panel_view = await asyncio.create_task(store.load("c0"))
        assert (
            panel_view[1] is not None and panel_view[1].mood != 77.0
        )  # Redis as it is: not sent yet
        assert len(batch.queued) == 2
    assert batch.sent == 2 and batch.redo == set()
    for cid in ("c0", "c1"):
        her = await store.load_character(cid)
        assert her is not None and her.mood == 77.0


async def test_a_batched_write_another_writer_beat_lands_nothing_and_names_her_for_a_new_step(
    store: StateStore, redis: aioredis.Redis
) -> None:
    await save(store, make_character(id="c0"), make_character(id="c1"))
    followed: list[str] = []
    async with store.batched(["c0", "c1"]) as batch:
        await store.transact(cheer("c0"), characters=["c0"], then=lambda _r: followed.append("c0"))
        await redis.set(
            KEYS.character("c1"), make_character(id="c1", mood=5).model_dump_json()
        )  # after the batch read
        await store.transact(cheer("c1"), characters=["c1"], then=lambda _r: followed.append("c1"))
    assert batch.redo == {"c1"} and followed == ["c0"]
    c1 = await store.load_character("c1")
    assert c1 is not None and c1.mood == 5  # the other writer's value stands
    assert [
        json.loads(e)["doc"]["_id"] for e in await redis.lrange(KEYS.episode_outbox, 0, -1)
    ] == ["c0-77.0"]


@pytest.mark.parametrize("broken", ["episode_outbox", "events"])
async def test_a_key_of_the_wrong_type_makes_a_write_write_nothing_and_name_the_key(
    store: StateStore, redis: aioredis.Redis, broken: str
) -> None:
    # Redis does not undo a script's earlier writes when a later one fails: a key set by hand to
    # the wrong type must not leave her state advanced without her episode, or an event doubled
    await save(store, make_character(id="c0"))
    key = getattr(KEYS, broken)
    await redis.delete(KEYS.episode_outbox, KEYS.events)
    await redis.set(key, "not a list")

    def cheer_and_say(snap: Snapshot) -> tuple[Commit, None]:
        commit, _ = cheer("c0")(snap)
        commit.events.append(Event(OtherEvent.of("cheered", {}), "c0"))
        return commit, None

    with pytest.raises(
        aioredis.ResponseError,
        match=rf"WRONGTYPE {key} holds a string where yuiju keeps a .*delete the key",
    ):
        await store.transact(cheer_and_say, characters=["c0"])
    her = await store.load_character("c0")
    assert her is not None and her.mood != 77.0
    assert {k: await redis.type(k) for k in (KEYS.episode_outbox, KEYS.events)} == {
        k: ("string" if k == key else "none") for k in (KEYS.episode_outbox, KEYS.events)
    }
