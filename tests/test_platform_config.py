"""The chat platforms in yuiju.toml: [satori], [telegram] and [feishu] are checked at start-up with
the key and the fix, their secrets never shown, and they become the NoneBot settings and adapters
that `yuiju run` / `yuiju bot` start."""

from __future__ import annotations

from pathlib import Path

import pytest

from yuiju.cli import nonebot_settings, platform_lines, served_platforms
from yuiju.config import ConfigError, YuijuConfig, load_config

pytestmark = pytest.mark.usefixtures("clean_config_env")

TG_TOKEN = "123456789:AAsecretPartOfTheTokenXXXXXXXXXX"


def config(tmp_path: Path, text: str) -> YuijuConfig:
    path = tmp_path / "yuiju.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, environ={})


def refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as raised:
        config(tmp_path, text)
    return str(raised.value)


def test_telegram_switched_on_without_a_token_says_where_to_get_one(tmp_path: Path) -> None:
    message = refused(tmp_path, "[telegram]\nenabled = true\n")
    assert "[telegram] token" in message and "@BotFather" in message


def test_a_telegram_token_that_is_no_bot_token_is_refused_without_showing_it(
    tmp_path: Path,
) -> None:
    message = refused(tmp_path, '[telegram]\ntoken = "sk-not-a-telegram-token-at-all"\n')
    assert "123456789:AA" in message and "@BotFather" in message
    assert "sk-not-a-telegram" not in message


def test_feishu_switched_on_names_every_credential_missing(tmp_path: Path) -> None:
    message = refused(tmp_path, '[feishu]\nenabled = true\napp_id = "cli_x"\n')
    assert "app_secret, verification_token are not set" in message
    assert "凭证与基础信息" in message


def test_a_satori_host_written_as_a_url_says_to_split_it(tmp_path: Path) -> None:
    message = refused(tmp_path, '[satori]\nhost = "ws://127.0.0.1:5500"\n')
    assert "satori.host" in message and "port and path" in message


def test_a_bad_telegram_api_server_or_proxy_names_the_key(tmp_path: Path) -> None:
    assert "telegram.api_server" in refused(tmp_path, '[telegram]\napi_server = "api.x.org"\n')
    message = refused(tmp_path, '[telegram]\nproxy = "ftp://u:pw@proxy:21"\n')
    assert "telegram.proxy" in message and "pw" not in message


def test_platform_secrets_never_show_in_the_config_or_its_summary(tmp_path: Path) -> None:
    cfg = config(
        tmp_path,
        f"""
[satori]
enabled = true
token = "satori-secret-1"
[telegram]
enabled = true
token = "{TG_TOKEN}"
proxy = "http://user:proxy-secret-2@127.0.0.1:7890"
[feishu]
enabled = true
app_id = "cli_a1"
app_secret = "app-secret-3"
verification_token = "verify-secret-4"
encrypt_key = "encrypt-secret-5"
""",
    )
    shown = repr(cfg) + str(cfg.summary())
    shown += "\n".join(platform_lines(cfg, served_platforms(cfg), host="127.0.0.1", port=8080))
    for secret in ("satori-secret-1", "secretPartOfTheToken", "proxy-secret-2", "-secret-"):
        assert secret not in shown
    assert cfg.summary()["platforms"] == ["satori", "telegram", "feishu"]


def test_the_enabled_platforms_become_their_adapters_and_settings(tmp_path: Path) -> None:
    cfg = config(
        tmp_path,
        f"""
[onebot]
port = 9000
[satori]
enabled = true
host = "10.0.0.2"
port = 5140
path = "satori/"
token = "s"
[telegram]
enabled = true
token = "{TG_TOKEN}"
api_server = "http://127.0.0.1:8081"
proxy = "socks5://127.0.0.1:1080"
[feishu]
enabled = true
app_id = "cli_a1"
app_secret = "a"
verification_token = "v"
is_lark = true
protocol = "ws"
""",
    )
    settings = nonebot_settings(cfg, served_platforms(cfg), nickname=["悠酱"])
    assert settings.adapters == ("satori", "telegram", "feishu")  # no OneBot: it is off
    init = settings.init
    assert init["port"] == 9000 and "onebot_access_token" not in init
    assert init["driver"] == "~fastapi+~httpx+~websockets"
    assert init["satori_clients"] == [
        {"host": "10.0.0.2", "port": 5140, "path": "/satori", "secure": False, "token": "s"}
    ]
    assert init["telegram_bots"] == [{"token": TG_TOKEN, "api_server": "http://127.0.0.1:8081/"}]
    assert init["telegram_proxy"] == "socks5://127.0.0.1:1080"
    [feishu] = init["feishu_bots"]
    assert feishu["is_lark"] is True and feishu["protocol"] == "ws" and "encrypt_key" not in feishu
    lines = platform_lines(cfg, served_platforms(cfg), host="127.0.0.1", port=9000)
    assert lines == [
        "Satori: connecting to ws://10.0.0.2:5140/satori/v1/events",
        "Telegram: polling http://127.0.0.1:8081/ for updates",
        "Lark: a long connection to the open platform",
    ]


def test_yuiju_bot_with_no_platform_switched_on_is_the_qq_bot_it_was(tmp_path: Path) -> None:
    cfg = config(tmp_path, '[onebot]\naccess_token = "t"\n')
    assert cfg.platforms() == [] and served_platforms(cfg) == ["onebot"]
    settings = nonebot_settings(cfg, served_platforms(cfg), nickname=["悠酱"])
    assert settings.adapters == ("onebot",) and settings.init["onebot_access_token"] == "t"
