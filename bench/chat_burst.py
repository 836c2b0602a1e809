"""A burst of OneBot frames into `yuiju bot` over its real WebSocket: is every message recorded?

    python bench/chat_burst.py                       # 10,000 frames at 200/s, memory on
    python bench/chat_burst.py --frames 2000 --rate 0 --keep /tmp/burst   # as fast as possible
    python bench/chat_burst.py --issue31             # data:null segments, text frames not UTF-8
    python bench/chat_burst.py --issue31 nulls       # data:null segments only

`yuiju bot` runs as a user runs it (its own process and data dir: the embedded Redis, SQLite and
vector store, the hashing embedder, the local OpenAI-compatible stub as the model, answering at
once) with the loop-lag monitor at 250 ms. A fake OneBot v11 implementation connects to the
reverse WebSocket, answers every API call as NapCat does, and sends the burst at ``--rate``
frames a second: in every eight, one garbage bytes, one broken JSON, one JSON list, one message
without its fields, one message with a field mangled (`faults.fuzz_frames`), and three well-formed
group messages (one in twenty a mention). After the burst: a mention in the burst's group and one
in a quiet group. Then the bot is stopped and the message log (SQLite) is read. By default the
burst floods its group (``[chat] group_messages_per_minute``): everything is recorded and nothing
answered there until it calms down; ``--answer-all`` raises that and the rate limits, so every
mention in the burst asks for an answer and the answer queue (``max_concurrent_answers``,
``max_waiting_answers``) decides.

Printed: the well-formed messages sent and how many the message log lacks, the two mentions
(recorded, answered), event-loop stalls over 1 s, "not handled" lines, answers given up (the log
line), tracebacks, whether the bot closed the connection, the log's size. Exit status 1 when a
message is lost, the connection closed, or the quiet group's mention is not answered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
import signal
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from faults import GROUP, TOKEN, FakeOneBot, free_port, fuzz_frames  # noqa: E402

from tests.frame_fuzz import not_utf8, with_nulls  # noqa: E402
from tests.openai_stub import OpenAIStub, StubAnswer, schema_following  # noqa: E402

QUIET_GROUP = 654321
ANSWERS = {"这边安静": "安静的群你好", "刷屏结束": "刷屏之后我在"}
"""The stub's answer to each of the two mentions after the burst (to anything else: 在的～)."""


def write_config(
    path: Path, data: Path, stub_url: str, port: int, *, memory: bool, answer_all: bool
) -> None:
    limits = (
        "user_messages_per_minute = 100000\ngroup_replies_per_minute = 100000\n"
        "group_messages_per_minute = 100000\n"
        if answer_all
        else ""
    )
    path.write_text(
        f"""
[app]
data_dir = "{data.as_posix()}"
loop_lag_warn_ms = 250
[llm]
base_url = "{stub_url}"
model = "stub"
[embeddings]
provider = "hashing"
[memory]
enabled = {str(memory).lower()}
[onebot]
enabled = true
port = {port}
access_token = "{TOKEN}"
[chat]
max_pause_seconds = 0
{limits}[chat.groups.{GROUP}]
reply = "mention"
[chat.groups.{QUIET_GROUP}]
reply = "mention"
""",
        encoding="utf-8",
    )


def burst(
    rng: random.Random, qq: FakeOneBot, n: int, *, issue31: str | None = None
) -> tuple[list[str | bytes], list[str]]:
    """The frames, and the message ids of the well-formed messages among them. ``issue31``
    ("nulls" or "all"): the well-formed messages carry ``data: null`` segments (one in three
    without a field nobody reads: `frame_fuzz.with_nulls`); "all": and the garbage bytes are text
    frames of a message that is not UTF-8 (`frame_fuzz.not_utf8`: bytes in a text frame)."""
    fuzz = iter(fuzz_frames(rng, n))
    frames: list[str | bytes] = []
    ids: list[str] = []
    for i in range(n):
        if i % 8 == 0 and issue31 == "all":
            frames.append(not_utf8(qq.event(f"坏字节 {i}", mention=False), rng))
            next(fuzz)
            continue
        if i % 8 < 5:
            frames.append(next(fuzz))
            continue
        event = qq.event(f"刷屏 {i}", user=30_000 + i % 50, mention=i % 20 == 5)
        frames.append(json.dumps(with_nulls(event, rng) if issue31 else event))
        ids.append(str(event["message_id"]))
    return frames, ids


def logged_ids(data: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(data / "history.sqlite3")) as db:
        return {str(json.loads(r[0]).get("id")) for r in db.execute("SELECT _doc FROM chat_log")}


