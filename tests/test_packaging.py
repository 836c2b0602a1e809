"""What installing yuiju puts on the import path: `yuiju` and `nonebot_plugin_yuiju`, nothing generic.

The source lives in the top-level folders the design card names; src/ is the installed layout as
links to them (docs/architecture.md)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
OURS = ("llm", "storage", "memory", "world", "actions", "characters", "message", "web")
MODULES = {"config.py": "yuiju_config.py", "cli.py": "yuiju_cli.py", "tasks.py": "yuiju_tasks.py"}


def test_the_installed_layout_is_yuiju_and_the_plugin_only() -> None:
    installed = sorted(p.name for p in SRC.iterdir() if not p.name.endswith(".egg-info"))
    assert installed == ["nonebot_plugin_yuiju", "yuiju"]
    links = {p.name: p for p in (SRC / "yuiju").iterdir() if p.is_symlink()}
    assert sorted(links) == sorted([*OURS, *MODULES])
    for name in OURS:
        assert links[name].resolve() == ROOT / name, name
        assert (ROOT / name / "__init__.py").is_file(), (
            f"{name}/ needs an __init__.py to be installed"
        )
    for name, source in MODULES.items():
        assert links[name].resolve() == ROOT / source
    assert (SRC / "nonebot_plugin_yuiju").resolve() == ROOT / "nonebot_plugin_yuiju"


def _our_python_files() -> list[Path]:
    skip = {".git", "src", "build"}
    return [p for p in ROOT.rglob("*.py") if not skip & set(p.relative_to(ROOT).parts)]


def test_no_code_imports_our_packages_by_a_generic_name() -> None:
    generic = {*OURS, *(source.removesuffix(".py") for source in MODULES.values())}
    found: list[str] = []
    for path in _our_python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno} {n}"
                for n in names
                if n.split(".")[0] in generic
            ]
    assert found == []


def test_a_host_module_called_message_or_llm_does_not_touch_her(tmp_path: Path) -> None:
    """A NoneBot project's own ./message.py, or the PyPI `llm` package, first on the path."""
    (tmp_path / "message.py").write_text(
        "raise RuntimeError('the host message module was imported')\n"
    )
    (tmp_path / "llm").mkdir()
    (tmp_path / "llm" / "__init__.py").write_text(
        "raise RuntimeError('the other llm package was imported')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    code = (
        "from yuiju import cli; import nonebot_plugin_yuiju, yuiju.message.service, yuiju.world.engine;"
        "raise SystemExit(cli.main(['actions', 'check']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
