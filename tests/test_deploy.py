"""The production layout in deploy/: Docker cannot run on the test machines, so its structure is
checked instead: every service healthy-checked, every image pinned, every yuiju setting a real
config field, every secret declared in .env.example, the yuiju commands real commands."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from yuiju.cli import build_parser
from yuiju.config import ENV_PREFIX, YuijuConfig
from yuiju.storage.redis import cluster_client

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
COMPOSE: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
ENV_EXAMPLE = (DEPLOY / ".env.example").read_text(encoding="utf-8")
YUIJU = [name for name, s in SERVICES.items() if s.get("image", "").startswith("yuiju:")]


def one_shot_jobs() -> set[str]:
    """Services others wait to *complete* (run once and exit), not to be healthy."""
    return {
        dep
        for s in SERVICES.values()
        for dep, cond in (s.get("depends_on") or {}).items()
        if cond.get("condition") == "service_completed_successfully"
    }


def interpolated(text: str) -> set[str]:
    """``${VAR}``, ``${VAR:-default}``, ``${VAR:?message}`` (``$$`` is a literal dollar)."""
    return set(re.findall(r"(?<!\$)\$\{([A-Z_][A-Z0-9_]*)", text))


def test_every_long_running_service_has_a_healthcheck_and_jobs_are_waited_for() -> None:
    jobs = one_shot_jobs()
    assert jobs == {"redis-cluster-init"}
    for name, service in SERVICES.items():
        if name in jobs:
            assert service.get("restart") == "no", name
            continue
        check = service.get("healthcheck") or {}
        assert check.get("test") and check["test"][0] in ("CMD", "CMD-SHELL"), (
            f"{name} has no healthcheck"
        )
        assert service.get("restart") == "unless-stopped", name


def test_yuiju_waits_for_healthy_stores_and_napcat_for_the_bot() -> None:
    assert set(YUIJU) == {"yuiju-world", "yuiju-bot"}
    for name in YUIJU:
        needs = SERVICES[name]["depends_on"]
        assert needs == {
            "redis-cluster-init": {"condition": "service_completed_successfully"},
            "mongodb": {"condition": "service_healthy"},
            "qdrant": {"condition": "service_healthy"},
        }, name
    assert SERVICES["napcat"]["depends_on"] == {"yuiju-bot": {"condition": "service_healthy"}}
    init_needs = SERVICES["redis-cluster-init"]["depends_on"]
    nodes = {n for n in SERVICES if re.fullmatch(r"redis-\d", n)}
    assert len(nodes) == 6 and init_needs == {n: {"condition": "service_healthy"} for n in nodes}
    for service in SERVICES.values():
        assert set(service.get("depends_on") or {}) <= set(SERVICES)


def test_every_image_is_pinned_to_a_version() -> None:
    images = {name: s["image"] for name, s in SERVICES.items()}
    froms = re.findall(
        r"^FROM\s+(\S+)", (DEPLOY / "Dockerfile").read_text(encoding="utf-8"), re.MULTILINE
    )
    commented = re.findall(
        r"^\s*#\s*image:\s*(\S+)",
        (DEPLOY / "compose.yaml").read_text(encoding="utf-8"),
        re.MULTILINE,
    )
    for image in [*images.values(), *froms, *commented]:
        _, _, tag = image.rpartition(":")
        assert tag and "/" not in tag and tag != "latest" and re.search(r"\d+\.\d+", tag), image
    assert all(
        s["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        for n, s in SERVICES.items()
        if n in YUIJU
    )
    assert (DEPLOY / "Dockerfile").exists() and (DEPLOY / "Dockerfile.dockerignore").exists()


def yuiju_settings() -> dict[str, str]:
    """Every YUIJU_* variable the layout sets: in the services and (even commented) in .env.example."""
    found: dict[str, str] = {}
    for name in YUIJU:
        found |= {k: str(v) for k, v in SERVICES[name]["environment"].items()}
    for line in ENV_EXAMPLE.splitlines():
        if m := re.match(r"#?\s*(YUIJU_[A-Z0-9_]+)=(.*)", line.strip()):
            found[m.group(1)] = m.group(2)
    return found


def test_every_yuiju_variable_names_a_real_config_field() -> None:
    settings = yuiju_settings()
    assert {
        "YUIJU_REDIS__URL",
        "YUIJU_MONGO__URL",
        "YUIJU_QDRANT__URL",
        "YUIJU_ONEBOT__ACCESS_TOKEN",
        "YUIJU_WEB__TOKEN",
        "YUIJU_LLM__API_KEY",
    } <= set(settings)
    for name in settings:
        if name == "YUIJU_CONFIG":  # the config file's path, read by load_config
            continue
        section, _, field = name.removeprefix(ENV_PREFIX).lower().partition("__")
        assert section in YuijuConfig.model_fields, f"{name}: no [{section}] section"
        model = YuijuConfig.model_fields[section].annotation
        assert model is not None and field in model.model_fields, (
            f"{name}: no {field!r} in [{section}]"
        )


def test_the_store_urls_name_services_of_the_layout() -> None:
    env = SERVICES["yuiju-world"]["environment"]
    redis_url = env["YUIJU_REDIS__URL"].replace("${REDIS_PASSWORD}", "secret")
    client = cluster_client(redis_url)
    assert {n.host for n in client.nodes_manager.startup_nodes.values()} <= set(SERVICES)
    assert client.connection_kwargs["password"] == "secret"
    assert urlsplit(env["YUIJU_MONGO__URL"]).hostname == "mongodb"
    assert urlsplit(env["YUIJU_QDRANT__URL"]).hostname == "qdrant"
    assert SERVICES["yuiju-bot"]["environment"]["YUIJU_ONEBOT__PORT"] == "8080"


def test_every_secret_the_compose_file_reads_is_in_the_env_example() -> None:
    used = interpolated((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    declared = set(re.findall(r"^([A-Z_][A-Z0-9_]*)=", ENV_EXAMPLE, re.MULTILINE))
    assert used and used <= declared, used - declared


@pytest.mark.parametrize("name", YUIJU)
def test_the_yuiju_commands_are_real_commands(name: str) -> None:
    command = SERVICES[name]["command"]
    args = build_parser().parse_args(command)
    assert args.cmd in ("world", "bot")
    entry = re.search(
        r'^ENTRYPOINT \["yuiju"\]',
        (DEPLOY / "Dockerfile").read_text(encoding="utf-8"),
        re.MULTILINE,
    )
    assert entry


def test_the_cluster_nodes_announce_their_service_names() -> None:
    for n in range(1, 7):
        node = SERVICES[f"redis-{n}"]
        assert node["environment"]["REDIS_NODE"] == f"redis-{n}"
        words = shlex.split(node["command"])[2]  # sh -c '...'
        assert "--cluster-enabled yes" in words and "--cluster-announce-hostname" in words
        assert "--appendonly yes" in words
