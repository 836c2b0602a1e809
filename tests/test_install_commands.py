"""The README's two set-up commands install the versions the suite is green with (constraints.txt),
and CI runs the README's test command exactly."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
RUN = "pip install -c constraints.txt -e . && yuiju run"
TEST = 'pip install -c constraints.txt -e ".[dev]" && python -m pytest'


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert name, requirement
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def _pinned() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version.strip(), f"constraints.txt: {line!r} is not name==version"
            pins[_name(name)] = version.strip()
    return pins


def test_the_readme_commands_install_with_the_recorded_versions() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert RUN in lines and TEST in lines


def test_ci_runs_the_readme_test_command_exactly() -> None:
    assert TEST in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_every_dependency_and_extra_is_pinned_within_its_range() -> None:
    """A dependency added to pyproject.toml without a pin here fails: the README's commands would
    install whatever is newest that day."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        wanted += extra
    pins = _pinned()
    missing = sorted({_name(r) for r in wanted} - set(pins))
    assert not missing, f"not in constraints.txt: {missing}; run .ci/try-latest --write"
    outside = [
        f"{r} (pinned {pins[_name(r)]})"
        for r in map(Requirement, wanted)
        if not r.specifier.contains(pins[_name(r.name)], prereleases=True)
    ]
    assert not outside, f"constraints.txt pins versions pyproject.toml excludes: {outside}"
