"""`yuiju chat` as a newcomer meets it, as a process: a piped line answered by a model over real
HTTP (the OpenAI-compatible stub), the message without a model, the end of the input, a terminal
(a pty) with Ctrl-D and Ctrl-C, and the conversation going through a running `yuiju world`,
which holds the embedded memory store (and serves the web chat)."""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import httpx
import pytest
import redis as sync_redis

from tests.openai_stub import OpenAIStub
from tests.processes import stop_embedded_redis
from tests.test_web import free_port
from yuiju.storage.keys import Keys

ROOT = Path(__file__).parents[1]
USER = getpass.getuser()

pytestmark = pytest.mark.usefixtures("clean_config_env")


def write_config(tmp_path: Path, *, llm: str | None = None, redis_url: str | None = None) -> Path:
    """Stores under tmp_path (the embedded memory store too), offline hashing embeddings, her
    lines at once; ``llm``: the model's base URL (decisions stay with the utility policy)."""
    lines = [
        "[app]",
        f'data_dir = "{(tmp_path / "data").as_posix()}"',
        "[embeddings]",
        'provider = "hashing"',
        "[world]",
        'policy = "utility"',
        "[chat]",
        "max_pause_seconds = 0",
    ]
    if redis_url:
        lines += ["[redis]", f'url = "{redis_url}"', f'prefix = "chat-{tmp_path.name}"']
    if llm:
        lines += ["[llm]", f'base_url = "{llm}"', 'api_key = "sk-test"', "max_attempts = 1"]
    path = tmp_path / "yuiju.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def env_for(config: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("YUIJU_")}
    env.pop("REDIS_URL", None)
    return {**env, "YUIJU_CONFIG": str(config), **extra}


def chat(config: Path, stdin: str, *, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yuiju.cli", "chat"],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env_for(config),
        timeout=timeout,
        check=False,
    )


def stop_daemon(daemon: subprocess.Popen[bytes], data_dir: Path) -> None:
    """Stop a daemon a test started, whatever state the test left it in: Ctrl-C first (it stops
    its embedded Redis on the way out), SIGKILL if that does not end it, and then the embedded
    redis-server that a killed daemon leaves behind (it is a daemonised process of its own)."""
    if daemon.poll() is None:
        daemon.send_signal(signal.SIGINT)
        try:
            daemon.wait(30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    for stream in (daemon.stdout, daemon.stderr):
        if stream is not None:
            stream.close()
    stop_embedded_redis(data_dir)


def said_to_her(stub: OpenAIStub) -> list[str]:
    """The last user message of every chat request the stub got."""
    return [
        next(m["content"] for m in reversed(r["messages"]) if m["role"] == "user")
        for r in stub.requests
    ]


def test_a_piped_line_gets_her_answer_and_the_chat_ends_with_the_input(
    tmp_path: Path, openai_stub: OpenAIStub, redis_url: str
) -> None:
    openai_stub.reply("你好呀！很高兴认识你。", "嗯嗯，晚安～")
    config = write_config(tmp_path, llm=openai_stub.base_url, redis_url=redis_url)
    done = chat(config, "你好\n\n晚安\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["你好呀！很高兴认识你。", "嗯嗯，晚安～"]
    asked = said_to_her(openai_stub)
    assert len(asked) == 2 and "你好" in asked[0] and "晚安" in asked[1]  # the blank line: nothing
    assert f'id="term:{USER}"' in asked[0]  # she knows who is talking: the OS user
    # her session has the conversation, where the daemon's chat would find it
    client = sync_redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        keys = Keys(f"chat-{tmp_path.name}")
        recent = client.lrange(keys.chat_recent("yuiju", f"private:term:{USER}"), 0, -1)
    finally:
        client.close()
    assert [json.loads(r)["text"] for r in recent] == [
        "你好",
        "你好呀！很高兴认识你。",
        "晚安",
        "嗯嗯，晚安～",
    ]


def test_without_an_llm_it_says_why_and_how_to_fix_it_and_exits_1(
    tmp_path: Path, redis_url: str
) -> None:
    config = write_config(tmp_path, redis_url=redis_url)
    done = chat(config, "你好\n")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "[llm] base_url" in done.stderr and "YUIJU_LLM__BASE_URL" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("no chat model") == 1  # said once, not per line


def test_end_of_input_at_once_ends_the_chat(tmp_path: Path, openai_stub: OpenAIStub) -> None:
    config = write_config(tmp_path, llm=openai_stub.base_url)  # the embedded Redis, too
    done = chat(config, "")
    assert (done.returncode, done.stdout, openai_stub.requests) == (0, "", [])
    assert "Traceback" not in done.stderr


def test_a_failing_model_ends_a_pipe_with_1(tmp_path: Path, redis_url: str) -> None:
    from tests.openai_stub import StubError

    with OpenAIStub() as stub:
        stub.reply(*[StubError(500)] * 10)
        config = write_config(tmp_path, llm=stub.base_url, redis_url=redis_url)
        done = chat(config, "你好\n")
    assert done.returncode == 1
    assert done.stdout.strip() == "诶，我这边有点卡住了，等下再聊吧。"  # her one failure line


# -- at a terminal -------------------------------------------------------------------------------


class Terminal:
    """`yuiju chat` on a pseudo-terminal: what it prints, what is typed."""

    def __init__(self, config: Path) -> None:
        self.fd, child = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "yuiju.cli", "chat"],
            stdin=child,
            stdout=child,
            stderr=child,
            cwd=ROOT,
            env=env_for(config, TERM="dumb"),
            preexec_fn=self._controlling_terminal,  # Ctrl-C on it interrupts the process
        )
        os.close(child)
        self.seen = ""

    @staticmethod
    def _controlling_terminal() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    def read_until(self, text: str, wait_s: float = 60, *, times: int = 1) -> str:
        """What it printed once ``text`` is there (``times`` times)."""
        deadline = time.monotonic() + wait_s
        while self.seen.count(text) < times:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"never printed {text!r}; printed:\n{self.seen}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # the process ended
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"ended before printing {text!r}; printed:\n{self.seen}")
                self.seen += chunk.decode("utf-8", "replace")
        return self.seen

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait(self, wait_s: float = 30) -> int:
        code = self.proc.wait(wait_s)
        with contextlib.suppress(OSError):
            while chunk := os.read(self.fd, 4096):
                self.seen += chunk.decode("utf-8", "replace")
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.fd)


