"""Whoever connects to the OneBot WebSocket speaks as any QQ user, admins included: the bot needs an
access token (`yuiju init` writes one), refuses to start without one unless told so for a local
experiment, and refuses connections without it or with another one."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest
import tomlkit
import websockets

from tests.test_bot_e2e import BOT, connect, free_port
from yuiju import cli as yuiju_cli
from yuiju.config import ConfigError, load_config

ROOT = Path(__file__).parents[1]


pytestmark = pytest.mark.usefixtures("clean_config_env")


def test_an_enabled_bot_without_a_token_stops_start_up_naming_the_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(environ={"YUIJU_ONEBOT__ENABLED": "true"})
    message = str(caught.value)
    assert (
        "onebot.access_token" in message and "yuiju init" in message and "allow_no_token" in message
    )


def test_no_token_is_allowed_only_when_asked_and_only_on_loopback() -> None:
    cfg = load_config(
        environ={"YUIJU_ONEBOT__ENABLED": "true", "YUIJU_ONEBOT__ALLOW_NO_TOKEN": "true"}
    )
    assert cfg.onebot.access_token is None and cfg.onebot.allow_no_token
    with pytest.raises(ConfigError, match="access_token"):
        load_config(
            environ={
                "YUIJU_ONEBOT__ENABLED": "true",
                "YUIJU_ONEBOT__ALLOW_NO_TOKEN": "true",
                "YUIJU_ONEBOT__HOST": "0.0.0.0",
            }
        )


def test_yuiju_bot_without_a_token_refuses_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "yuiju.toml"
    config.write_text(f'[app]\ndata_dir = "{(tmp_path / "data").as_posix()}"\n', encoding="utf-8")

    assert yuiju_cli.main(["--config", str(config), "bot"]) == 2

    err = capsys.readouterr().err
    assert "access_token" in err and "allow_no_token" in err
    assert not (tmp_path / "data").exists()  # refused before opening anything


def bot_config(tmp_path: Path, redis_url: str, port: int, *, allow_no_token: bool) -> Path:
    """The file `yuiju init` wrote, with the bot switched on as docs/platforms/qq.md says."""
    path = tmp_path / "yuiju.toml"
    assert yuiju_cli.main(["--config", str(path), "init"]) == 0
    doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    doc["onebot"]["enabled"] = True  # type: ignore[index]
    doc["onebot"]["port"] = port  # type: ignore[index]
    if allow_no_token:
        del doc["onebot"]["access_token"]  # type: ignore[union-attr]
        doc["onebot"]["allow_no_token"] = True  # type: ignore[index]
    text = (
        tomlkit.dumps(doc)
        + f"""
[app]
data_dir = "{(tmp_path / "data").as_posix()}"
[redis]
url = "{redis_url}"
prefix = "token-{tmp_path.name}"
[memory]
enabled = false
"""
    )
    path.write_text(text, encoding="utf-8")
    return path


async def refused(url: str, headers: dict[str, str]) -> bool:
    try:
        ws = await websockets.connect(url, additional_headers=headers)
    except websockets.InvalidStatus as exc:
        return exc.response.status_code in (401, 403)
    await ws.close()
    return False


@pytest.mark.slow
@pytest.mark.parametrize("allow_no_token", [False, True], ids=["token", "allow_no_token"])
async def test_the_bot_refuses_a_connection_without_its_token(
    tmp_path: Path, redis_url: str, allow_no_token: bool
) -> None:
    port = free_port()
    config = bot_config(tmp_path, redis_url, port, allow_no_token=allow_no_token)
    cfg = load_config(config, environ={})
    token = cfg.onebot.access_token.get_secret_value() if cfg.onebot.access_token else None
    env = {k: v for k, v in os.environ.items() if not k.startswith("YUIJU_") and k != "REDIS_URL"}
    err_path = tmp_path / "bot.log"
    with err_path.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "yuiju.cli",
            "--config",
            str(config),
            "bot",
            cwd=ROOT,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=err,
        )
    try:
        url = f"ws://127.0.0.1:{port}/onebot/v11/ws"
        headers = {"X-Self-ID": str(BOT), "X-Client-Role": "Universal"}
        good = {**headers, "Authorization": f"Bearer {token}"} if token else headers
        ws = await connect(url, good)  # waits for the bot to listen
        await ws.send(
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
        await ws.close()
        log = err_path.read_text(errors="replace")
        if token:
            assert await refused(url, headers), log  # no token
            assert await refused(url, {**headers, "Authorization": "Bearer not-the-token"}), log
            assert await refused(url, {**headers, "Authorization": f"Bearer {token[:-1]}"}), log
        else:
            assert "allow_no_token" in log and "admin" in log, log  # said loudly at start
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 20)
