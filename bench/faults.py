"""The kill/fault/fuzz run of issue 11: real `yuiju` processes under every fault the issue lists,
and the five counts of its bar.

    python bench/faults.py                 # about 4 minutes; --kills N for a longer kill -9 loop
    python bench/faults.py --keep DIR      # keep the data dirs and logs there

Each scenario runs `yuiju run` / `yuiju world` / `yuiju bot` as a user would (own process, own
data dir, the embedded Redis and SQLite), with the local OpenAI-compatible stub as the model and a
fake OneBot v11 implementation on the bot's reverse WebSocket (it answers API calls as NapCat does
and keeps every text sent to the group). Counted over the whole run:

- **crashes**: an exit code other than the expected one, and every ``Traceback`` in a log;
- **blocked outbox**: outbox entries still queued 12 s later while the engine runs (the engine
  writes what other parts queued at each lease check, 10 s apart), and poison entries not moved to
  the dead-letter list;
- **event-loop stalls > 1 s**: the daemon's own monitor (``[app] loop_lag_warn_ms = 250``) logs
  every stall with its length; stops are timed too (a stop over 2 s is counted as a stall);
- **non-message text in a group**: a text the fake QQ side received that holds reasoning
  markup, JSON or code fragments, a Python repr, a raw place id, U+FFFD or a lone surrogate;
- **lost conversations**: a message delivered to a running bot (at least 2 s before a kill) that
  is not archived into a conversation episode after the final ``/distill`` (which archives every
  open window). A message archived but missing from the message log (its write cut short by a
  stop while the history file was locked) is counted in the notes, not here.

Exit status 1 when any count is not zero.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import websockets

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.openai_stub import OpenAIStub, StubCut, StubDelay, requested_schema, schema_following  # noqa: E402

BOT, GROUP, ADMIN, TOKEN = 10001, 123456, 90001, "faults-token"
STALL_MS = 1000
STOP_LIMIT_S = 2.0

NOT_A_MESSAGE = re.compile(
    r"</?(?:think|thinking|reasoning|tool_call|msg|system)\b|```|[{\[]\s*\"|\"\s*:\s*|\"\s*,\s*\"|"
    r"\w+Report\(|\w+\(\w+=|Traceback|\ufffd|[\ud800-\udfff]|你正在[a-z_]+|finish_reason|\[CQ:",
    re.IGNORECASE,
)
"""What never belongs in a chat message (independent of the product's own output filter)."""

ADVERSARIAL = [
    "<think>用户在问我在不在，我应该回答在。</think>",
    '{"action": "eat", "reason": "肚子饿了，想吃',
    '", "confiden',
    StubCut("嗯……我今天其实去了"),
    "<think>先想想要不要说",
    '```json\n{"reply": "在的"}\n```',
    '[{"type": "text", "data": {"text": "在"}}]',
    "在的在的～",
    "刚吃完饭，有点困了。",
]
"""Chat answers of the stub, in turn: most are not messages and must never reach the group."""


@dataclass
class Tally:
    crashes: list[str] = field(default_factory=list)
    blocked_outbox: list[str] = field(default_factory=list)
    stalls: list[str] = field(default_factory=list)
    non_messages: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stops: list[tuple[str, float]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "crashes": len(self.crashes),
            "blocked_outbox": len(self.blocked_outbox),
            "stalls_over_1s": len(self.stalls),
            "non_message_texts": len(self.non_messages),
            "lost_conversations": len(self.lost),
        }


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(
    path: Path,
    data: Path,
    stub_url: str,
    *,
    bot: bool = True,
    memory: bool = True,
    speed: float = 60,
    bot_port: int | None = None,
) -> dict[str, int]:
    ports = {"web": free_port(), "bot": bot_port or free_port()}
    path.write_text(
        f"""
[app]
data_dir = "{data.as_posix()}"
loop_lag_warn_ms = 250
[llm]
base_url = "{stub_url}"
model = "stub"
timeout_seconds = 30
breaker_cooldown_seconds = 5
[world]
policy = "llm"
speed = {speed}
[web]
port = {ports["web"]}
[embeddings]
provider = "hashing"
[memory]
enabled = {str(memory).lower()}
[onebot]
enabled = {str(bot).lower()}
port = {ports["bot"]}
access_token = "{TOKEN}"
[chat]
admins = [{ADMIN}]
max_pause_seconds = 0
window_messages = 6
[chat.groups.{GROUP}]
reply = "mention"
""",
        encoding="utf-8",
    )
    return ports


class Daemon:
    """One `yuiju` process, its log kept; stops are timed and checked."""

    def __init__(
        self, tally: Tally, config: Path, *args: str, name: str, env: dict[str, str] | None = None
    ) -> None:
        self.tally, self.config, self.args, self.name = tally, config, args, name
        self.extra_env = env or {}
        self.log = config.parent / f"{name}.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.runs = 0

    async def start(self, *extra: str) -> None:
        self.runs += 1
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("YUIJU_") and k != "REDIS_URL"
        }
        env.update(self.extra_env)
        with self.log.open("ab") as err:
            err.write(f"\n===== start {self.runs}: {' '.join(self.args + extra)}\n".encode())
            err.flush()
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "yuiju.cli",
                "--config",
                str(self.config),
                *self.args,
                *extra,
                cwd=ROOT,
                env=env,
                stdout=err,
                stderr=err,
            )

    async def wait_for(self, text: str, seconds: float = 60, *, after: int = 0) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if text in self.log.read_text(errors="replace")[after:]:
                return True
            if self.proc is not None and self.proc.returncode is not None:
                return False
            await asyncio.sleep(0.1)
        return False

    def mark(self) -> int:
        return len(self.log.read_text(errors="replace")) if self.log.exists() else 0

    async def stop(self, what: str, sig: int = signal.SIGTERM) -> float:
        assert self.proc is not None
        if self.proc.returncode is not None:
            self.tally.crashes.append(
                f"{self.name}: {what}: it had already exited with {self.proc.returncode}"
            )
            return 0.0
        started = time.monotonic()
        self.proc.send_signal(sig)
        try:
            code = await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            code = await self.proc.wait()
            self.tally.crashes.append(f"{self.name}: {what}: did not stop within 30 s")
        took = time.monotonic() - started
        self.tally.stops.append((f"{self.name}: {what}", took))
        if code != 0:
            self.tally.crashes.append(f"{self.name}: {what}: exit {code}")
        if took > STOP_LIMIT_S:
            self.tally.stalls.append(f"{self.name}: {what}: stop took {took:.1f} s")
        return took

    async def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    def audit(self) -> None:
        text = self.log.read_text(errors="replace")
        for m in re.finditer(r"Traceback \(most recent call last\)", text):
            self.tally.crashes.append(
                f"{self.name}: traceback: {text[m.start() : m.start() + 900]!r}"
            )
        for m in re.finditer(r"event loop stalled for (\d+) ms", text):
            if int(m.group(1)) > STALL_MS:
                self.tally.stalls.append(f"{self.name}: event loop stalled {m.group(1)} ms")


