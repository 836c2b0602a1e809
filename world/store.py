"""Reading and writing world and character state in Redis, atomically.

Every write goes through `StateStore.transact`: read and validate the keys, let a pure function
compute the change, then commit the new values together with the events (stream), the episode
outbox and the consumed commands in one compare-and-set Lua script, which Redis runs atomically:
if anyone wrote a key we read in between, nothing is written and the function runs again on fresh
values (optimistic concurrency, like arq's WATCH/MULTI ``enqueue_job``, in one round trip). So a state
change, its running-action record, its episode and its events land together or not at all. Values
this store has just read or written are not read again: the script checks them all the same (a
step of the behavior loop is one read and one script per write).

Characters due together are stepped in a `StateStore.batched` block: their state is read in one
round trip at its start, and the scripts of their writes are sent together (one pipeline, in
order) instead of one round trip each, so a burst (a town waking up) waits for Redis once, not once
per character. Each script still checks what it was computed on; one that finds a change writes
nothing and its character is stepped again, alone (`WriteBatch.redo`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from redis.client import NEVER_DECODE

from yuiju.storage.keys import Keys
from yuiju.storage.redis import RedisClient, decoded
from yuiju.world.errors import CorruptState, LeaseLost
from yuiju.world.evolutions import Event
from yuiju.world.state import CharacterState, WorldState

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")

STREAM_MAXLEN = 20_000
EVENTS_KEPT_PER_CHARACTER = 200
"""A character makes about 61 events a day: a town's stream keeps at least 3 days of each one's."""
REJECTED_KEEP = 200
MAX_CONFLICT_RETRIES = 50


@dataclass(kw_only=True)
class Snapshot:
    """What a transaction function sees (fresh from Redis) and changes."""

    world: WorldState | None
    characters: dict[str, CharacterState | None]
    commands: list[str] = field(default_factory=list)
    """Raw queued command JSON, oldest first (only when the transaction takes commands)."""
    corrupt: list[CorruptState] = field(default_factory=list)
    """Characters skipped because their value does not validate (``skip_corrupt_characters``)."""


@dataclass(kw_only=True)
class Commit:
    """What a transaction function wants written."""

    world: WorldState | None = None
    characters: dict[str, CharacterState] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    outbox: list[dict[str, Any]] = field(default_factory=list)
    """Episode documents to hand to the history store (in order)."""
    commands_taken: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not (
            self.world
            or self.characters
            or self.events
            or self.outbox
            or self.commands_taken
            or self.rejected
        )


def stream_maxlen(characters: int) -> int:
    """Events a town's stream keeps: `STREAM_MAXLEN`, or 3 days of every character's if more
    (200 characters: 40,000 entries, about 12 MiB), so a stopped bot or memory worker can catch
    up after a long weekend whatever the town's size."""
    return max(STREAM_MAXLEN, EVENTS_KEPT_PER_CHARACTER * characters)


def encode_doc(value: Any) -> Any:
    """JSON-safe form of a document that keeps datetimes as ``{"$date": iso}``."""
    if isinstance(value, datetime):
        return {"$date": value.isoformat()}
    if isinstance(value, dict):
        return {k: encode_doc(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode_doc(v) for v in value]
    return value


def decode_doc(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and "$date" in value:
            return datetime.fromisoformat(value["$date"])
        return {k: decode_doc(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_doc(v) for v in value]
    return value


def dumps_doc(value: Any) -> str:
    return json.dumps(encode_doc(value), ensure_ascii=False)


def parse_model(model: type[M], key: str, raw: str | bytes | None) -> M | None:
    """Validate a Redis value, or raise `CorruptState` naming the key and the problem."""
    if raw is None:
        return None
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}"
            for e in exc.errors(include_url=False)[:5]
        )
        raise CorruptState(key, problems) from None


_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


# Every lease of one town in one step: renew ours, take free ones up to a budget, report the rest.
# KEYS[1]: the town lease, KEYS[2..]: character leases. ARGV: token, ttl ms, renew below (ms: ours
# are renewed only when they have less left, so a renewal writes every third of the ttl, not at
# every call), characters to take at most, town ("1": take the town lease if free). Returns one
# integer per key: -1 ours (renewed or taken now), 0 free (not taken), > 0 ms until another
# engine's lease runs out.
_SYNC_LEASES = """
local token, ttl, below = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local budget, take_town = tonumber(ARGV[4]), ARGV[5] == '1'
local out = {}
for i, key in ipairs(KEYS) do
  local cur = redis.call('GET', key)
  if cur == token then
    if redis.call('PTTL', key) < below then redis.call('PEXPIRE', key, ttl) end
    out[i] = -1
  elseif not cur then
    if (i == 1 and take_town) or (i > 1 and budget > 0) then
      redis.call('SET', key, token, 'PX', ttl)
      if i > 1 then budget = budget - 1 end
      out[i] = -1
    else
      out[i] = 0
    end
  else
    local left = redis.call('PTTL', key)
    if left <= 0 then left = ttl end  -- set by hand without an expiry: held, as far as we know
    out[i] = left
  end
end
return out
"""
_RELEASE_MANY = """
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
end
return 1
"""

# The worker registry, in one step: drop workers whose heartbeat ran out, (re)register this one
# with its info unless ttl is 0 (a reader), and list the live ones. KEYS: registry zset, info
# hash. ARGV: token, ttl ms, info JSON ('' keeps the stored one), renew below (ms: a heartbeat
# with more left is not rewritten, so the registry is written every third of the ttl, not at every
# check). Returns [token, ms left, ...].
# Times come from Redis's clock (scripts are replicated by effects since Redis 5), so workers on
# machines whose clocks disagree still agree on who is alive.
_HEARTBEAT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  redis.call('ZREM', KEYS[1], gone)
  redis.call('HDEL', KEYS[2], gone)
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  local expires = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if not expires or tonumber(expires) - now < tonumber(ARGV[4]) then
    redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
  end
  if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], ARGV[1], ARGV[3]) end
