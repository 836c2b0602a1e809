"""Held-out style, with the daemon running: she is asked in chat (`yuiju chat` through `yuiju
world`) what she keeps and to forget it; the world and its memory worker erase it; afterwards
export and search find nothing of them and no file under the data dir holds their words."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.openai_stub import OpenAIStub
from tests.test_chat_cli import ROOT, USER, chat, env_for, write_config
from tests.test_memory_forget_e2e import holding
from tests.test_web import free_port

MINE = ("我家的乌龟叫慢慢", "周三要去考潜水证")
HERS = ("大提琴考级在周六",)
THIRD = "第三个人的秘密暗号是蓝鲸"


def cli(config: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yuiju.cli", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env_for(config),
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_forget_asked_in_chat_with_the_daemon_running_leaves_no_trace(
    tmp_path: Path, openai_stub: OpenAIStub
) -> None:
    config = write_config(tmp_path, llm=openai_stub.base_url)
    me = f"term:{USER}"
    rows = [
        {"time": f"2026-03-05T20:1{i}:00+08:00", "user_id": who, "text": text, "nickname": who}
        for i, (who, text) in enumerate(
            [(me, MINE[0]), (me, MINE[1]), ("qq:888", HERS[0]), ("qq:999", THIRD)]
        )
    ]
    log = tmp_path / "chat.jsonl"
    log.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    assert cli(config, "memory", "import", str(log), "--quiet").returncode == 0
    data = tmp_path / "data"
    assert holding(data, MINE[0])

    port = free_port()
    daemon = subprocess.Popen(
        [sys.executable, "-m", "yuiju.cli", "world", "--no-panel"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env_for(config, YUIJU_WEB__PORT=str(port), YUIJU_WORLD__SPEED="60"),
    )
    try:
        assert daemon.stdout is not None
        line = daemon.stdout.readline().decode()
        assert "web chat: on" in line, line
        seen = chat(config, "/memory me\n")
        assert seen.returncode == 0, seen.stderr
        assert "你说过的话 2 条" in seen.stdout, seen.stdout
        asked = chat(config, "/memory forget\n")
        code = re.search(r"/memory forget confirm (\d{4})", asked.stdout)
        assert code is not None, asked.stdout + asked.stderr
        done = chat(config, f"/memory forget confirm {code.group(1)}\n")
        assert "忘掉" in done.stdout, done.stdout + done.stderr
        deadline = time.monotonic() + 90  # the world's next tick, then the memory worker
        while not (audit := cli(config, "memory", "audit").stdout.strip()):
            assert time.monotonic() < deadline, "no audit entry"
            time.sleep(0.3)
        entry = json.loads(audit.splitlines()[0])
        assert entry["action"] == "forget_user" and entry["requested_by"] == me
        assert entry["counts"]["history.chat_memories"] == 2
        # an admin at the command line, the daemon running: through its world and memory worker
        forgot = cli(config, "memory", "forget", "--user", "qq:999", "--yes", "--wait", "90")
        assert forgot.returncode == 0, forgot.stderr
        assert "history.chat_memories: 1" in forgot.stdout, forgot.stdout
        daemon.send_signal(signal.SIGINT)
        assert daemon.wait(30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    for word in (*MINE, THIRD):
        assert holding(data, word) == [], word
        found = cli(config, "memory", "search", word).stdout
        assert word not in found.replace(f"match {word!r}", ""), found
    exported = cli(config, "memory", "export", "--user", me)
    assert json.loads(exported.stdout)["items"] == [], exported.stderr
    assert HERS[0] in cli(config, "memory", "export", "--user", "qq:888").stdout