class FakeOneBot:
    """The QQ side: connects to the bot, answers API calls, keeps what was sent to groups."""

    def __init__(self) -> None:
        self.ws: Any = None
        self.sent: list[str] = []
        self.delivered: dict[str, float] = {}
        """Text of each user message → when it was sent to a live bot."""
        self._reader: asyncio.Task[None] | None = None
        self._mid = 1000

    async def connect(self, port: int, seconds: float = 60) -> None:
        url = f"ws://127.0.0.1:{port}/onebot/v11/ws"
        headers = {
            "X-Self-ID": str(BOT),
            "X-Client-Role": "Universal",
            "Authorization": f"Bearer {TOKEN}",
        }
        deadline = time.monotonic() + seconds
        while True:
            try:
                self.ws = await websockets.connect(url, additional_headers=headers, max_size=None)
                break
            except (OSError, websockets.InvalidStatus, websockets.InvalidHandshake):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        await self.ws.send(
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
        self._reader = asyncio.create_task(self._answer())

    async def _answer(self) -> None:
        with contextlib.suppress(websockets.WebSocketException, OSError):
            async for raw in self.ws:
                frame = json.loads(raw)
                if frame.get("action") in ("send_msg", "send_group_msg", "send_private_msg"):
                    message = frame["params"].get("message")
                    texts = (
                        [s.get("data", {}).get("text", "") for s in message]
                        if isinstance(message, list)
                        else [str(message)]
                    )
                    self.sent.extend(texts)
                await self.ws.send(
                    json.dumps(
                        {
                            "status": "ok",
                            "retcode": 0,
                            "echo": frame.get("echo"),
                            "data": {"message_id": len(self.sent)},
                        }
                    )
                )

    async def close(self) -> None:
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        self.ws = self._reader = None

    def event(
        self, text: str, *, user: int = 20002, mention: bool = True, **overrides: Any
    ) -> dict[str, Any]:
        self._mid += 1
        segments = ([{"type": "at", "data": {"qq": str(BOT)}}] if mention else []) + [
            {"type": "text", "data": {"text": text}}
        ]
        event = {
            "time": int(time.time()),
            "self_id": BOT,
            "post_type": "message",
            "message_type": "group",
            "sub_type": "normal",
            "message_id": self._mid,
            "group_id": GROUP,
            "user_id": user,
            "anonymous": None,
            "message": segments,
            "raw_message": text,
            "font": 0,
            "sender": {"user_id": user, "nickname": "小明", "card": "", "role": "member"},
        }
        return {**event, **overrides}

    async def say(self, text: str, **kw: Any) -> None:
        if self.ws is None:
            return
        try:
            await self.ws.send(json.dumps(self.event(text, **kw)))
            self.delivered[text] = time.monotonic()
        except websockets.WebSocketException:
            pass

    async def raw(self, frame: str | bytes, *, text: bool | None = None) -> bool:
        """Send one frame (``text=True``: bytes as a text frame, UTF-8 or not)."""
        try:
            await self.ws.send(frame, text=text)
            return True
        except websockets.WebSocketException:
            return False


def fuzz_frames(rng: random.Random, n: int) -> list[str | bytes]:
    """Broken OneBot frames: garbage, wrong types, missing fields, mangled events."""
    bot = FakeOneBot()
    out: list[str | bytes] = []
    for i in range(n):
        kind = i % 8
        if kind == 0:
            out.append(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))))
        elif kind == 1:
            out.append("{" * rng.randint(1, 5) + "not json")
        elif kind == 2:
            out.append(json.dumps([1, 2, "x"]))
        elif kind == 3:
            out.append(
                json.dumps(
                    {
                        "post_type": "message",
                        "self_id": BOT,
                        "message_type": "group",
                        "broken": True,
                    }
                )
            )
        else:
            event = bot.event(f"fuzz {i}", mention=False)
            key = rng.choice(list(event))
            event[key] = rng.choice([None, -1, 2**70, "", [], {}, "\ud83d", 1e308, True])
            out.append(json.dumps(event))
    return out


