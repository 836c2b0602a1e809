"""The plugin inside someone else's NoneBot app reads her settings from its plugin config: the TOML
file named by ``YUIJU_CONFIG``, the app's .env ``YUIJU_*`` lines, then the process environment; it
refuses an app that lets anyone connect as the QQ side."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nonebot_plugin_yuiju import __plugin_meta__
from nonebot_plugin_yuiju.app import host_app_settings, host_telegram_problem, host_token_problem
from nonebot_plugin_yuiju.config import Config
from yuiju.config import ConfigError


def test_settings_rank_file_then_dotenv_then_process_environment(tmp_path: Path) -> None:
    file = tmp_path / "yuiju.toml"
    file.write_text(
        '[chat]\nmax_lines = 2\nmax_reply_chars = 50\nmode = "SILENT"\n', encoding="utf-8"
    )
    # NoneBot nests `YUIJU_CHAT__MAX_REPLY_CHARS=80` from its .env as {"yuiju_chat": {...}}
    host = {
        "yuiju_config": str(file),
        "yuiju_chat_enabled": True,
        "driver": "~fastapi",
        "yuiju_chat": {"max_reply_chars": 80, "mode": "VERBOSE"},
    }

    cfg = host_app_settings(str(file), host, environ={"YUIJU_CHAT__MODE": "CHAT"})

    assert (cfg.chat.max_lines, cfg.chat.max_reply_chars, cfg.chat.mode) == (2, 80, "CHAT")


def test_a_bad_dotenv_setting_names_the_key_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"chat\.max_lines.*\n.*fix"):
        host_app_settings(None, {"yuiju_chat": {"max_lines": 0}}, environ={})
    with pytest.raises(ConfigError, match="does not exist"):
        host_app_settings(str(tmp_path / "missing.toml"), {}, environ={})


@pytest.mark.parametrize(
    ("host", "token", "allow", "refused"),
    [
        ("127.0.0.1", "secret", False, False),
        ("0.0.0.0", "secret", False, False),
        ("127.0.0.1", None, False, True),
        ("127.0.0.1", "", False, True),
        ("127.0.0.1", None, True, False),  # the explicit opt-out, on loopback only
        ("0.0.0.0", None, True, True),
    ],
)
def test_an_app_without_an_access_token_is_refused_unless_opted_out_on_loopback(
    host: str,
    token: str | None,
    allow: bool,
    refused: bool,
) -> None:
    problem = host_token_problem(
        SimpleNamespace(host=host, onebot_access_token=token), allow_no_token=allow
    )
    assert (problem is not None) == refused
    if problem:
        assert "ONEBOT_ACCESS_TOKEN" in problem and "admins" in problem


def test_the_plugin_metadata_follows_nonebot_conventions() -> None:
    meta = __plugin_meta__
    assert meta.name and meta.description and meta.usage
    assert meta.type == "application" and meta.config is Config
    # what it claims is what the end-to-end tests prove: OneBot v11, and each platform's fake
    from tests.test_platforms_e2e import FAKES

    proven = {"~" + fake.adapter.removeprefix("nonebot.adapters.") for fake in FAKES.values()}
    assert meta.supported_adapters == {"~onebot.v11", *proven}
    assert Config.model_fields["yuiju_config"].description  # documented where declared


# The adapters the NoneBot plugin store knows (nonebot/nonebot2 assets/adapters.json5), of those
# she could claim; its checker (nonebot/noneflow) refuses a supported adapter not listed there.
STORE_ADAPTERS = {
    "nonebot.adapters.onebot.v11",
    "nonebot.adapters.onebot.v12",
    "nonebot.adapters.satori",
    "nonebot.adapters.telegram",
    "nonebot.adapters.feishu",
    "nonebot.adapters.qq",
    "nonebot.adapters.discord",
    "nonebot.adapters.kritor",
}


def test_the_plugin_metadata_carries_what_the_plugin_store_checks() -> None:
    import importlib
    import re
    import tomllib

    meta = __plugin_meta__
    # noneflow's PluginPublishInfo: a name of at most 50 characters, type application or
    # library, a homepage URL (that answers), supported adapters known to the store
    assert len(meta.name) <= 50 and meta.type in ("application", "library")
    assert meta.homepage and re.fullmatch(r"https?://\S+", meta.homepage)
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text("utf-8"))
    assert pyproject["project"]["urls"]["Homepage"] == meta.homepage
    assert meta.config is Config
    assert meta.supported_adapters
    modules = {"nonebot.adapters." + a.removeprefix("~") for a in meta.supported_adapters}
    assert modules <= STORE_ADAPTERS
    for module in modules:  # each installed with her, as the store's load test needs
        importlib.import_module(module)


async def test_the_plugin_imports_the_offline_embedders_libraries_at_the_apps_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # not at her first recall, in the middle of the host app's work (a ~1 s stall of its loop)
    import nonebot

    import yuiju.memory.service
    from nonebot_plugin_yuiju import app as bot

    config = tmp_path / "yuiju.toml"
    config.write_text(f'[app]\ndata_dir = "{(tmp_path / "data").as_posix()}"\n', encoding="utf-8")
    host = SimpleNamespace(host="127.0.0.1", onebot_access_token="t", model_dump=dict)
    monkeypatch.setattr(
        nonebot, "get_plugin_config", lambda _model: Config(yuiju_config=str(config))
    )
    driver = SimpleNamespace(config=host, _adapters={"OneBot V11": None})  # as get_adapters reads
    monkeypatch.setattr(nonebot, "get_driver", lambda: driver)
    preloaded: list[Any] = []
    monkeypatch.setattr(yuiju.memory.service, "preload_embedder", preloaded.append)
    monkeypatch.setattr(bot, "_log_through_nonebot", lambda _level: None)

    factory = await bot.host_app_factory()

    assert len(preloaded) == 1 and preloaded[0].memory.enabled
    assert factory is not None


def test_an_app_without_the_onebot_adapter_needs_no_onebot_token() -> None:
    # a Telegram-only host bot: nobody can connect as the QQ side, so nothing to refuse
    host = SimpleNamespace(host="0.0.0.0", onebot_access_token=None)
    assert host_token_problem(host, allow_no_token=False, adapters={"Telegram"}) is None
    assert host_token_problem(host, allow_no_token=False, adapters={"Telegram", "OneBot V11"})


@pytest.mark.parametrize(
    ("token", "usable"),
    [
        ("123456789:AAsecretPartOfTheTokenXXXXXXXXXX", True),
        ("7000000001:fake-token-for-tests", True),
        ("123:short", True),  # a test server's: the server decides how long a secret is
        ("sk-not-a-telegram-token-at-all", False),
        ("123:ab/cd", False),  # would change the URL it is part of
        ("123:ab cd", False),
        ("123:", False),
    ],
)
def test_yuiju_bot_and_a_host_app_take_the_same_telegram_tokens(
    token: str, usable: bool, clean_config_env: None
) -> None:
    # issue 31 item 6: `yuiju bot` refused a token the plugin route accepted
    try:
        host_app_settings(None, {"yuiju_telegram": {"token": token}}, environ={})
        ours = True
    except ConfigError as exc:
        ours = False
        assert "@BotFather" in str(exc) and token not in str(exc)
    host = host_telegram_problem(SimpleNamespace(telegram_bots=[{"token": token}]))
    assert (ours, host is None) == (usable, usable), host
    if host:
        assert "TELEGRAM_BOTS[0].token" in host and "@BotFather" in host
