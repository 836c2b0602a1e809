"""The README is an entrance and the rest is the MkDocs site under docs/: the README stays short
with the set-up commands near its top, every page is in the site's navigation, and the generated
references (docs/hooks.py) name every setting, card field and command, so they cannot drift."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import get_args, get_origin

import yaml
from pydantic import BaseModel

from yuiju.characters import CharacterCard
from yuiju.cli import build_parser
from yuiju.config import YuijuConfig

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SET_UP = (
    "pip install -c constraints.txt -e . && yuiju run",
    'pip install -c constraints.txt -e ".[dev]" && python -m pytest',
)


def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short_with_both_set_up_commands_in_its_first_60_lines() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    for command in SET_UP:
        assert command in lines[:60], command  # a line of its own, exactly as CI runs it


def test_the_readme_picture_is_in_the_repository_and_small() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme)
    assert pictures
    for picture in pictures:
        assert (ROOT / picture).stat().st_size < 300_000, picture


def _nav_files(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [f for item in node for f in _nav_files(item)]
    if isinstance(node, dict):
        return [f for value in node.values() for f in _nav_files(value)]
    return []


def test_every_docs_page_is_in_the_navigation_and_every_link_of_the_readme_exists() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    nav = _nav_files(config["nav"])
    pages = sorted(
        p.relative_to(DOCS).as_posix()
        for p in DOCS.rglob("*.md")
        if p.parent != DOCS / "incoming"  # notes not yet folded into the pages (mkdocs.yml)
    )
    assert sorted(nav) == pages
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for link in re.findall(r"\]\(((?:docs|bench|actions)/[^)#]+)", readme):
        assert (ROOT / link).exists(), link


def _settings(model: type[BaseModel], table: str) -> set[tuple[str, str]]:
    """(table, setting) of every leaf setting of ``model``, walked on its own (not by the hook)."""
    found: set[tuple[str, str]] = set()
    for name, field in model.model_fields.items():
        sub = f"{table}.{name}" if table else name
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found |= _settings(annotation, sub)
        elif (
            get_origin(annotation) is dict
            and isinstance(value := get_args(annotation)[1], type)
            and issubclass(value, BaseModel)
        ):
            found |= _settings(value, f"{sub}.<id>")
        else:
            found.add((table, name))
    return found


def _documented(markdown: str) -> set[tuple[str, str]]:
    """(table, setting) of every row under a ``## `[table]` `` heading of a generated reference."""
    found: set[tuple[str, str]] = set()
    table = None
    for line in markdown.splitlines():
        if heading := re.match(r"^#+ (?:`\[(.+)\]`|Top level)$", line):
            table = heading.group(1) or ""
        elif (row := re.match(r"^\| `([a-z_0-9]+)` \| .+ \| (.*) \|$", line)) and table is not None:
            found.add((table, row.group(1)))
    return found


def test_the_configuration_reference_names_every_setting_of_the_config_model() -> None:
    expected = set()
    for name, field in YuijuConfig.model_fields.items():
        assert isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
        expected |= _settings(field.annotation, name)

    assert _documented(hooks().config_reference()) == expected
    assert ("chat.groups.<id>", "reply") in expected and ("llm", "base_url") in expected


def test_every_setting_in_the_configuration_reference_says_what_it_does() -> None:
    undocumented = [
        line
        for line in hooks().config_reference().splitlines()
        if line.startswith("| `") and line.endswith("|  |")
    ]
    assert undocumented == []


def test_the_card_reference_names_every_field_of_a_card() -> None:
    assert _documented(hooks().card_reference()) == _settings(CharacterCard, "")


def _parsers(
    parser: argparse.ArgumentParser,
) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _parsers(sub)
    return found


def test_the_cli_reference_has_every_command_with_every_option() -> None:
    reference = hooks().cli_reference()
    parsers = _parsers(build_parser())
    assert {p.prog for p in parsers} >= {"yuiju", "yuiju run", "yuiju memory search"}
    for parser in parsers:
        assert re.search(rf"^#+ `{re.escape(parser.prog)}`$", reference, flags=re.M), parser.prog
        for action in parser._actions:
            for option in action.option_strings:
                assert option in reference, (parser.prog, option)


def test_the_docs_pages_the_markers_name_are_generated_at_build_time() -> None:
    module = hooks()
    for name in module.GENERATED:
        pages = [p for p in DOCS.rglob("*.md") if f"<!-- generated: {name} -->" in p.read_text()]
        assert len(pages) == 1, name
        rendered = module.on_page_markdown(pages[0].read_text(encoding="utf-8"))
        assert "<!-- generated:" not in rendered and len(rendered) > 2000


def test_every_docs_page_opens_with_its_one_title() -> None:
    for page in DOCS.rglob("*.md"):
        if page.parent == DOCS / "incoming":
            continue
        text = page.read_text(encoding="utf-8")
        if included := re.match(r'--8<-- "([^"]+)"', text):  # a file included whole
            text = (ROOT / included.group(1)).read_text(encoding="utf-8") + text
        prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
        titles = re.findall(r"^# .+$", prose, flags=re.M)
        assert text.startswith("# ") and len(titles) == 1, (page, titles)