async def seconds_of(client: httpx.AsyncClient, path: str) -> float:
    started = time.monotonic()
    with contextlib.suppress(httpx.HTTPError):
        await client.get(path, timeout=10)
    return time.monotonic() - started


def sqlite_docs(data: Path, collection: str) -> list[dict[str, Any]]:
    db = sqlite3.connect(f"file:{data / 'history.sqlite3'}?mode=ro", uri=True, timeout=10)
    try:
        rows = db.execute(f'SELECT _doc FROM "{collection}"').fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()

    def dates(obj: dict[str, Any]) -> Any:
        return datetime.fromisoformat(obj["$date"]) if set(obj) == {"$date"} else obj

    return [json.loads(r[0], object_hook=dates) for r in rows]


def redis_cli(data: Path, *command: str) -> str:
    """One command on a data dir's embedded Redis, while a daemon runs it."""
    import redis as sync_redis

    settings = json.loads((data / "redis.db.settings").read_text())
    client = sync_redis.Redis(unix_socket_path=settings["unixsocket"], decode_responses=True)
    try:
        return str(client.execute_command(*command))
    finally:
        client.close()


def redis_cli_list(data: Path, key: str) -> list[str]:
    import redis as sync_redis

    settings = json.loads((data / "redis.db.settings").read_text())
    client = sync_redis.Redis(unix_socket_path=settings["unixsocket"])
    try:
        return [raw.decode("utf-8", "replace") for raw in client.lrange(key, 0, -1)]
    finally:
        client.close()