@pytest.mark.parametrize(("end", "key"), [("Ctrl-D", "\x04"), ("Ctrl-C", "\x03")])
def test_at_a_terminal_a_prompt_her_answer_and_a_clean_end(
    tmp_path: Path, openai_stub: OpenAIStub, redis_url: str, end: str, key: str
) -> None:
    openai_stub.reply("你好呀～")
    config = write_config(tmp_path, llm=openai_stub.base_url, redis_url=redis_url)
    term = Terminal(config)
    try:
        term.read_until("Ctrl-D 或 Ctrl-C 结束")
        term.read_until("你：")
        term.type("你好\n")
        term.read_until("悠酱：你好呀～")
        term.read_until("你：", wait_s=10, times=2)  # the next prompt, once she is done
        term.type(key)
        code = term.wait()
    finally:
        term.close()
    assert code == 0, term.seen
    assert "Traceback" not in term.seen and "KeyboardInterrupt" not in term.seen
    assert f"你是 term:{USER}" in term.seen


# -- next to a running daemon -----------------------------------------------------------------------


def test_with_the_daemon_running_she_chats_through_it_with_her_memory(
    tmp_path: Path, openai_stub: OpenAIStub
) -> None:
    """`yuiju world` on the embedded stores holds the memory store; `yuiju chat` then talks to
    the daemon's chat (no "without her memory" note), and the web chat answers on its page."""
    openai_stub.answer_by_line(
        {"你在干嘛": "嗯嗯，我在呢。", "网页能聊天吗": "网页上也能聊呀！", "还记得吗": "记得呀～"}
    )
    config = write_config(tmp_path, llm=openai_stub.base_url)
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
        line = daemon.stdout.readline().decode()  # printed once the page (and the chat) serve
        assert f"http://127.0.0.1:{port}/" in line and "web chat: on" in line, line
        assert (tmp_path / "data" / "chat.sock").exists()
        done = chat(config, "你在干嘛\n")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "嗯嗯，我在呢。"
        assert "without her memory" not in done.stderr  # the daemon's chat, with its memory
        web = httpx.post(
            f"http://127.0.0.1:{port}/chat/send",
            json={"name": "小明", "text": "网页能聊天吗"},
            timeout=30,
        )
        assert web.status_code == 200 and web.json()["replies"] == ["网页上也能聊呀！"]
        daemon.send_signal(signal.SIGINT)
        assert daemon.wait(30) == 0
        assert not (tmp_path / "data" / "chat.sock").exists()  # the daemon took its socket along
        # the daemon gone, `yuiju chat` opens the stores itself and finds the conversation
        again = chat(config, "还记得吗\n")
    finally:
        stop_daemon(daemon, tmp_path / "data")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "记得呀～"
    last = openai_stub.requests[-1]["messages"]
    assert any("你在干嘛" in str(m.get("content")) for m in last)  # her context: the same session


def test_a_socket_left_by_a_dead_daemon_is_not_in_the_way(
    tmp_path: Path, openai_stub: OpenAIStub, redis_url: str
) -> None:
    import socket as socketlib

    openai_stub.reply("在的～")
    config = write_config(tmp_path, llm=openai_stub.base_url, redis_url=redis_url)
    (tmp_path / "data").mkdir()
    dead = socketlib.socket(socketlib.AF_UNIX)
    dead.bind(str(tmp_path / "data" / "chat.sock"))
    dead.close()  # bound, never listening: what a killed daemon leaves
    done = chat(config, "在吗\n")
    assert (done.returncode, done.stdout.strip()) == (0, "在的～"), done.stderr


def test_a_chat_that_cannot_be_built_leaves_the_world_and_its_page_running(
    tmp_path: Path, redis_url: str
) -> None:
    config = write_config(tmp_path, redis_url=redis_url)
    config.write_text(
        config.read_text(encoding="utf-8").replace("[chat]\n", '[chat]\ncharacter_id = "nobody"\n'),
        encoding="utf-8",
    )
    port = free_port()
    daemon = subprocess.Popen(
        [sys.executable, "-m", "yuiju.cli", "world", "--no-panel"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env_for(config, YUIJU_WEB__PORT=str(port)),
    )
    try:
        assert daemon.stdout is not None
        line = daemon.stdout.readline().decode()
        assert f"http://127.0.0.1:{port}/" in line and "web chat" not in line, line
        page = httpx.get(f"http://127.0.0.1:{port}/", timeout=30)
        assert page.status_code == 200 and 'id="chat"' not in page.text
        daemon.send_signal(signal.SIGINT)
        assert daemon.wait(30) == 0
        assert daemon.stderr is not None
        log = daemon.stderr.read().decode()
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert "nobody" in log and "yuiju chat" in log  # what is off, and why