end
local live = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local out = {}
for i = 1, #live, 2 do
  out[#out + 1] = live[i]
  out[#out + 1] = tonumber(live[i + 1]) - now
end
return out
"""
_LEAVE = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
"""


# Compare-and-set commit. ARGV[1] is JSON {checks: [[key_index, sha1 of the expected value|null]], head:
# {key, items}|null (the commands taken must still be the head of the queue), ops: [[CMD,
# key_index, args...]]}. Returns 1 when written, 0 on a conflict (nothing written). Redis does not
# undo a script's earlier writes when a later one fails, so the type of every list and stream it
# writes is checked before anything is written: a key set by hand to another type makes it write
# nothing and name the key (an error reply).
_CAS = """
local p = cjson.decode(ARGV[1])
for _, c in ipairs(p.checks) do
  local cur = redis.call('GET', KEYS[c[1]])
  if c[2] == cjson.null then
    if cur then return 0 end
  elseif not cur or redis.sha1hex(cur) ~= c[2] then
    return 0
  end
end
if p.head ~= cjson.null then
  local n = #p.head.items
  local cur = redis.call('LRANGE', KEYS[p.head.key], 0, n - 1)
  if #cur ~= n then return 0 end
  for i = 1, n do
    if cur[i] ~= p.head.items[i] then return 0 end
  end
end
local kinds, seen = {RPUSH = 'list', LPUSH = 'list', LTRIM = 'list', XADD = 'stream'}, {}
for _, op in ipairs(p.ops) do
  local want, key = kinds[op[1]], KEYS[op[2]]
  if want and not seen[key] then
    seen[key] = true
    local t = redis.call('TYPE', key).ok
    if t ~= 'none' and t ~= want then
      return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. t .. ' where yuiju keeps a ' .. want ..
        '; nothing was written: delete the key (or restore it) so that she can go on')
    end
  end
end
for _, op in ipairs(p.ops) do
  local args = {op[1], KEYS[op[2]]}
  for i = 3, #op do args[#args + 1] = op[i] end
  redis.call(unpack(args))
end
return 1
"""


# Trim the outbox head only if it is still what was read and the flush lock is still ours; in the
# same step append the dead letters found in it. KEYS: outbox, lock, dead-letter list. ARGV:
# token, lock ttl ms, n (entries to trim), the n entries in order, then the dead-letter records.
_TRIM_OUTBOX = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
local n = tonumber(ARGV[3])
local head = redis.call('LRANGE', KEYS[1], 0, n - 1)
if #head ~= n then return 0 end
for i = 1, n do
  if head[i] ~= ARGV[i + 3] then return 0 end
end
redis.call('LTRIM', KEYS[1], n, -1)
for i = n + 4, #ARGV do
  redis.call('RPUSH', KEYS[3], ARGV[i])
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
"""


@dataclass(frozen=True)
class OutboxEntry:
    """One queued outbox entry as read: the raw string (to trim exactly it) and what it holds."""

    raw: str
    collection: str = ""
    doc: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None
    """Why no history store can ever take this entry (it is dead-lettered), or None."""


def parse_outbox_entry(raw: str) -> OutboxEntry:
    """Decode an entry ``{"collection": name, "doc": {"_id": str, ...}}``; say what is wrong if not."""
    try:
        value = decode_doc(json.loads(raw))
    except (
        ValueError,
        TypeError,
        RecursionError,
    ) as exc:  # bad JSON, bad {"$date": ...}, absurd nesting
        return OutboxEntry(raw, problem=f"cannot be decoded ({type(exc).__name__}: {exc})")
    if not isinstance(value, dict):
        return OutboxEntry(
            raw, problem=f"is a JSON {type(value).__name__}, not an object {{collection, doc}}"
        )
    collection, doc = value.get("collection"), value.get("doc")
    if not isinstance(collection, str) or not collection:
        return OutboxEntry(raw, problem="names no collection (a non-empty string 'collection')")
    if not isinstance(doc, dict) or not isinstance(doc.get("_id"), str) or not doc["_id"]:
        return OutboxEntry(raw, problem="holds no document with a non-empty string '_id' ('doc')")
    return OutboxEntry(raw, collection, doc)


def _parse_stored(stored: bytes) -> OutboxEntry:
    """An entry read as bytes: text as usual, or (not UTF-8) dead-lettered. Its ``raw`` keeps the
    exact bytes (undecodable ones as surrogate escapes) so that the entry can be trimmed."""
    try:
        return parse_outbox_entry(stored.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return OutboxEntry(
            stored.decode("utf-8", "surrogateescape"), problem=f"is not UTF-8 text ({exc.reason})"
        )


def _readable(raw: str) -> str:
    """An entry as a person can read it in the dead-letter list (undecodable bytes as U+FFFD)."""
    return raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


LEASE_MINE = -1
"""`StateStore.sync_leases`: the lease is this engine's (renewed or taken in that call)."""
LEASE_FREE = 0
"""`StateStore.sync_leases`: nobody holds the lease (and this call did not take it)."""


@dataclass(frozen=True)
class LeaseView:
    """One town's leases as `StateStore.sync_leases` found (and left) them: for the town lease
    and for each character, `LEASE_MINE`, `LEASE_FREE` or the ms left on another engine's lease."""

    town: int
    characters: dict[str, int]


BATCH_PIPELINE = 256
"""Writes of a `StateStore.batched` block the engine lets queue before it sends them (a pipeline of
this many scripts is a few hundred KiB)."""


@dataclass
class _Queued:
    """A write waiting in a batch: the commit script's keys and payload, and what follows it."""

    keys: list[str]
    payload: str
    characters: tuple[str, ...]
    written: dict[str, str]
    outbox: bool
    then: Callable[[], None] | None


@dataclass
class WriteBatch:
    """What a `StateStore.batched` block did, for the engine."""

    redo: set[str] = field(default_factory=set)
    """Characters one of whose writes did not land (a value changed since it was read, or the lease
    is gone): the engine steps them again, alone, on values read fresh."""
    sent: int = 0
    """Writes sent."""
    write_ms: float = 0.0
    """Wall time spent sending them and waiting for the replies."""
    queued: list[_Queued] = field(default_factory=list)


def _fences(
    keys: Keys, lease: tuple[str, str] | None, town_lease: str | None
) -> list[tuple[str, str, str]]:
    """What a write is fenced on: (key, the token it must hold, what to call it)."""
    fences = [(keys.lease(lease[0]), lease[1], f"the lease on {lease[0]!r}")] if lease else []
    if town_lease is not None:
        fences.append((keys.town_lease, town_lease, "the town lease"))
    return fences


def latest_saved_time(
    world: WorldState | None, characters: Iterable[CharacterState | None]
) -> datetime | None:
    """The latest world time in these states (the world's, each one's last action), or None: where
    a restart continues world time from (`StateStore.saved_world_time`)."""
    times: list[datetime] = []
    if world is not None:
        times += [world.time, world.last_advanced_at]
    for character in characters:
        if character is not None:
            times += [
                t
                for t in (
                    character.last_acted_at,
                    character.running and character.running.started_at,
                )
                if t
            ]
    return max(times, default=None)


class StateStore:
    def __init__(
        self, redis: RedisClient, keys: Keys, *, stream_maxlen: int = STREAM_MAXLEN
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.stream_maxlen = stream_maxlen
        """Events the town's stream keeps (approximately): the backlog a stopped consumer can catch up on."""
        self._cas = redis.register_script(_CAS)
        self._trim = redis.register_script(_TRIM_OUTBOX)
        self._sync_leases = redis.register_script(_SYNC_LEASES)
        self._release_many = redis.register_script(_RELEASE_MANY)
        self._heartbeat = redis.register_script(_HEARTBEAT)
        self._leave = redis.register_script(_LEAVE)
        self.outbox_writes = 0
        """Commits that queued episodes; lets the engine skip flushing when nothing was queued."""
        self._known: dict[str, str | None] = {}
        """The raw value of each state key (the world, a character) as this store last read or wrote
        it: `transact` computes on these and lets the commit script check them, instead of reading
        them again (see there). One entry per key of the town at most."""
        self._batch: WriteBatch | None = None
        """The open `batched` block, if any."""
        self._batch_task: asyncio.Task[Any] | None = None
        """The task that opened it: only its reads use the batch's values and only its writes queue
        (the terminal panel reads the engine's store from another task)."""

    # -- reads ------------------------------------------------------------------------------

    async def load_world(self) -> WorldState | None:
        await self.send_queued()
        key = self.keys.world
        return parse_model(WorldState, key, await self.redis.get(key))

    async def load_character(self, character_id: str) -> CharacterState | None:
        await self.send_queued()
        key = self.keys.character(character_id)
        return parse_model(CharacterState, key, await self.redis.get(key))

    async def load_characters(
        self, character_ids: Sequence[str]
    ) -> dict[str, CharacterState | None]:
        """Many characters in one round trip (`yuiju status` of a town of thousands)."""
        await self.send_queued()
        async with self.redis.pipeline(transaction=False) as pipe:
            for cid in character_ids:
                pipe.get(self.keys.character(cid))
            raws = await pipe.execute()
        return {
            cid: parse_model(CharacterState, self.keys.character(cid), raw)
            for cid, raw in zip(character_ids, raws, strict=True)
        }

    async def peek_characters(
        self, character_ids: Sequence[str]
    ) -> dict[str, CharacterState | None]:
        """Other characters' state for a decision's context (who is here): in a `batched` block as
        the block knows them, with no round trip, else read in one. Values that do not validate
        are left out (None): another character's corrupt state must not stop this one."""
        keys = [self.keys.character(c) for c in character_ids]
        if self._own_batch() is not None and all(k in self._known for k in keys):
            raws = [self._known[k] for k in keys]
        else:
            await self.send_queued()
            raws = [decoded(r) for r in await self.redis.mget(keys)] if keys else []
            if not self._foreign():
                self._known.update(zip(keys, raws, strict=True))
        out: dict[str, CharacterState | None] = {}
        for cid, key, raw in zip(character_ids, keys, raws, strict=True):
            try:
                out[cid] = parse_model(CharacterState, key, raw)
            except CorruptState:
                out[cid] = None
        return out

    async def load(self, character_id: str) -> tuple[WorldState | None, CharacterState | None]:
        """The world and one character in one round trip (in a `batched` block: as read at its
        start, or as written since, with no round trip; the writes' scripts check them)."""
        ckey = self.keys.character(character_id)
        if self._own_batch() is not None and self.keys.world in self._known and ckey in self._known:
            raw_world, raw_char = self._known[self.keys.world], self._known[ckey]
        else:
            await self.send_queued()
            raw_world, raw_char = [
                decoded(r) for r in await self.redis.mget([self.keys.world, ckey])
            ]
            if not self._foreign():
                self._known.update({self.keys.world: raw_world, ckey: raw_char})
        return parse_model(WorldState, self.keys.world, raw_world), parse_model(
            CharacterState, ckey, raw_char
        )

    async def saved_world_time(self, character_ids: Sequence[str]) -> datetime | None:
        """The latest world time the stores have seen (the world's, her last action's), or None on
        a first start. Values that do not validate are left out (the engine reports them)."""
        keys = [self.keys.world, *(self.keys.character(c) for c in character_ids)]
        raws = await self.redis.mget(keys)
        world: WorldState | None = None
        characters: list[CharacterState | None] = []
        for key, raw in zip(keys, raws, strict=True):
            try:
                if key == self.keys.world:
                    world = parse_model(WorldState, key, raw)
                else:
                    characters.append(parse_model(CharacterState, key, raw))
            except CorruptState:
                continue
        return latest_saved_time(world, characters)

    # -- the one way to write -----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def batched(
        self, character_ids: Sequence[str], *, also: Sequence[str] = ()
    ) -> AsyncIterator[WriteBatch]:
        """Step these characters together: the world and their state (and that of ``also``, the
        town's others a decision sees at her place) are read here in one round trip, and in the block `transact` queues the writes it computes on known values instead of
        sending each (`send_queued` sends them, in order, in one pipeline; the block's end too).

        Every queued script checks the values it was computed on, as a lone one does; one that
        finds a change writes nothing, and its character goes to `WriteBatch.redo`. Whatever
        follows a write (``then`` of `transact`) runs once it landed. Any read in the block sends
        the queued writes first, so it sees them. If the block raises, queued writes are dropped
        (nothing of theirs was written: the steps are simply redone).
        """
        if self._batch is not None:
            raise RuntimeError("StateStore.batched blocks do not nest")
        ids = [*character_ids, *(c for c in also if c not in character_ids)]
        keys = [self.keys.world, *(self.keys.character(c) for c in ids)]
        self._known.update(
            zip(keys, [decoded(r) for r in await self.redis.mget(keys)], strict=True)
        )
        batch = self._batch = WriteBatch()
        self._batch_task = asyncio.current_task()
        try:
            yield batch
            await self.send_queued()
        finally:
            self._not_landed(batch, batch.queued)  # only if the block raised: never sent
            batch.queued = []
            self._batch = self._batch_task = None

    def _own_batch(self) -> WriteBatch | None:
        """The open `batched` block if the running task opened it, else None."""
        return (
            self._batch
            if self._batch is not None and asyncio.current_task() is self._batch_task
            else None
        )

    def _foreign(self) -> bool:
        """Whether another task has a `batched` block open: its values are not this task's to use
        or to keep (they may be writes not sent yet)."""
        return self._batch is not None and self._own_batch() is None

    async def send_queued(self) -> None:
        """Send the writes the running task queued in its `batched` block, in order, in one round
        trip. Each reply is handled before an error is raised: what landed is followed up, what
        did not goes to `WriteBatch.redo` (and a write whose fate is unknown, too)."""
        batch = self._own_batch()
        if batch is None or not batch.queued:
            return
        queued, batch.queued = batch.queued, []
        t0 = time.perf_counter()
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for write in queued:
                    # EVAL, not EVALSHA: a pipeline cannot load a script a restarted server forgot
                    pipe.eval(_CAS, len(write.keys), *write.keys, write.payload)
                replies = await pipe.execute(raise_on_error=False)
        except BaseException:
            self._not_landed(batch, queued)
            raise
        finally:
            batch.write_ms += (time.perf_counter() - t0) * 1000
        batch.sent += len(queued)
        failure: BaseException | None = None
        for write, reply in zip(queued, replies, strict=True):
            if reply == 1:
                self.outbox_writes += write.outbox
                if write.then is not None:
                    try:
                        write.then()
                    except Exception:  # a follow-up's bug must not cost the other replies
                        log.exception("after a write of %s", ", ".join(write.characters))
                continue
            if isinstance(
                reply, BaseException
            ):  # a wrong-type key, a node down (a cluster pipeline's replies)
                failure = failure or reply
            self._not_landed(batch, [write])
        if failure is not None:  # raised once, after every reply was handled; the engine says it
            raise failure

    def _not_landed(self, batch: WriteBatch, writes: Sequence[_Queued]) -> None:
        """Writes that did not land (or may not have): their characters are stepped again on values
        read fresh."""
        for write in writes:
            batch.redo.update(write.characters)
            self._forget(
                [
                    *write.written,
                    *(self.keys.character(c) for c in write.characters),
                    self.keys.world,
                ]
            )

    async def transact(
        self,
        fn: Callable[[Snapshot], tuple[Commit, R]],
        *,
        characters: Sequence[str] = (),
        take_commands: bool = False,
        lease: tuple[str, str] | None = None,
        town_lease: str | None = None,
        now: datetime | None = None,
        skip_corrupt_characters: bool = False,
        then: Callable[[R], None] | None = None,
    ) -> R:
        """Run ``fn`` on a snapshot and write its `Commit` atomically; retry on conflict.

        ``then(result)`` runs once the commit landed (what must not be said or counted for a write
        that did not happen: in a `batched` block that is when the queued write is sent).

        ``lease=(character_id, token)`` fences the write: if this engine no longer holds the
        character's lease, nothing is written and `LeaseLost` is raised. ``town_lease=token``
        fences it on the town lease the same way (the world tick).

        When this store already knows every value (it just loaded or wrote them: a step loads her,
        completes her action, then starts the next), ``fn`` runs on those without reading them
        again, and the commit script checks them as it checks read ones (and the fence against the
        token): one round trip instead of two. Nothing is ever decided on an unchecked value: if
        the script finds one changed, or ``fn`` writes nothing or raises on them, the values are
        read and ``fn`` runs again, as after any conflict.
        """
        keys = self.keys
        state_keys = [keys.world, *(keys.character(c) for c in characters)]
        fences = _fences(keys, lease, town_lease)
        read_keys = [*state_keys, *(key for key, _, _ in fences)]
        # queued commands are always read; so is everything under another task's `batched` block
        foreign = self._foreign()
        may_reuse = not (take_commands or foreign)
        for _ in range(MAX_CONFLICT_RETRIES):
            reused = may_reuse and all(key in self._known for key in state_keys)
            if reused:
                raw = [*(self._known[key] for key in state_keys), *(t for _, t, _ in fences)]
                commands: list[str] = []
            else:
                raw, commands = await self._read_fenced(read_keys, fences, take_commands, foreign)
            try:
                snapshot = self._snapshot(characters, raw, commands, skip_corrupt_characters)
                commit, result = fn(snapshot)
            except Exception:
                if not reused:
                    raise
                self._forget(state_keys)  # decide nothing on unchecked values: read, run it again
                continue
            if commit.is_empty:
                if not reused:
                    return result
                self._forget(state_keys)  # its answer rests on unchecked values: read, run again
                continue
            after = None if then is None else functools.partial(then, result)
            read = list(zip(read_keys, raw, strict=True))
            if await self._write(commit, read, commands, now, after, characters, reused, foreign):
                return result
            if not foreign:
                self._forget(state_keys)
        raise RuntimeError(f"state kept changing under {read_keys}; gave up after retries")

    async def _read_fenced(
        self,
        read_keys: list[str],
        fences: list[tuple[str, str, str]],
        take_commands: bool,
        foreign: bool,
    ) -> tuple[list[str | None], list[str]]:
        """Read the values (and the queued commands); `LeaseLost` if a fence is not held."""
        raw, commands = await self._read(read_keys, take_commands)
        state = len(read_keys) - len(fences)
        for (_, token, what), held in zip(fences, raw[state:], strict=True):
            if held != token:
                raise LeaseLost(f"this engine no longer holds {what}")
        if not foreign:
            self._known.update(zip(read_keys[:state], raw, strict=False))
        return raw, commands

    def _snapshot(
        self,
        characters: Sequence[str],
        raw: list[str | None],
        commands: list[str],
        skip_corrupt_characters: bool,
    ) -> Snapshot:
        """The values as models; a corrupt character is left out (None) when told to skip."""
        keys = self.keys
        parsed: dict[str, CharacterState | None] = {}
        corrupt: list[CorruptState] = []
        for c, r in zip(characters, raw[1 : 1 + len(characters)], strict=True):
            try:
                parsed[c] = parse_model(CharacterState, keys.character(c), r)
            except CorruptState as exc:
                if not skip_corrupt_characters:
                    raise
                parsed[c] = None  # left out of the commit: nobody overwrites it
                corrupt.append(exc)
        return Snapshot(
            world=parse_model(WorldState, keys.world, raw[0]),
            characters=parsed,
            commands=list(commands),
            corrupt=corrupt,
        )

    async def _write(
        self,
        commit: Commit,
        read: list[tuple[str, str | None]],
        commands: list[str],
        now: datetime | None,
        after: Callable[[], None] | None,
        characters: Sequence[str],
        reused: bool,
        foreign: bool,
    ) -> bool:
        """Send the commit checked against the ``read`` values (or queue it in this task's
        `batched` block, for values it knew); False if one had changed (a conflict)."""
        written = self._new_values(commit)
        key_list, payload = self._payload(
            read, commands[: commit.commands_taken], commit, written, now
        )
        if reused and (batch := self._own_batch()) is not None and characters:
            # sent with others (`send_queued`)
            batch.queued.append(
                _Queued(key_list, payload, tuple(characters), written, bool(commit.outbox), after)
            )
            self._known.update(written)
            return True
        if not await self._cas(keys=key_list, args=[payload]):
            return False
        if not foreign:
            self._known.update(written)
        if commit.outbox:
            self.outbox_writes += 1
        if after is not None:
            after()
        return True

    async def _read(
        self, read_keys: list[str], take_commands: bool
    ) -> tuple[list[str | None], list[str]]:
        """The values of ``read_keys`` (and the queued commands) in one round trip."""
        await self.send_queued()
        if not take_commands:
            return [decoded(r) for r in await self.redis.mget(read_keys)], []
        # One GET per key, not MGET: redis-py's cluster pipeline refuses multi-key commands
        # (even within one slot). Still one round trip; the commit script checks every value.
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in read_keys:
                pipe.get(key)
            pipe.lrange(self.keys.commands, 0, 99)
            replies = await pipe.execute()
        return replies[: len(read_keys)], replies[len(read_keys)]

    def _forget(self, keys: Sequence[str]) -> None:
        for key in keys:
            self._known.pop(key, None)

    def _new_values(self, commit: Commit) -> dict[str, str]:
        """The state keys a commit writes, with their new JSON."""
        values = (
            {self.keys.world: commit.world.model_dump_json()} if commit.world is not None else {}
        )
        values.update(
            {
                self.keys.character(cid): state.model_dump_json()
                for cid, state in commit.characters.items()
            }
        )
        return values

    def _payload(
        self,
        expected: list[tuple[str, str | None]],
        taken: list[str],
        commit: Commit,
        written: dict[str, str],
        now: datetime | None,
    ) -> tuple[list[str], str]:
        """The keys and argument of the compare-and-set script (`_CAS`) that writes ``commit`` only
        if nothing in ``expected`` changed.

        Redis runs a script atomically, so this is WATCH/MULTI/EXEC in one round trip instead of
        three or four. ``written`` holds the new world and character values (`_new_values`). The
        script returns 1 when written, 0 on a conflict (the caller re-reads and recomputes).
        """
        keys = self.keys
        key_list: list[str] = []
        index: dict[str, int] = {}

        def k(key: str) -> int:
            if key not in index:
                index[key] = len(key_list) + 1  # Lua's KEYS is 1-based
                key_list.append(key)
            return index[key]

        checks = [
            [k(key), None if value is None else hashlib.sha1(value.encode()).hexdigest()]
            for key, value in expected
        ]
        head = {"key": k(keys.commands), "items": taken} if taken else None
        # The script checks the types of what it writes first (see `_CAS`); the state goes last all
        # the same, after everything it must never be written without.
        ops: list[list[Any]] = [
            ["RPUSH", k(keys.episode_outbox), dumps_doc(doc)] for doc in commit.outbox
        ]
        for event in commit.events:
            ops.append(
                [
                    "XADD",
                    k(keys.events),
                    "MAXLEN",
                    "~",
                    str(self.stream_maxlen),
                    "*",
                    "type",
                    event.type,
                    "character_id",
                    event.character_id or "",
                    "time",
                    now.isoformat() if now else "",
                    "data",
                    json.dumps(event.data.dump(), ensure_ascii=False, default=str),
                ]
            )
        for rejected in commit.rejected:
            ops.append(
                [
                    "LPUSH",
                    k(keys.rejected_commands),
                    json.dumps(rejected, ensure_ascii=False, default=str),
                ]
            )
        if commit.rejected:
            ops.append(["LTRIM", k(keys.rejected_commands), "0", str(REJECTED_KEEP - 1)])
        if commit.commands_taken:
            ops.append(["LTRIM", k(keys.commands), str(commit.commands_taken), "-1"])
        ops += [["SET", k(key), value] for key, value in written.items()]
        return key_list, json.dumps(
            {"checks": checks, "head": head, "ops": ops}, ensure_ascii=False
        )

    # -- leases (one engine drives a character, one advances the town, at a time) ----------------

    async def lease_holder(self, character_id: str) -> str | None:
        return decoded(await self.redis.get(self.keys.lease(character_id)))

    async def town_lease_holder(self) -> str | None:
        return decoded(await self.redis.get(self.keys.town_lease))

    async def sync_leases(
        self,
        token: str,
        ttl_ms: int,
        *,
        characters: Sequence[str],
        take: int = 0,
        take_town: bool = False,
        renew_below_ms: int | None = None,
    ) -> LeaseView:
        """The town's leases in one atomic script (one round trip, whatever the number of
        characters): renew this engine's (those with less than ``renew_below_ms`` left; default:
        all), take up to ``take`` free character leases in the order given, and the town lease when
        ``take_town`` and it is free; report the others (see `LeaseView`)."""
        keys = [self.keys.town_lease, *(self.keys.lease(c) for c in characters)]
        below = ttl_ms + 1 if renew_below_ms is None else renew_below_ms
        found = await self._sync_leases(
            keys=keys, args=[token, ttl_ms, below, take, "1" if take_town else "0"]
        )
        return LeaseView(
            town=int(found[0]), characters=dict(zip(characters, map(int, found[1:]), strict=True))
        )

    async def release_leases(
        self, token: str, characters: Sequence[str], *, town: bool = False
    ) -> None:
        """Give up these character leases (and the town lease) if this engine holds them, at once."""
        keys = [
            *(self.keys.lease(c) for c in characters),
            *([self.keys.town_lease] if town else []),
        ]
        if keys:
            await self._release_many(keys=keys, args=[token])

    async def lease_holders(self, characters: Sequence[str]) -> dict[str, str | None]:
        """Who holds each character's lease (an engine token), in one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for cid in characters:
                pipe.get(self.keys.lease(cid))
            return dict(zip(characters, await pipe.execute(), strict=True))

    # -- the worker registry (in the default town's keys) -------------------------------------

    async def heartbeat(
        self, token: str, ttl_ms: int, info: str = "", *, renew_below_ms: int | None = None
    ) -> dict[str, int]:
        """Say this worker is alive for ``ttl_ms`` more (when it has less than ``renew_below_ms``
        left; default: always), with its ``info`` JSON when given; the live workers, this one
        included, with the ms each has left."""
        below = ttl_ms + 1 if renew_below_ms is None else renew_below_ms
        found = await self._heartbeat(
            keys=[self.keys.workers, self.keys.worker_info], args=[token, ttl_ms, info, below]
        )
        return {str(found[i]): int(found[i + 1]) for i in range(0, len(found), 2)}

    async def leave_registry(self, token: str) -> None:
        """A clean stop: the others share this worker's characters out at once."""
        await self._leave(keys=[self.keys.workers, self.keys.worker_info], args=[token])

    async def workers(self) -> dict[str, tuple[int, dict[str, Any]]]:
        """The live workers: token -> (ms left on its heartbeat, its info), for `yuiju status`."""
        live = await self.heartbeat("", 0)
        raw = await self.redis.hgetall(self.keys.worker_info)
        out: dict[str, tuple[int, dict[str, Any]]] = {}
        for token, left in live.items():
            try:
                info = json.loads(raw.get(token) or "{}")
            except ValueError:
                info = {}
            out[token] = (left, info if isinstance(info, dict) else {})
        return out

    # -- the episode outbox -----------------------------------------------------------------------

    async def peek_outbox(self, limit: int = 100) -> list[OutboxEntry]:
        """The oldest queued entries, decoded; a malformed one says why (`OutboxEntry.problem`)."""
        try:
            raw = await self.redis.lrange(self.keys.episode_outbox, 0, limit - 1)
        except UnicodeDecodeError:  # bytes no client of ours wrote: read them as they are
            stored = await self.redis.execute_command(
                "LRANGE", self.keys.episode_outbox, 0, limit - 1, **{NEVER_DECODE: True}
            )
            return [_parse_stored(b) for b in stored]
        return [parse_outbox_entry(decoded(r)) for r in raw]

    async def drop_outbox(
        self,
        written: Sequence[str],
        token: str,
        lock_ms: int,
        *,
        dead: Sequence[tuple[str, str]] = (),
    ) -> bool:
        """Remove the entries just handled, only if they are still the head of the outbox and this
        engine still holds the flush lock (renewed here), and in the same atomic step move
        ``dead`` ``(entry, reason)`` pairs to the dead-letter list; False if not (nothing changed)."""
        at = datetime.now(UTC).isoformat(timespec="seconds")  # for the human reading the list
        records = [
            json.dumps({"entry": _readable(e), "reason": r, "at": at}, ensure_ascii=False)
            for e, r in dead
        ]
        exact = [
            e.encode("utf-8", "surrogateescape") for e in written
        ]  # the stored bytes, whatever they are
        return bool(
            await self._trim(
                keys=[self.keys.episode_outbox, self.keys.outbox_lock, self.keys.outbox_dead],
                args=[token, lock_ms, len(written), *exact, *records],
            )
        )

    async def dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest ``limit`` dead-lettered outbox entries, oldest first: ``{entry, reason, at}``."""
        out = []
        for raw in await self.redis.lrange(self.keys.outbox_dead, -limit, -1):
            try:
                record = json.loads(raw)
            except ValueError:
                record = None
            out.append(
                record
                if isinstance(record, dict)
                else {"entry": raw, "reason": "(a record not written by yuiju)"}
            )
        return out

    async def dead_letter_count(self) -> int:
        return int(await self.redis.llen(self.keys.outbox_dead))

    async def acquire_outbox_lock(self, token: str, ttl_ms: int) -> bool:
        return bool(await self.redis.set(self.keys.outbox_lock, token, nx=True, px=ttl_ms))

    async def release_outbox_lock(self, token: str) -> None:
        await self.redis.eval(_RELEASE, 1, self.keys.outbox_lock, token)

    async def outbox_size(self) -> int:
        return int(await self.redis.llen(self.keys.episode_outbox))