def embedded_pid(data: Path) -> int:
    settings = json.loads((data / "redis.db.settings").read_text())
    return int(Path(settings["pidfile"]).read_text())


def status_json(config: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "yuiju.cli", "--config", str(config), "status", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout)


# -- scenarios -----------------------------------------------------------------------------------


async def life_under_faults(
    tally: Tally, work: Path, stub: OpenAIStub, kills: int, rng: random.Random
) -> None:
    """`yuiju run` with the bot: chat (adversarial answers, bad input, fuzz), kill -9 loops, poison
    outbox entries, the embedded Redis killed, a held SQLite lock, SIGTERM in every state."""
    config, data = work / "life.toml", work / "life-data"
    ports = write_config(config, data, stub.base_url)
    daemon = Daemon(tally, config, "run", "--no-panel", name="life")
    qq = FakeOneBot()
    said = 0

    async def start() -> bool:
        mark = daemon.mark()
        await daemon.start()
        if not await daemon.wait_for("QQ 机器人", 90, after=mark):
            tally.crashes.append(f"life: start {daemon.runs} did not come up")
            return False
        await qq.connect(ports["bot"])
        return True

    async def chat(n: int) -> None:
        nonlocal said
        for _ in range(n):
            said += 1
            await qq.say(f"第{said}句：你今天做了什么呀")
            await asyncio.sleep(rng.uniform(0.2, 0.6))

    # 1. kill -9 loop: messages, then a kill at a random moment; delivered messages must survive
    for k in range(kills):
        if not await start():
            break
        await chat(rng.randint(3, 6))
        await asyncio.sleep(2.0)  # what was said 2 s before the kill must be kept
        cut = time.monotonic()
        await asyncio.sleep(rng.uniform(0, 1.5))
        await daemon.kill9()
        await qq.close()
        for text, at in list(qq.delivered.items()):
            if at > cut - 2.0:
                del qq.delivered[text]  # sent in the last 2 s before the kill: not counted
        tally.notes.append(f"kill -9 #{k + 1} after {said} messages")

    if not await start():
        return
    # 2. bad input: lone surrogates, ids beyond 64 bits, time overflow, fuzzed frames
    await qq.say("你好\ud83d，在吗", user=20003)
    await qq.raw(json.dumps(qq.event("超大 id", user=2**64 + 1)))
    await qq.raw(json.dumps(qq.event("时间溢出", time=10**20)))
    await qq.raw(
        json.dumps(qq.event("昵称坏了", sender={"user_id": 20004, "nickname": "小\ud800明"}))
    )
    before = daemon.log.stat().st_size
    frames = fuzz_frames(rng, 2000)
    for frame in frames:
        if not await qq.raw(frame):
            tally.crashes.append("life: the fuzz closed the OneBot connection")
            await qq.close()
            await qq.connect(ports["bot"])
    grown = daemon.log.stat().st_size - before
    tally.notes.append(f"{len(frames)} fuzzed frames: log grew {grown / 1024:.0f} KiB")
    await chat(5)

    # 3. poison outbox entries: moved to the dead-letter list, the rest flows
    outbox = "{yuiju}:outbox:episodes"
    redis_cli(data, "RPUSH", outbox, "not json")
    redis_cli(data, "RPUSH", outbox, '{"foo": 1}')
    redis_cli(data, "RPUSH", outbox, b"\xff\xfe{not utf-8")
    await asyncio.sleep(3)

    # 4. the embedded redis-server killed: restarted from its AOF
    os.kill(embedded_pid(data), signal.SIGKILL)
    if not await daemon.wait_for("the embedded Redis is back", 30):
        tally.crashes.append("life: the embedded Redis was not restarted")
    await asyncio.sleep(1)
    await chat(3)

    # 5. a SQLite lock held for 8 s: the page must keep answering
    lock = sqlite3.connect(data / "history.sqlite3", timeout=10, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    slowest = 0.0
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports['web']}") as page:
        for _ in range(16):
            slowest = max(slowest, await seconds_of(page, "/healthz"))
            await asyncio.sleep(0.5)
    await chat(2)
    # 6. SIGTERM during a flush the lock holds up
    await daemon.stop("SIGTERM with the history file locked (flush waiting)")
    lock.execute("ROLLBACK")
    lock.close()
    await qq.close()
    tally.notes.append(f"page during an 8 s SQLite lock: slowest /healthz {slowest * 1000:.0f} ms")
    if slowest > 1.0:
        tally.stalls.append(f"life: the page took {slowest:.1f} s during the SQLite lock")

    # 7. SIGTERM during an LLM call (the decision waits 20 s at the stub)
    handler = stub.handler
    stub.handler = lambda body: (
        StubDelay(20, handler(body)) if requested_schema(body) else handler(body)
    )
    await start()
    await chat(2)
    await daemon.wait_for("decision", 5)
    await asyncio.sleep(2)
    await qq.close()
    await daemon.stop("SIGTERM during an LLM call")
    stub.handler = handler

    # 8. SIGTERM while the embedded Redis is down (killed a moment before)
    await start()
    await chat(2)
    await asyncio.sleep(2)
    os.kill(embedded_pid(data), signal.SIGKILL)
    await asyncio.sleep(0.2)
    await qq.close()
    await daemon.stop("SIGTERM with Redis just killed")

    # 9. last run: the outbox flows (nothing stays queued past the engine's next lease check, 10 s
    # apart), every open window is archived (/distill), then a clean stop
    mark = daemon.mark()
    await start()
    await daemon.wait_for("driving character", 45, after=mark)
    await chat(3)
    queued = set(redis_cli_list(data, outbox))
    await asyncio.sleep(12)
    stuck = queued & set(redis_cli_list(data, outbox))
    if stuck:
        tally.blocked_outbox.append(
            f"life: {len(stuck)} outbox entries still queued after 12 s: {sorted(stuck)[:3]}"
        )
    await qq.say("/distill", user=ADMIN)
    await asyncio.sleep(6)
    await qq.close()
    await daemon.stop("final clean stop")
    daemon.audit()

    status = status_json(config)
    tally.notes.append(
        f"life: {status['episode_outbox']} episodes queued at the last stop (written at the next start)"
    )
    dead = status["outbox_dead_letters"]["count"]
    tally.notes.append(f"dead letters reported by `yuiju status`: {dead} (3 poison entries pushed)")
    if dead < 3:
        tally.blocked_outbox.append(f"life: the poison entries were not dead-lettered ({dead})")

    logged = {d.get("text", "") for d in sqlite_docs(data, "chat_log")}
    archived = {
        m.get("text", "")
        for d in sqlite_docs(data, "episodes")
        if d.get("type") == "conversation"
        for m in d.get("data", {}).get("messages", [])
    }
    unlogged = 0
    for text in qq.delivered:
        if text.startswith("/"):
            continue
        shown = text.replace("\ud83d", "\ufffd")
        in_log = any(shown in t for t in logged)
        if not any(shown in t for t in archived):
            tally.lost.append(
                f"never archived ({'logged' if in_log else 'not logged either'}): {text!r}"
            )
        elif not in_log:
            unlogged += 1
    tally.notes.append(f"life: {unlogged} archived messages missing from the message log")
    tally.notes.append(
        f"life: {len(qq.delivered)} messages delivered, {len(logged)} logged, "
        f"{len(archived)} archived lines; {daemon.runs} starts"
    )
    audit_group(tally, qq.sent)


