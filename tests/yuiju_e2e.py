"""yuiju over a fake chat platform, end to end: the real `yuiju bot` (or `yuiju run`) in a
subprocess, its yuiju.toml pointing the platform's real NoneBot adapter at a fake server on
loopback (tests/fakes), the OpenAI-compatible stub as her model, the tests' Redis as her store.

    with OpenAIStub(handler=her_model) as stub:
        async with SatoriFake() as fake, yuiju_over(fake, tmp_path, stub=stub, redis_url=url) as bot:
            await fake.send_group_message("在吗", mention_bot=True)
            [reply] = await fake.sent_until_quiet(1.0, first_within=15)

What differs per platform (its yuiju.toml section, how it names people and groups) is in
`PlatformSetup`; everything else is the same for every fake.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from tests.fakes import (
    FakePlatform,
    FeishuFake,
    OneBotFake,
    Person,
    SatoriFake,
    Sent,
    TelegramFake,
    free_port,
)
from tests.openai_stub import OpenAIStub

ROOT = Path(__file__).parents[1]

PROACTIVE_POST = "刚在南风公园走了半小时，风好舒服～"
CHAT_REPLY = "在的～"


def her_model(body: dict[str, Any]) -> str:
    """Her model in these tests: a proactive decision (the requests that ask for JSON) posts
    `PROACTIVE_POST`; every chat turn answers `CHAT_REPLY`."""
    if body.get("response_format"):
        return json.dumps(
            {"shouldSend": True, "reason": "群里很安静", "message": PROACTIVE_POST},
            ensure_ascii=False,
        )
    return CHAT_REPLY


USER, OTHER, ADMIN = Person("20002", "小明"), Person("20003", "小红"), Person("30003", "店长")
"""Who writes in the tests, on platforms with numeric user ids."""


@dataclass(frozen=True)
class PlatformSetup:
    """How one fake is configured in yuiju.toml and how yuiju names what is on it."""

    prefix: str
    """The platform prefix of people and groups (``tg``)."""
    group: str
    """The fake's group as the fake names it in `Sent.chat`."""
    section: str
    """The yuiju.toml section that starts the platform."""
    onebot: str = ""
    """Lines of its [onebot] section besides the port (OneBot v11 is started from there)."""
    user: Person = USER
    other: Person = OTHER
    """Someone else in the group."""
    admin: Person = ADMIN

    @property
    def group_key(self) -> str:
        """The group as yuiju.toml names it (``[chat.groups."tg:-100..."]``)."""
        return f"{self.prefix}:{self.group}"

    def person(self, who: Person) -> str:
        return f"{self.prefix}:{who.id}"


def setup_of(fake: FakePlatform) -> PlatformSetup:
    if isinstance(fake, OneBotFake):
        return PlatformSetup(
            prefix="qq",
            group=fake.group_id,
            section="",
            onebot=f'enabled = true\naccess_token = "{fake.token}"\n',
        )
    if isinstance(fake, SatoriFake):
        return PlatformSetup(
            prefix="qq" if fake.platform == "qq" else fake.platform,
            group=fake.group_id,
            section=f"""
[satori]
enabled = true
host = "127.0.0.1"
port = {fake.port}
token = "{fake.token}"
""",
        )
    if isinstance(fake, TelegramFake):
        return PlatformSetup(
            prefix="tg",
            group=str(fake.group_id),
            section=f"""
[telegram]
enabled = true
token = "{fake.token}"
api_server = "{fake.base_url}/"
""",
        )
    if isinstance(fake, FeishuFake):
        encrypt = f'encrypt_key = "{fake.encrypt_key}"\n' if fake.encrypt_key else ""
        return PlatformSetup(
            prefix="lark",
            group=fake.chat_id,
            section=f"""
[feishu]
enabled = true
app_id = "{fake.app_id}"
app_secret = "{fake.app_secret}"
verification_token = "{fake.verification_token}"
{encrypt}api_base = "{fake.base_url}"
""",
            user=Person("ou_20002", "小明"),
            other=Person("ou_20003", "小红"),
            admin=Person("ou_30003", "店长"),
        )
    raise TypeError(f"no yuiju.toml section for {type(fake).__name__}")


def chat_sections(setup: PlatformSetup) -> str:
    """[chat] and [proactive] for the fake's group: her name calls her there, one user may write to
    her in private, one is her admin; limits out of the way of a test's pace."""
    return f"""
[chat]
mode = "CHAT"
max_pause_seconds = 0
user_messages_per_minute = 100
group_replies_per_minute = 100
group_messages_per_minute = 100
admins = ["{setup.person(setup.admin)}"]
private_whitelist = ["{setup.person(setup.user)}"]

[chat.groups."{setup.group_key}"]
reply = "name"

[proactive.groups."{setup.group_key}"]
quiet_hours = ""
active_messages = 50
"""


