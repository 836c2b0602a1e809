"""Held-out style: import two people's chat lines, export one, forget one; afterwards export and
search find nothing of them, no file under the data dir holds their words, the other is kept."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from yuiju import cli as yuiju_cli

MING_WORDS = ("海盐柠檬汽水配方", "土豆是我的橘猫", "我其实很怕深水区")
HONG_WORDS = ("大提琴考级在周六", "下雨天的图书馆最好")


def holding(root: Path, text: str) -> list[str]:
    found = subprocess.run(
        ["grep", "-rlaF", text, str(root)], capture_output=True, text=True, check=False
    )
    return [f for f in found.stdout.split() if not f.endswith(".log")]


async def chatted(data: Path, redis_url: str | None, tmp_path: Path) -> None:
    """Her chat side's Redis keys of a group chat with both (recent lines, rolling summary)."""
    from yuiju.storage.keys import Keys
    from yuiju.storage.redis import open_redis

    keys = Keys(f"e2e-{tmp_path.name}" if redis_url else "yuiju")
    handle = await open_redis(redis_url, data)
    try:
        sid = "group:qq:5000"
        await handle.client.sadd(keys.chat_sessions("yuiju"), sid)
        for user, name, text in (
            ("qq:777", "小明", MING_WORDS[1]),
            ("qq:888", "小红", HONG_WORDS[1]),
        ):
            line = {"user_id": user, "sender_name": name, "text": text}
            await handle.client.rpush(
                keys.chat_recent("yuiju", sid), json.dumps(line, ensure_ascii=False)
            )
        await handle.client.set(
            keys.chat_summary("yuiju", sid), f"小明说{MING_WORDS[2]}。小红说{HONG_WORDS[1]}。"
        )
        # her state: the world ran, she knows him and was told his news
        from tests.conftest import at_time, make_character, make_world
        from yuiju.world.relations import NewsItem, Party, Relation, SocialState, news_id

        now = at_time("2026-03-06 09:00")
        ming = Party(kind="person", id="qq:777", name="小明")
        social = SocialState(
            relations={ming.key: Relation(party=ming, closeness=30)},
            news=[
                NewsItem(
                    id=news_id(ming, MING_WORDS[2]),
                    text=MING_WORDS[2],
                    origin=ming,
                    source=ming,
                    learned_at=now,
                )
            ],
        )
        await handle.client.set(keys.world, make_world(now).model_dump_json())
        await handle.client.set(
            keys.character("yuiju"), make_character(social=social).model_dump_json()
        )
    finally:
        await handle.aclose()


def config_for(tmp_path: Path, redis_url: str | None) -> str:
    redis = f'[redis]\nurl = "{redis_url}"\nprefix = "e2e-{tmp_path.name}"\n' if redis_url else ""
    config = tmp_path / "yuiju.toml"
    config.write_text(
        f'[app]\ndata_dir = "{(tmp_path / "data").as_posix()}"\n{redis}'
        '[embeddings]\nprovider = "hashing"\n',
        encoding="utf-8",
    )
    return str(config)


@pytest.mark.slow
@pytest.mark.parametrize("redis_kind", ["embedded", "server"])
def test_forget_a_person_from_the_command_line_leaves_no_trace(
    tmp_path: Path, redis_url: str, redis_kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_for(tmp_path, None if redis_kind == "embedded" else redis_url)
    rows = [
        {
            "time": f"2026-03-05T20:{10 + i}:00+08:00",
            "user_id": user,
            "text": text,
            "nickname": name,
            **({"group_id": "qq:5000"} if i % 2 else {}),
        }
        for i, (user, name, text) in enumerate(
            [("qq:777", "小明", w) for w in MING_WORDS]
            + [("qq:888", "小红", w) for w in HONG_WORDS]
        )
    ]
    log = tmp_path / "chat.jsonl"
    log.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    run = lambda *argv: yuiju_cli.main(["--config", config, "memory", *argv])  # noqa: E731
    assert run("import", str(log), "--quiet") == 0

    asyncio.run(
        chatted(tmp_path / "data", None if redis_kind == "embedded" else redis_url, tmp_path)
    )

    out = tmp_path / "ming.json"
    assert run("export", "--user", "qq:777", "--out", str(out)) == 0
    exported = json.loads(out.read_text(encoding="utf-8"))
    text = json.dumps(exported, ensure_ascii=False)
    assert all(w in text for w in MING_WORDS) and not any(w in text for w in HONG_WORDS)
    assert {i["store"] for i in exported["items"]} == {"history", "vectors", "redis", "state"}
    out.unlink()  # the export itself is a copy of his words, outside the data dir
    assert run("export", "--group", "qq:5000") == 0  # a group: what was said there, by anyone
    group = capsys.readouterr().out
    assert MING_WORDS[1] in group and HONG_WORDS[0] in group and MING_WORDS[0] not in group
    data = tmp_path / "data"
    assert holding(data, MING_WORDS[0])

    assert run("forget", "--user", "qq:777") != 0  # no --yes: nothing happens
    assert holding(data, MING_WORDS[0])
    capsys.readouterr()
    assert run("forget", "--user", "qq:777", "--yes") == 0
    said = capsys.readouterr().out
    # 3 points of his lines, 1 of hers read with his (indexed again alone)
    assert "history.chat_memories: 3" in said and "vectors.points: 4" in said

    assert "state.relations: 1" in said and "state.news: 1" in said
    assert run("export", "--user", "qq:777") == 0
    assert json.loads(capsys.readouterr().out)["items"] == []
    for word in MING_WORDS:
        assert run("search", word) == 0
        assert word not in capsys.readouterr().out.replace(f"match {word!r}", "")
        assert holding(data, word) == [], word
    for word in HONG_WORDS:  # hers, the line read with his among them (indexed again)
        assert run("search", word) == 0
        assert f"] {word}" in capsys.readouterr().out
    assert run("export", "--user", "qq:888") == 0
    hers = capsys.readouterr().out
    assert all(w in hers for w in HONG_WORDS), hers[:3000]
    assert run("audit") == 0
    [entry] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert entry["action"] == "forget_user" and entry["requested_by"] == "admin:cli"
    assert "777" not in json.dumps(entry)