def audit_group(tally: Tally, sent: list[str]) -> None:
    for text in sent:
        if NOT_A_MESSAGE.search(text):
            tally.non_messages.append(repr(text[:120]))
    tally.notes.append(f"{len(sent)} texts reached the group")


async def speed_and_two_daemons(tally: Tally, work: Path, stub: OpenAIStub) -> None:
    """--speed then a normal restart (world time never goes back, no overlapping episodes), pause
    and resume, and a second daemon at 6000x next to the first (only the lease holder advances)."""
    config, data = work / "speed.toml", work / "speed-data"
    write_config(config, data, stub.base_url, bot=False, memory=False, speed=1)
    fast = Daemon(tally, config, "world", "--no-panel", name="speed")
    await fast.start("--speed", "600")
    await fast.wait_for("开始「", 60)
    await asyncio.sleep(8)
    await fast.stop("SIGTERM of a --speed 600 run")
    ahead = status_json(config)["world"]["time"]

    normal = Daemon(tally, config, "world", "--no-panel", name="normal")
    await normal.start()
    await normal.wait_for("ahead of the wall clock", 60)
    await asyncio.sleep(3)
    # pause and resume through the world command queue, as the admin command does
    redis_cli(data, "RPUSH", "{yuiju}:commands", json.dumps({"type": "pause"}))
    await asyncio.sleep(3)
    redis_cli(data, "RPUSH", "{yuiju}:commands", json.dumps({"type": "resume"}))
    await asyncio.sleep(2)
    world_before = json.loads(redis_cli(data, "GET", "{yuiju}:world"))["time"]
    # a second daemon at 6000x on the same data dir
    racer = Daemon(
        tally,
        config,
        "world",
        "--no-panel",
        name="racer",
        env={"YUIJU_WEB__PORT": str(free_port())},
    )
    await racer.start("--speed", "6000")
    await asyncio.sleep(10)
    world_after = json.loads(redis_cli(data, "GET", "{yuiju}:world"))["time"]
    await racer.stop("SIGTERM of the second daemon")
    await normal.stop("SIGTERM of the first daemon")
    for d in (fast, normal, racer):
        d.audit()
    saved_after = status_json(config)["world"]["time"]
    if datetime.fromisoformat(saved_after) < datetime.fromisoformat(ahead):
        tally.crashes.append(f"speed: world time went back from {ahead} to {saved_after}")
    jump = (
        datetime.fromisoformat(world_after) - datetime.fromisoformat(world_before)
    ).total_seconds()
    tally.notes.append(f"two daemons: world moved {jump:.0f} s in 10 s (600x+ would be ~60000 s)")
    if jump > 120:
        tally.crashes.append(f"speed: the second daemon moved the world by {jump:.0f} s")
    episodes = sorted(
        (d for d in sqlite_docs(data, "episodes") if d.get("type") == "behavior"),
        key=lambda d: d["time"],
    )
    overlaps = sum(
        1
        for a, b in pairwise(episodes)
        if a.get("end_time") and b["time"] < a["end_time"] and a.get("status") == "completed"
    )
    tally.notes.append(f"speed: {len(episodes)} behavior episodes, {overlaps} overlapping pairs")
    if overlaps:
        tally.crashes.append(f"speed: {overlaps} overlapping episode pairs")


