"""Fingerprints of simulated lives, to show a refactoring left them byte-identical.

Runs `yuiju simulate`'s function for a few scenarios (one character with the utility policy for
two seeds, three characters meeting, one character on a schema-following fake model), each on
stores of its own under a temporary data dir, and prints one sha256 per scenario over the report
(timing fields left out) and every document the history store holds (episodes, diaries, ...),
sorted by table and id. ``--dump DIR`` also writes each scenario's JSON there, to diff two runs.

    python bench/life_digest.py                 # prints {scenario: sha256}
    python bench/life_digest.py --dump /tmp/a   # and the documents they hash, for `diff -r`

Run it with ``PYTHONPATH=<a checkout>/src`` to fingerprint another checkout (main, a branch).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

from yuiju.config import YuijuConfig, load_config
from yuiju.llm.testing import FunctionChatModel, schema_following
from yuiju.world.simulate import simulate

XIAOLIN = {"kind": "person", "id": "qq:123", "name": "小林"}
COMMANDS = [
    {"type": "tell_news", "character_id": "yuiju", "by": XIAOLIN, "text": "小林下周要搬家"},
    {"type": "give_item", "character_id": "kaede", "by": XIAOLIN, "item": "铜锣烧"},
    {
        "type": "invite",
        "character_id": "yuiju",
        "by": XIAOLIN,
        "place": "park",
        "start": "2026-09-02T17:00:00+08:00",
        "activity": "一起散步",
        "lenient": True,
    },
    {
        "type": "remind",
        "character_id": "chika",
        "by": XIAOLIN,
        "kind": "promise",
        "text": "去图书馆还书",
        "at": "2026-09-02T17:00:00+08:00",
        "place": "library",
        "lenient": True,
    },
]
"""What people tell them in chat (news, a gift, an invitation, a promise): their episodes."""

TIMING = ("wall_seconds", "decisions_per_second", "engine_overhead_ms")
"""Report fields that measure the machine, not the life."""


def scenarios() -> dict[str, dict[str, Any]]:
    solo = load_config(environ={})
    three = load_config(
        environ={}, overrides={"world": {"characters": ["yuiju", "kaede", "chika"]}}
    )
    return {
        "solo-seed0-3d": {"cfg": solo, "days": 3, "seed": 0},
        "solo-seed7-3d": {"cfg": solo, "days": 3, "seed": 7},
        "three-seed1-4d": {"cfg": three, "days": 4, "seed": 1},
        "three-seed2-7d": {"cfg": three, "days": 7, "seed": 2},
        "three-told-seed1-3d": {"cfg": three, "days": 3, "seed": 1, "commands": COMMANDS},
        "llm-fake-seed1-1d": {"cfg": solo, "days": 1, "seed": 1, "policy": "llm", "fake": True},
    }


def history_documents(data_dir: Path) -> dict[str, list[Any]]:
    """Every document of the embedded history store, by table, sorted by id."""
    db = sqlite3.connect(data_dir / "history.sqlite3")
    try:
        tables = [
            name
            for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith(("sqlite_", "_"))
        ]
        return {
            table: [
                json.loads(doc) for (doc,) in db.execute(f"SELECT _doc FROM {table} ORDER BY _id")
            ]
            for table in sorted(tables)
            if table != "llm_calls"  # wall-clock latencies
        }
    finally:
        db.close()


async def run(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    cfg: YuijuConfig = spec["cfg"]
    with tempfile.TemporaryDirectory(prefix=f"life-{name}-") as tmp:
        report = await simulate(
            cfg,
            days=spec["days"],
            seed=spec["seed"],
            policy=spec.get("policy", "utility"),
            data_dir=Path(tmp),
            chat_model=FunctionChatModel(schema_following(seed=1)) if spec.get("fake") else None,
            progress=False,
            commands=spec.get("commands", ()),
        )
        documents = history_documents(Path(tmp))
    return {"report": {k: v for k, v in report.items() if k not in TIMING}, "history": documents}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=Path, help="write each scenario's documents here")
    parser.add_argument("only", nargs="*", help="scenario names (default: all)")
    args = parser.parse_args()
    digests = {}
    for name, spec in scenarios().items():
        if args.only and name not in args.only:
            continue
        life = await run(name, spec)
        text = json.dumps(life, ensure_ascii=False, indent=1, sort_keys=True)
        digests[name] = hashlib.sha256(text.encode()).hexdigest()
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            (args.dump / f"{name}.json").write_text(text, encoding="utf-8")
        print(f"{name}: {digests[name]}", file=sys.stderr)
    print(json.dumps(digests, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
