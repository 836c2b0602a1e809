"""How long exporting and forgetting one person takes on a populated embedded store (issue 32).

    python bench/forget_bench.py [--people 50] [--lines 20000] [--episodes 20000]

Builds, under a temporary data dir, SQLite history + the qdrant-edge vector store (hashing
embedder) holding ``--lines`` chat lines of ``--people`` people (their chat memories, their
message-log records, a fact and a profile each) and ``--episodes`` behavior episodes of her day,
then times `Governance.export` and `Governance.forget` of one person (no Redis: the stores that
grow). Prints the figures as JSON, with the files' size before and after and whether any file
still holds one of that person's lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from yuiju.memory.distill import FACTS, ChatLine, ChatMemories
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.episodes import Episode, EpisodeRepo
from yuiju.memory.governance import Governance, GovernanceDeps, Subject
from yuiju.memory.messagelog import CHAT_LOG
from yuiju.memory.persons import PersonRepo
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.vectors import EdgeVectorStore
from yuiju.storage.keys import Keys
from yuiju.storage.sqlite_history import SqliteHistory

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def size(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def holding(root: Path, text: str) -> bool:
    found = subprocess.run(["grep", "-rlaF", text, str(root)], capture_output=True, check=False)
    return bool(found.stdout.strip())


async def main(people: int, lines: int, episodes: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        history = SqliteHistory.open(data / "history.sqlite3")
        store = EdgeVectorStore.open(data / "qdrant-edge" / "m", 256)
        semantic = SemanticMemory(store, HashingEmbedder(256))
        chat = ChatMemories(history, semantic, "yuiju", context_minutes=60)
        await chat.ensure()
        await history.ensure(FACTS, CHAT_LOG)
        persons = PersonRepo(history, "yuiju")
        await persons.ensure()
        said = [
            ChatLine(
                user_id=f"qq:{1000 + n % people}",
                text=f"第{n}句话，来自{n % people}号：今天的事情{n * 7919 % 100003}",
                time=T0 + timedelta(minutes=n),
                group_id="qq:5000" if n % 3 else "",
                nickname=f"网友{n % people}",
            )
            for n in range(lines)
        ]
        for i in range(0, lines, 1000):
            await chat.add_many(said[i : i + 1000])
        await history.put_many(
            CHAT_LOG.name,
            [
                {
                    "_id": f"log{n}",
                    "id": str(n),
                    "character_id": "yuiju",
                    "session_id": "group:qq:5000",
                    "user_id": line.user_id,
                    "sender_name": line.nickname,
                    "text": line.text,
                    "time": line.time,
                }
                for n, line in enumerate(said)
            ],
        )
        for p in range(people):
            await persons.correct("qq", str(1000 + p), "喜好", f"{p}号喜欢猫", T0)
            await history.put(
                FACTS.name,
                {
                    "_id": f"fact_{p}",
                    "character_id": "yuiju",
                    "user_id": f"qq:{1000 + p}",
                    "content": f"{p}号养了猫",
                    "importance": 0.5,
                    "time": T0,
                    "indexed": False,
                },
            )
        repo = EpisodeRepo(history)
        await repo.ensure()
        await history.put_many(
            "episodes",
            [
                Episode.model_validate(
                    {
                        "_id": f"beh_{n}",
                        "character_id": "yuiju",
                        "type": "behavior",
                        "time": T0 + timedelta(minutes=3 * n),
                        "summary": f"在公园散步了{n % 60}分钟",
                    }
                ).document()
                for n in range(episodes)
            ],
        )
        await history.compact()
        before = size(data)
        gov = Governance(
            GovernanceDeps(
                history=history,
                semantic=semantic,
                redis=None,
                keys=Keys("bench"),
                character_ids=["yuiju"],
            )
        )
        subject = Subject(kind="user", id="qq:1000", ids=("qq:1000", "1000"))
        started = time.perf_counter()
        items = await gov.export(subject)
        export_s = time.perf_counter() - started
        started = time.perf_counter()
        counts = await gov.forget(subject, requested_by="bench", now=T0 + timedelta(days=400))
        forget_s = time.perf_counter() - started
        after = size(data)
        left = holding(data, said[0].text)
        await store.close()
        await history.close()
        return {
            "people": people,
            "chat_lines": lines,
            "behavior_episodes": episodes,
            "exported_items": len(items),
            "export_s": round(export_s, 2),
            "forget_s": round(forget_s, 2),
            "forgotten": counts,
            "data_dir_mib_before": round(before / 2**20, 1),
            "data_dir_mib_after": round(after / 2**20, 1),
            "a_file_still_holds_a_forgotten_line": left,
        }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=50)
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--episodes", type=int, default=20_000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.people, args.lines, args.episodes)), ensure_ascii=False))