async def standalone_bot(tally: Tally, work: Path, stub: OpenAIStub) -> None:
    """`yuiju world` and a standalone `yuiju bot` on the same stores, after the world was left
    ahead by a --speed run: the bot chats in world time."""
    config, data = work / "split.toml", work / "split-data"
    ports = write_config(config, data, stub.base_url, bot=True, memory=False, speed=1)
    world = Daemon(tally, config, "world", "--no-panel", name="split-world")
    await world.start("--speed", "600")
    await world.wait_for("开始「", 60)
    await asyncio.sleep(6)
    await world.stop("SIGTERM of the sped-up world")
    await world.start()
    await world.wait_for("ahead of the wall clock", 60)
    bot = Daemon(tally, config, "bot", name="split-bot", env={"YUIJU_WEB__PORT": str(free_port())})
    await bot.start()
    qq = FakeOneBot()
    await qq.connect(ports["bot"], 90)
    for i in range(4):
        await qq.say(f"独立机器人第{i}句")
        await asyncio.sleep(1)
    await asyncio.sleep(3)
    await qq.close()
    await bot.stop("SIGTERM of yuiju bot")
    await world.stop("SIGTERM of yuiju world")
    for d in (world, bot):
        d.audit()
    audit_group(tally, qq.sent)
    world_time = datetime.fromisoformat(status_json(config)["world"]["time"])
    replies = [d for d in sqlite_docs(data, "chat_log") if d.get("from_bot")]
    late = [d["time"] for d in replies if d["time"] < world_time - timedelta(minutes=30)]
    tally.notes.append(
        f"standalone bot: {len(replies)} replies, {len(late)} stamped behind world time"
    )
    if late:
        tally.crashes.append(
            f"standalone bot: {len(late)} replies stamped on the wall clock behind world time"
        )


