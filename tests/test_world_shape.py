"""The world package stays readable (issue 29): no function over 80 lines, and the behavior loop
(read, decide, transact) within 600."""

from __future__ import annotations

import ast
from pathlib import Path

import yuiju.world

WORLD = Path(yuiju.world.__file__).parent
MAX_FUNCTION_LINES = 80
MAX_BEHAVIOR_LINES = 600


def long_functions(source: str) -> list[tuple[str, int]]:
    """Every function (or method) of ``source`` longer than `MAX_FUNCTION_LINES`, with its
    length (decorators and docstring included)."""
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def test_no_function_in_world_is_over_80_lines() -> None:
    files = sorted(WORLD.rglob("*.py"))
    assert len(files) > 20  # the package was found
    too_long = {
        f"{path.relative_to(WORLD)}:{name}": lines
        for path in files
        for name, lines in long_functions(path.read_text(encoding="utf-8"))
    }
    assert too_long == {}, "split these into well-named pieces"


def test_the_check_finds_a_long_function() -> None:
    body = "\n".join(f"    x{n} = {n}" for n in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}\n") == [("f", MAX_FUNCTION_LINES + 1)]
    assert long_functions("def g():\n    return 1\n") == []


def test_the_behavior_loop_is_at_most_600_lines() -> None:
    lines = (WORLD / "behavior.py").read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_BEHAVIOR_LINES, lines
