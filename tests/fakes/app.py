"""A real NoneBot app in a subprocess, its adapter pointed at a fake: ``nonebot.run`` on loopback.

    async with SatoriFake() as fake, NoneBotApp(tmp_path, fake, ECHO_PLUGIN) as app:
        await fake.wait_connected()
        ...
    app.log()  # what the bot logged, for assertion messages

The bot script is generic: ``nonebot.init(**fake.nonebot_config(), ...)``, the fake's adapter
registered, the plugin source (a string) loaded from a file beside it. Extra ``env`` reaches the
bot's process (an OpenAI stub's URL, a Redis URL, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from tests.fakes._base import FakePlatform

ROOT = Path(__file__).parents[2]

BOT_SCRIPT = """
import importlib, json, os
from pathlib import Path
import nonebot

nonebot.init(**json.loads(os.environ["FAKES_NONEBOT_CONFIG"]))
adapter = importlib.import_module(os.environ["FAKES_ADAPTER"]).Adapter
nonebot.get_driver().register_adapter(adapter)
nonebot.load_plugin(Path(os.environ["FAKES_PLUGIN"]))
nonebot.run()
"""


ECHO_PLUGIN = """
from nonebot import on_message
from nonebot.adapters import Bot, Event
from nonebot.rule import to_me

echo = on_message(rule=to_me(), priority=10, block=True)


@echo.handle()
async def _(bot: Bot, event: Event) -> None:
    kinds = [seg.type for seg in event.get_message()]
    quoted = getattr(event, "reply", None) or getattr(event, "reply_to_message", None)
    text = event.get_plaintext().strip()
    await echo.send(f"{'quote ' if quoted else ''}echo: {text} [{','.join(kinds)}]")
    if {"img", "image", "photo", "post"} & set(kinds):
        await echo.send(await picture(bot))
"""


def echo_plugin(picture: str) -> str:
    """A plugin that answers every message to the bot with ``echo: <text> [<segment types>]``
    (``quote echo: ...`` when it quoted something), and an image after one that had an image.

    ``picture`` is the source of ``async def picture(bot) -> MessageSegment``: how this
    platform's adapter sends an image."""
    return picture + ECHO_PLUGIN


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NoneBotApp:
    """Runs BOT_SCRIPT against ``fake`` while the context is open; stops it on exit."""

    def __init__(
        self,
        workdir: Path,
        fake: FakePlatform,
        plugin: str,
        *,
        port: int | None = None,
        nickname: tuple[str, ...] = ("悠酱",),
        env: dict[str, str] | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.workdir = workdir
        self.fake = fake
        self.plugin = plugin
        self.port = port or free_port()
        """Where the bot's own HTTP server listens (a webhook platform posts events here)."""
        self.nickname = nickname
        self.env = env or {}
        self.config = config or {}
        self.log_path = workdir / "bot.log"
        self._proc: asyncio.subprocess.Process | None = None

    def log(self) -> str:
        """What the bot has logged so far (stdout and stderr)."""
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def __aenter__(self) -> Self:
        self.fake.app_url = f"http://127.0.0.1:{self.port}"
        self.workdir.mkdir(parents=True, exist_ok=True)
        script = self.workdir / "bot.py"
        script.write_text(BOT_SCRIPT, encoding="utf-8")
        plugin = self.workdir / "fake_echo_plugin.py"
        plugin.write_text(self.plugin, encoding="utf-8")
        config = {
            "driver": "~fastapi+~httpx+~websockets",
            "host": "127.0.0.1",
            "port": self.port,
            "nickname": list(self.nickname),
            "log_level": "DEBUG",
            **self.fake.nonebot_config(),
            **self.config,
        }
        env = {
            **os.environ,
            "FAKES_NONEBOT_CONFIG": json.dumps(config),
            "FAKES_ADAPTER": self.fake.adapter,
            "FAKES_PLUGIN": str(plugin),
            # the tree under test (src/, then tests/ from the root), not an installed copy
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
            "NO_PROXY": "127.0.0.1,localhost",  # loopback only, whatever proxy the machine has
            "no_proxy": "127.0.0.1,localhost",
            **self.env,
        }
        with self.log_path.open("wb") as log:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                str(script),
                env=env,
                cwd=self.workdir,  # no .env of the repo's picked up by accident
                stdout=log,  # NoneBot logs to stdout
                stderr=asyncio.subprocess.STDOUT,
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