def cli_checks(tally: Tally, work: Path) -> None:
    """init + a README snippet pasted, a URL without a scheme, `yuiju status | head -1`."""
    config = work / "init.toml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("YUIJU_")}
    run = lambda *a, **kw: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "yuiju.cli", *a],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        **kw,
    )
    out = run("--config", str(config), "init")
    if out.returncode:
        tally.crashes.append(f"init: exit {out.returncode}: {out.stderr[-300:]}")
    text = config.read_text(encoding="utf-8")
    text = text.replace(
        'data_dir = "yuiju-data"', f'data_dir = "{(work / "init-data").as_posix()}"'
    )
    # the README's snippets, pasted at the end as it tells users to
    config.write_text(
        text + f'\n[chat.groups.{GROUP}]\nreply = "mention"\n\n[proactive.groups.{GROUP}]\n'
        'label = "读书会"\ndaily_cap = 3\n',
        encoding="utf-8",
    )
    out = run("--config", str(config), "actions", "check")
    if out.returncode not in (0, 1) or "Traceback" in out.stderr:
        tally.crashes.append(f"init + pasted snippets: exit {out.returncode}: {out.stderr[-300:]}")
    bad = work / "noscheme.toml"
    bad.write_text('[llm]\nbase_url = "api.deepseek.com"\n', encoding="utf-8")
    out = run("--config", str(bad), "status")
    if out.returncode != 2 or "https://" not in out.stderr or "Traceback" in out.stderr:
        tally.crashes.append(f"no-scheme URL: exit {out.returncode}: {out.stderr[-300:]}")
    piped = subprocess.run(
        f"{sys.executable} -m yuiju.cli --config {config} status | head -1",
        shell=True,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if "Traceback" in piped.stderr or "BrokenPipe" in piped.stderr:
        tally.crashes.append(f"status | head: {piped.stderr[-300:]}")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=5, help="kill -9 rounds (default 5)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--keep", help="keep data dirs and logs in this directory")
    args = parser.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="yuiju-faults-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    tally = Tally()
    chat_turns = iter(range(10**9))
    decide = schema_following(args.seed)

    def answer(body: dict[str, Any]) -> Any:
        if requested_schema(body) is not None:
            n = next(chat_turns)
            return (
                '{"action": "sle' if n % 7 == 3 else decide(body)
            )  # now and then a cut-off decision
        return ADVERSARIAL[next(chat_turns) % len(ADVERSARIAL)]

    started = time.monotonic()
    with OpenAIStub(handler=answer) as stub:
        cli_checks(tally, work)
        await life_under_faults(tally, work, stub, args.kills, rng)
        await speed_and_two_daemons(tally, work, stub)
        await standalone_bot(tally, work, stub)
    took = time.monotonic() - started
    counts = tally.counts()
    print(
        json.dumps(
            {
                "counts": counts,
                "minutes": round(took / 60, 1),
                "kills": args.kills,
                "seed": args.seed,
                "slowest_stop_s": round(max((s for _, s in tally.stops), default=0), 2),
                "stops": len(tally.stops),
                "notes": tally.notes,
            },
            ensure_ascii=False,
            indent=1,
        )
    )
    for what in ("crashes", "blocked_outbox", "stalls", "non_messages", "lost"):
        for line in getattr(tally, what)[:10]:
            print(f"{what}: {line}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"logs and data in {work}")
    return 1 if any(counts.values()) else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