@dataclass
class YuijuOverFake:
    fake: FakePlatform
    setup: PlatformSetup
    stub: OpenAIStub
    prefix: str
    """Her Redis key prefix."""
    log_path: Path
    proc: asyncio.subprocess.Process | None = None
    exit_code: int | None = field(default=None)

    def log(self) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def tail(self) -> str:
        return self.log()[-4000:]

    async def stop(self) -> int:
        """SIGINT, as Ctrl-C: her exit status (a stop that hangs is killed: -9)."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return self.exit_code if self.exit_code is not None else -1
        proc.send_signal(signal.SIGINT)
        try:
            self.exit_code = await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            self.exit_code = await proc.wait()
        return self.exit_code


def our_tracebacks(log: str) -> list[str]:
    """The tracebacks in ``log`` whose innermost frame is yuiju's code (the plugin's or the core's),
    not a library's: a bug of hers, where an adapter's own report of a bad frame is none."""
    ours = []
    for block in log.split("Traceback (most recent call last):")[1:]:
        frames = re.findall(r'File "([^"]+)"', block.split("\n\n")[0])
        if frames and ("/nonebot_plugin_yuiju/" in frames[-1] or "/yuiju/" in frames[-1]):
            ours.append(block[:1500])
    return ours


def write_config(
    workdir: Path,
    setup: PlatformSetup,
    *,
    stub: OpenAIStub,
    redis_url: str,
    prefix: str,
    port: int,
    extra_toml: str,
    app_toml: str = "",
) -> Path:
    """Her yuiju.toml for a run over the fake: shared stores, the stub, no memory or page;
    ``app_toml``: more lines of its [app] section (``log_level = "DEBUG"``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "yuiju.toml"
    config.write_text(
        f"""
[app]
data_dir = "{(workdir / "data").as_posix()}"
{app_toml}
[redis]
url = "{redis_url}"
prefix = "{prefix}"
[llm]
base_url = "{stub.base_url}"
model = "stub"
[memory]
enabled = false
[world]
policy = "utility"
[web]
enabled = false
[onebot]
port = {port}
{setup.onebot}
{setup.section}
{chat_sections(setup)}
{extra_toml}
""",
        encoding="utf-8",
    )
    return config


@contextlib.asynccontextmanager
async def yuiju_over(
    fake: FakePlatform,
    workdir: Path,
    *,
    stub: OpenAIStub,
    redis_url: str,
    prefix: str = "e2e",
    command: str = "bot",
    extra_toml: str = "",
    app_toml: str = "",
    connect: bool = True,
) -> AsyncIterator[YuijuOverFake]:
    """``yuiju <command>`` over ``fake`` until the context ends (then stopped, as Ctrl-C does), in
    a fresh town (the keys under ``prefix`` deleted first); returns once the platform's adapter
    has connected to the fake (``connect=False``: at once, for a fake that starts later)."""
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    for key in [k async for k in client.scan_iter(f"{prefix}:*")]:
        await client.delete(key)
    await client.aclose()
    setup = setup_of(fake)
    port = free_port()
    fake.app_url = f"http://127.0.0.1:{port}"  # where Feishu posts its callbacks
    config = write_config(
        workdir,
        setup,
        stub=stub,
        redis_url=redis_url,
        prefix=prefix,
        port=port,
        extra_toml=extra_toml,
        app_toml=app_toml,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("YUIJU_") and k != "REDIS_URL"}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    bot = YuijuOverFake(fake, setup, stub, prefix, workdir / "yuiju.log")
    with bot.log_path.open("wb") as log:
        bot.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "yuiju.cli",
            "--config",
            str(config),
            command,
            *(["--no-panel"] if command == "run" else []),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:
        if connect:
            try:
                await fake.wait_connected(60)
            except TimeoutError:
                raise AssertionError(f"the adapter never connected:\n{bot.tail()}") from None
            await fake.calls_until_quiet(0.5)  # start-up calls (getMe, bot info, ...)
        yield bot
    finally:
        await bot.stop()


async def replies(bot: YuijuOverFake, *, first_within: float = 20.0) -> list[Sent]:
    """What she sent since the last look, once she has been quiet for 0.7 s (the first line may
    take ``first_within`` seconds on a loaded machine)."""
    return await bot.fake.sent_until_quiet(0.7, first_within=first_within)