async def main(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="chat-burst-"))
    work.mkdir(parents=True, exist_ok=True)
    data, config, log_path = work / "data", work / "yuiju.toml", work / "bot.log"
    port = free_port()

    structured = schema_following(args.seed)
    """Summaries and person profiles, answered as a model would (not a chat line)."""

    def answer(body: dict[str, Any]) -> StubAnswer:
        if body.get("response_format"):
            return structured(body)
        asked = str(body["messages"][-1].get("content", ""))
        return next((said for cue, said in ANSWERS.items() if cue in asked), "在的～")

    with OpenAIStub(handler=answer) as stub:
        write_config(
            config, data, stub.base_url, port, memory=args.memory, answer_all=args.answer_all
        )
        with log_path.open("wb") as log_file:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "yuiju.cli",
                "--config",
                str(config),
                "bot",
                cwd=ROOT,
                stdout=log_file,
                stderr=log_file,
            )
        qq = FakeOneBot()
        try:
            await qq.connect(port)
            frames, ids = burst(rng, qq, args.frames, issue31=args.issue31)
            started = time.monotonic()
            for i, frame in enumerate(frames):
                as_text = True if args.issue31 == "all" and i % 8 == 0 else None
                if not await qq.raw(frame, text=as_text):
                    print("the burst closed the OneBot connection", file=sys.stderr)
                    return 1
                if args.rate:
                    ahead = started + (i + 1) / args.rate - time.monotonic()
                    if ahead > 0:
                        await asyncio.sleep(ahead)
            burst_s = time.monotonic() - started
            after = qq.event("刷屏结束了，还在吗", user=20_002)
            quiet = qq.event("这边安静，在吗", user=20_003, group_id=QUIET_GROUP)
            await qq.raw(json.dumps(after))
            await qq.raw(json.dumps(quiet))
            deadline = time.monotonic() + args.wait
            while ANSWERS["这边安静"] not in qq.sent and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
            answered_after_s = time.monotonic() - started - burst_s
            await asyncio.sleep(2.0)  # the message log writes behind the replies
            closed_by_bot = qq.ws.close_code is not None
        finally:
            await qq.close()
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), 30)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
    log = log_path.read_text(errors="replace")
    logged = logged_ids(data)
    stalls = [int(m) for m in re.findall(r"event loop stalled for (\d+) ms", log)]
    not_handled = re.findall(r"not handled[^\n]*", log)
    more = sum(int(m) for m in re.findall(r"and (\d+) more like it not logged", log))
    shed = re.findall(r"\d+ answers? given up[^\n]*", log)
    result: dict[str, Any] = {
        "frames": len(frames),
        "rate_per_s": args.rate or "as fast as the socket takes them",
        "burst_seconds": round(burst_s, 1),
        "well_formed_messages": len(ids),
        "lost_from_message_log": len(set(ids) - logged),
        "after_burst_mention": {
            "recorded": str(after["message_id"]) in logged,
            "answered": ANSWERS["刷屏结束"] in qq.sent,
        },
        "quiet_group_mention": {
            "recorded": str(quiet["message_id"]) in logged,
            "answered": ANSWERS["这边安静"] in qq.sent,
            "seconds_after_the_burst": round(answered_after_s, 1),
        },
        "stalls_over_1s": sum(1 for s in stalls if s > 1000),
        "worst_stall_ms": max(stalls, default=0),
        "not_handled_lines": len(not_handled) + (more if not_handled else 0),
        "answers_shed_lines": shed[:3],
        "tracebacks": log.count("Traceback (most recent call last)"),
        "connection_closes": int(closed_by_bot),
        "log_kib": round(len(log.encode()) / 1024),
        "replies_sent": len(qq.sent),
        "work_dir": str(work),
    }
    print(json.dumps(result, ensure_ascii=False, indent=1))
    lost = result["lost_from_message_log"] or not result["after_burst_mention"]["recorded"]
    return 1 if lost or closed_by_bot or not result["quiet_group_mention"]["answered"] else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=200.0, help="frames a second; 0: no pause")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--wait", type=float, default=120.0, help="seconds to wait for replies")
    parser.add_argument("--no-memory", dest="memory", action="store_false")
    parser.add_argument(
        "--answer-all",
        action="store_true",
        help="rate limits and the flood rule raised: every mention in the burst is answered "
        "(or given up when too many wait)",
    )
    parser.add_argument(
        "--issue31",
        nargs="?",
        const="all",
        choices=["all", "nulls"],
        help="data:null segments in the well-formed messages (some without a field nobody "
        "reads); 'all' (the default): and text frames that are not UTF-8 in place of the "
        "garbage bytes",
    )
    parser.add_argument("--keep", help="work directory to keep (default: a new temp dir)")
    sys.exit(asyncio.run(main(parser.parse_args())))
