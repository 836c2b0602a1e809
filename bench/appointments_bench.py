"""Benchmark appointments between characters: kept, missed, and missed although both were there.

    python bench/appointments_bench.py [--days 14] [--seeds 1 2 3 4 5 6] [--json out.json]

For each seed: `yuiju simulate` (the utility policy, no model) with 悠酱, 枫 and 千夏 for
``--days``, its stores kept in a temporary folder and read afterwards. Every appointment one
character made with another (an accepted invitation in a conversation episode) whose time is over
by the end is counted once:

- kept: a meeting recorded it as kept (``kept_appointment`` on a conversation episode), or
  both were there at once (a ``赴约`` plan episode);
- missed: a ``没能赴约`` plan episode on either side;
- both there but missed: missed, although the run's timeline shows both at the place at the same
  time within its window (from `EARLY_MINUTES` before the start to the end) — what issue 31
  item 10 says must not happen;
- wrong place in the record: a missed record whose "那时她在X" is not where the timeline has her
  at the appointment's start.

The bar (issue 31): every appointment where both were at the place in the window is kept.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from yuiju.config import load_config
from yuiju.memory.episodes import EpisodeRepo
from yuiju.world.relations import EARLY_MINUTES
from yuiju.world.runtime import open_stores
from yuiju.world.simulate import DEFAULT_START, simulate
from yuiju.world.town import HAURA

CHARACTERS = ["yuiju", "kaede", "chika"]

Span = tuple[datetime, datetime, str]
"""Where a character was from when to when (a move counts as being nowhere)."""


def spans_of(timeline: list[dict[str, Any]], moves: set[str]) -> dict[str, list[Span]]:
    out: dict[str, list[Span]] = {}
    for r in timeline:
        if r["id"] in moves:
            continue
        start, end = datetime.fromisoformat(r["start"]), datetime.fromisoformat(r["end"])
        out.setdefault(r["character"], []).append((start, end, r["place"]))
    return out


def together_there(a: list[Span], b: list[Span], place: str, lo: datetime, hi: datetime) -> bool:
    """Both at ``place`` at one moment within [lo, hi]."""
    for s1, e1, p1 in a:
        for s2, e2, p2 in b:
            if p1 == p2 == place and max(s1, s2, lo) <= min(e1, e2, hi):
                return True
    return False


def place_at(spans: list[Span], moment: datetime) -> str | None:
    for start, end, place in spans:
        if start <= moment < end:
            return place
    return None


async def one_seed(seed: int, days: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="yuiju-apt-") as tmp:
        cfg = load_config(
            environ={},
            overrides={
                "app": {"data_dir": tmp, "log_level": "WARNING"},
                "world": {"characters": CHARACTERS},
            },
        )
        wall = time.perf_counter()
        report = await simulate(cfg, days=days, seed=seed, data_dir=Path(tmp), progress=False)
        wall = time.perf_counter() - wall
        begin = datetime.fromisoformat(DEFAULT_START).replace(tzinfo=cfg.app.tz)
        end = begin + timedelta(days=days)
        redis, history = await open_stores(cfg)
        try:
            repo = EpisodeRepo(history)
            await repo.ensure()
            episodes = {
                cid: await repo.between(cid, begin, end + timedelta(days=1)) for cid in CHARACTERS
            }
        finally:
            await history.close()
            await redis.aclose()
    moves = {a for a in report["action_histogram"] if a.startswith("move_")}
    spans = spans_of(report["timeline"], moves)
    made: dict[str, dict[str, Any]] = {}
    kept: set[str] = set()
    there: set[str] = set()
    missed: dict[str, list[str]] = {}
    for cid, found in episodes.items():
        for e in found:
            if (talk := e.conversation()) is not None:
                invitation = talk.invitation
                if invitation and talk.declined is None and talk.initiator == cid:
                    made[str(invitation["id"])] = invitation
                if talk.kept_appointment:
                    kept.add(talk.kept_appointment)
            if (plan := e.plan()) is not None and plan.appointment is not None:
                aid = str(plan.appointment["id"])
                if plan.status == "missed":
                    missed.setdefault(aid, []).append(f"{cid}: {e.summary}")
                elif plan.status == "kept":
                    there.add(aid)  # both there at once, without a meeting
    rows = []
    for aid, apt in made.items():
        start = datetime.fromisoformat(apt["start"])
        finish = start + timedelta(minutes=apt["minutes"])
        if finish > end:
            continue  # still ahead when the run ends
        inviter, invitee = apt["asked_by"]["id"], apt["other"]["id"]
        both = together_there(
            spans.get(inviter, []),
            spans.get(invitee, []),
            apt["place"],
            start - timedelta(minutes=EARLY_MINUTES),
            finish,
        )
        wrong_place = []
        for line in missed.get(aid, []):
            cid = line.split(":", 1)[0]
            was = place_at(spans.get(cid, []), start)
            said = line.rpartition("那时她在")[2]
            if was is not None and said != HAURA.place_name(was):
                wrong_place.append(f"{line} (at {start:%H:%M} she was at {HAURA.place_name(was)})")
        rows.append(
            {
                "id": aid,
                "start": start.isoformat(timespec="minutes"),
                "place": apt["place"],
                "who": f"{inviter}→{invitee}",
                "kept": aid in kept or aid in there,
                "kept_by_being_there": aid in there and aid not in kept,
                "missed": aid in missed,
                "both_there": both,
                "records": missed.get(aid, []),
                "wrong_place": wrong_place,
            }
        )
    due = len(rows)
    return {
        "seed": seed,
        "due": due,
        "kept": sum(r["kept"] for r in rows),
        "kept_by_being_there": sum(r["kept_by_being_there"] for r in rows),
        "missed": sum(r["missed"] for r in rows),
        "both_there_but_missed": sum(r["missed"] and r["both_there"] for r in rows),
        "wrong_place_records": sum(len(r["wrong_place"]) for r in rows),
        "invariant_violations": len(report["invariant_violations"]),
        "wall_seconds": round(wall, 1),
        "appointments": rows,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6])
    parser.add_argument("--json", help="write every appointment here")
    args = parser.parse_args()
    results = []
    print("seed  due  kept (there)  missed  both-there-but-missed  wrong-place  violations  wall s")
    for seed in args.seeds:
        r = await one_seed(seed, args.days)
        results.append(r)
        print(
            f"{seed:>4}  {r['due']:>3}  {r['kept']:>4} ({r['kept_by_being_there']:>3})  "
            f"{r['missed']:>6}  "
            f"{r['both_there_but_missed']:>21}  {r['wrong_place_records']:>11}  "
            f"{r['invariant_violations']:>10}  {r['wall_seconds']:>6}"
        )
        for row in r["appointments"]:
            if row["missed"]:
                print(f"      missed {row['who']} {row['place']} {row['start']}: {row['records']}")
    total = {
        k: sum(r[k] for r in results) for k in ("due", "kept", "kept_by_being_there", "missed")
    }
    both = sum(r["both_there_but_missed"] for r in results)
    wrong = sum(r["wrong_place_records"] for r in results)
    print(
        f"all   {total['due']:>3}  {total['kept']:>4} ({total['kept_by_being_there']:>3})  "
        f"{total['missed']:>6}  {both:>21}  "
        f"{wrong:>11}"
    )
    if args.json:
        text = json.dumps(results, ensure_ascii=False, indent=1)
        await asyncio.to_thread(Path(args.json).write_text, text, encoding="utf-8")


if __name__ == "__main__":
    asyncio.run(main())
