"""Configuration: defaults, TOML, environment overrides, and errors that say how to fix them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from yuiju.config import (
    DEFAULT_EVOLUTIONS,
    ConfigError,
    YuijuConfig,
    default_toml,
    env_overrides,
    load_config,
)

SECRET = "sk-very-secret-4242"


pytestmark = pytest.mark.usefixtures("clean_config_env")


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("YUIJU_WORLD__TICK_MINUTES", "5", {"world": {"tick_minutes": 5}}),
        (
            "YUIJU_WORLD__CHARACTERS",
            '["yuiju", "mika"]',
            {"world": {"characters": ["yuiju", "mika"]}},
        ),
        ("YUIJU_WORLD__SPEED", "2.5", {"world": {"speed": 2.5}}),
        ("YUIJU_APP__FLAG", "true", {"app": {"flag": True}}),
        ("YUIJU_APP__FLAG", "false", {"app": {"flag": False}}),
        (
            "YUIJU_LLM__MODEL",
            "deepseek-chat",
            {"llm": {"model": "deepseek-chat"}},
        ),  # not TOML: a string
        (
            "YUIJU_LLM__BASE_URL",
            "http://127.0.0.1:8080/v1",
            {"llm": {"base_url": "http://127.0.0.1:8080/v1"}},
        ),
        ("YUIJU_LLM__MODEL", '"quoted"', {"llm": {"model": "quoted"}}),
        ("YUIJU_CONFIG", "x.toml", {}),  # the file switch, not a setting
        ("YUIJU_NOSECTION", "1", {}),
        ("OTHER__THING", "1", {}),
    ],
)
def test_env_overrides_are_parsed_as_toml_literals(name: str, raw: str, expected: dict) -> None:
    assert env_overrides({name: raw}) == expected


def test_env_overrides_reach_the_config() -> None:
    cfg = load_config(
        environ={
            "YUIJU_WORLD__TICK_MINUTES": "5",
            "YUIJU_WORLD__CHARACTERS": '["yuiju", "mika"]',
            "YUIJU_LLM__DAILY_TOKEN_BUDGET": "100000",
            "YUIJU_APP__TIMEZONE": "Europe/Berlin",
        }
    )
    assert cfg.world.tick_minutes == 5
    assert cfg.world.characters == ["yuiju", "mika"]
    assert cfg.llm.daily_token_budget == 100_000
    assert cfg.app.tz.key == "Europe/Berlin"


def test_environment_beats_the_file_and_overrides_beat_both(tmp_path: Path) -> None:
    file = tmp_path / "town.toml"
    file.write_text("[world]\ntick_minutes = 3\nseed = 9\n", encoding="utf-8")

    cfg = load_config(
        file, environ={"YUIJU_WORLD__TICK_MINUTES": "7"}, overrides={"world": {"seed": 1}}
    )

    assert (cfg.world.tick_minutes, cfg.world.seed) == (7, 1)


@pytest.mark.parametrize(
    ("env", "key", "value"),
    [
        ({"YUIJU_WORLD__TICK_MINUTES": "0"}, "world.tick_minutes", "0"),
        ({"YUIJU_WORLD__TICK_MINUTES": "often"}, "world.tick_minutes", "'often'"),
        ({"YUIJU_APP__TIMEZONE": "Mars/Olympus"}, "app.timezone", "'Mars/Olympus'"),
        ({"YUIJU_WORLD__POLICY": "dice"}, "world.policy", "'dice'"),
        ({"YUIJU_WORLD__EVOLUTIONS": '["drift_needs"]'}, "world.evolutions", "drift_needs"),
    ],
)
def test_an_invalid_value_names_the_key_the_value_and_the_fix(
    env: dict, key: str, value: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(environ=env)

    message = str(caught.value)
    assert key in message and value in message and "fix" in message
    env_name = next(iter(env))
    assert env_name in message  # where to set it


def test_an_unknown_key_says_to_remove_it() -> None:
    with pytest.raises(ConfigError, match=r"remove 'world\.ticks'"):
        load_config(environ={"YUIJU_WORLD__TICKS": "5"})


@pytest.mark.parametrize(
    "env",
    [
        {"YUIJU_LLM__API_KEY": SECRET, "YUIJU_WORLD__TICK_MINUTES": "0"},  # another field is bad
        {"YUIJU_LLM__API_KEY": "[1, 2]", "YUIJU_REDIS__URL": f"redis://:{SECRET}@host:6379/0"},
        {"YUIJU_QDRANT__API_KEY": SECRET, "YUIJU_QDRANT__URL": "[1]"},
        {"YUIJU_MONGO__URL": f"mongodb://u:{SECRET}@db/x", "YUIJU_MONGO__DATABASE": "[1]"},
    ],
)
def test_a_secret_never_appears_in_a_config_error(env: dict) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(environ=env)
    assert SECRET not in str(caught.value)


def test_a_secret_never_appears_in_the_summary_or_repr() -> None:
    cfg = load_config(
        environ={
            "YUIJU_LLM__API_KEY": SECRET,
            "YUIJU_LLM__BASE_URL": "http://127.0.0.1:8080/v1",
            "YUIJU_REDIS__URL": f"redis://:{SECRET}@cache:6379/0",
            "YUIJU_MONGO__URL": f"mongodb://admin:{SECRET}@db:27017/yuiju",
            "YUIJU_QDRANT__API_KEY": SECRET,
        }
    )
    assert cfg.llm.api_key is not None and cfg.llm.api_key.get_secret_value() == SECRET

    for text in (str(cfg.summary()), repr(cfg), str(cfg), cfg.model_dump_json()):
        assert SECRET not in text
    assert cfg.summary()["redis"] == "redis://:***@cache:6379/0"
    assert cfg.summary()["mongo"] == "mongodb://admin:***@db:27017/yuiju"
    assert cfg.summary()["llm"] == "deepseek-chat @ http://127.0.0.1:8080/v1"


def test_the_default_file_parses_and_gives_the_defaults(tmp_path: Path) -> None:
    text = default_toml(access_token="t" * 40)
    data = tomllib.loads(text)
    assert data == {
        "onebot": {"enabled": False, "access_token": "t" * 40}
    }  # the rest is commented out
    for section in YuijuConfig.model_fields:
        assert f"[{section}]" in text
    assert "# Evolution functions run in order each tick" in text  # documented where declared

    file = tmp_path / "yuiju.toml"
    file.write_text(text, encoding="utf-8")
    assert load_config(file, environ={}) == YuijuConfig(onebot={"access_token": "t" * 40})
    assert YuijuConfig().world.evolutions == list(DEFAULT_EVOLUTIONS)


def test_no_file_at_all_gives_the_defaults() -> None:
    assert load_config(environ={}) == YuijuConfig()


def test_a_missing_explicit_file_mentions_yuiju_init(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="yuiju init"):
        load_config(tmp_path / "nope.toml", environ={})
    with pytest.raises(ConfigError, match="yuiju init"):
        load_config(environ={"YUIJU_CONFIG": str(tmp_path / "nope.toml")})


def test_an_explicit_empty_environ_ignores_the_process_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("YUIJU_CONFIG", "/definitely/not/here.toml")
    assert load_config(environ={}) == YuijuConfig()


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    file = tmp_path / "yuiju.toml"
    file.write_text("[world\ntick_minutes = 5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"yuiju\.toml: not valid TOML"):
        load_config(file, environ={})


@pytest.mark.parametrize(
    ("llm", "mode"),
    [
        (
            {"base_url": "https://api.deepseek.com/v1"},
            "json_object",
        ),  # the default model's provider: no json_schema
        ({"base_url": "https://API.DeepSeek.com"}, "json_object"),
        ({"base_url": "https://api.openai.com/v1", "model": "gpt-4o-mini"}, "json_schema"),
        ({"base_url": "http://127.0.0.1:8080/v1"}, "json_schema"),
        (
            {"base_url": "https://api.deepseek.com/v1", "output_mode": "json_schema"},
            "json_schema",
        ),  # as told
        ({"base_url": "http://127.0.0.1:8080/v1", "output_mode": "json_object"}, "json_object"),
    ],
)
async def test_the_default_output_mode_suits_the_provider(llm: dict, mode: str) -> None:
    from yuiju.world.runtime import make_chat_model

    cfg = load_config(environ={}, overrides={"llm": llm})
    model = make_chat_model(cfg)

    assert cfg.llm.resolved_output_mode == mode
    assert model.output_mode == mode  # type: ignore[attr-defined]
    await model.aclose()  # type: ignore[attr-defined]
