"""Every URL setting is checked at start-up: a URL the client would reject later (no scheme, the
wrong scheme, no host) stops start-up with the key, the value and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from yuiju.config import ConfigError, YuijuConfig, load_config

SECRET = "pw-very-secret-77"

# every URL setting, with a value the client accepts
GOOD = {
    ("llm", "base_url"): ["https://api.deepseek.com/v1", "http://127.0.0.1:8080/v1"],
    ("embeddings", "base_url"): ["https://api.siliconflow.cn/v1", "http://[::1]:9000/v1"],
    ("qdrant", "url"): ["http://localhost:6333", "https://xyz.cloud.qdrant.io:6333"],
    ("redis", "url"): [
        "redis://localhost:6379/0",
        f"rediss://:{SECRET}@cache:6380",
        "unix:///run/redis.sock",
    ],
    ("mongo", "url"): [
        "mongodb://localhost:27017",
        f"mongodb://u:{SECRET}@a:27017,b:27017/x?replicaSet=rs",
        "mongodb+srv://cluster0.example.net/",
    ],
}
BAD = [
    (("llm", "base_url"), "api.deepseek.com", "https://api.deepseek.com"),
    (("llm", "base_url"), "ftp://api.deepseek.com/v1", "https://"),
    (("llm", "base_url"), "https://", "host"),
    (("llm", "base_url"), "http://localhost:80a/v1", "port"),
    (("embeddings", "base_url"), "api.siliconflow.cn/v1", "https://api.siliconflow.cn/v1"),
    (("qdrant", "url"), "localhost:6333", "http://localhost:6333"),
    (("redis", "url"), "localhost:6379", "redis://localhost:6379"),
    (("redis", "url"), "http://localhost:6379", "redis://"),
    (("redis", "url"), "unix://", "socket"),
    (("mongo", "url"), "localhost:27017", "mongodb://localhost:27017"),
    (("mongo", "url"), "mongodb://", "host"),
]


pytestmark = pytest.mark.usefixtures("clean_config_env")


def env_name(section: str, field: str) -> str:
    return f"YUIJU_{section.upper()}__{field.upper()}"


def url_fields() -> set[tuple[str, str]]:
    return {
        (name, field)
        for name, section in YuijuConfig.model_fields.items()
        for field in section.annotation.model_fields
        if field.endswith("url")
    }  # type: ignore[union-attr]


def test_every_url_setting_is_covered_here() -> None:
    assert url_fields() == set(GOOD)


@pytest.mark.parametrize(("key", "value"), [(k, v) for k, vs in GOOD.items() for v in vs])
def test_a_url_the_client_accepts_loads(key: tuple[str, str], value: str) -> None:
    cfg = load_config(environ={env_name(*key): value})
    loaded = getattr(getattr(cfg, key[0]), key[1])
    assert (loaded if isinstance(loaded, str) else loaded.get_secret_value()) == value


@pytest.mark.parametrize(("key", "value", "fix"), BAD)
def test_a_bad_url_stops_start_up_with_the_key_the_value_and_the_fix(
    key: tuple[str, str],
    value: str,
    fix: str,
    tmp_path: Path,
) -> None:
    file = tmp_path / "yuiju.toml"
    file.write_text(f'[{key[0]}]\n{key[1]} = "{value}"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(file, environ={})
    message = str(caught.value)
    assert f"{key[0]}.{key[1]}" in message and repr(value) in message and fix in message
    assert env_name(*key) in message


@pytest.mark.parametrize("key", sorted(GOOD))
def test_an_empty_url_means_not_set(key: tuple[str, str]) -> None:
    cfg = load_config(environ={env_name(*key): ""})
    assert getattr(getattr(cfg, key[0]), key[1]) is None


@pytest.mark.parametrize("value", [f"user:{SECRET}@cache:6379", f"http://:{SECRET}@cache:6379"])
def test_a_bad_url_with_a_password_never_shows_it(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(environ={"YUIJU_REDIS__URL": value})
    assert "redis.url" in str(caught.value) and SECRET not in str(caught.value)
