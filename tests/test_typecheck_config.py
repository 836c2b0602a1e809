"""The type checker's configuration: strict where the seams live, and really strict there.

mypy takes no ``strict = true`` in a per-module section, so pyproject.toml lists the flags; these
tests compare them with what mypy's own ``--strict`` turns on (a new mypy adding a flag fails here).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy.main import process_options
from mypy.options import Options

ROOT = Path(__file__).resolve().parent.parent

STRICT = ["yuiju.world.engine", "yuiju.llm.model", "yuiju.storage.redis", "yuiju.memory.semantic"]
DEFAULT = ["yuiju.message.service", "yuiju.web.app", "yuiju.cli", "nonebot_plugin_yuiju"]


def _strict_flags() -> dict[str, object]:
    """What ``--strict`` changes from mypy's defaults, by option name."""
    _, default = process_options([], require_targets=False)
    _, strict = process_options(["--strict"], require_targets=False)
    before = default.snapshot()
    return {k: v for k, v in strict.snapshot().items() if before.get(k) != v}


@pytest.fixture(scope="module")
def ours() -> Options:
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)  # the config's paths (mypy_path = "src") are relative to the checkout
        _, options = process_options(
            ["--config-file", str(ROOT / "pyproject.toml")], require_targets=False
        )
    return options


@pytest.mark.parametrize("module", STRICT)
def test_the_seams_get_every_flag_of_mypy_strict(ours: Options, module: str) -> None:
    options = ours.clone_for_module(module)
    flags = _strict_flags()
    assert flags, "mypy's --strict changed nothing: the comparison is broken"
    assert {k: getattr(options, k) for k in flags} == flags


@pytest.mark.parametrize("module", DEFAULT)
def test_the_rest_is_checked_at_mypy_defaults(ours: Options, module: str) -> None:
    options = ours.clone_for_module(module)
    flags = _strict_flags()
    assert not [k for k in flags if getattr(options, k) == flags[k]]


def test_the_config_checks_both_installed_packages_with_the_pydantic_plugin(ours: Options) -> None:
    assert sorted(ours.packages) == ["nonebot_plugin_yuiju", "yuiju"]
    assert "pydantic.mypy" in ours.plugins
    assert ours.explicit_package_bases and ours.python_version == (3, 11)
