"""MkDocs hook: the reference pages are rendered from the code at build time, so they cannot drift.

A page holds a marker (``<!-- generated: config-reference -->``) where the generated text goes:
the configuration reference from the config model's field docstrings (`yuiju.config`), the
character card's fields from its model (`yuiju.characters`), and the CLI reference from the
``yuiju`` command's argparse parser (`yuiju.cli.build_parser`). tests/test_docs.py checks that
they name every setting and every command.
"""

from __future__ import annotations

import argparse
import html
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:  # a fresh clone: build from the source next to this file
    sys.path.insert(0, str(ROOT / "src"))


def _cell(text: str | None) -> str:
    """A docstring as one Markdown table cell: one line, ``|`` escaped, ``<`` kept as text
    outside code spans."""
    parts = " ".join((text or "").split()).replace("|", "\\|").split("`")
    return "`".join(p if i % 2 else html.escape(p, quote=False) for i, p in enumerate(parts))


def _one_line(toml: str) -> str:
    """A TOML value `yuiju init` writes over several lines (a long list) on one line."""
    if "\n" not in toml:
        return toml
    return (
        " ".join(line.strip() for line in toml.splitlines()).replace("[ ", "[").replace(", ]", "]")
    )


Table = tuple[str, str | None, list[tuple[str, str, str]]]
"""A TOML table as the reference shows it: its name, its doc, and (setting, default, doc) rows."""


def model_tables(
    table: str, model: type[BaseModel], defaults: BaseModel | None, doc: str | None = None
) -> list[Table]:
    """``model`` as the table ``table`` and, after it, its sub-tables (a nested model,
    ``[chat.default_group]``; a table of models, ``[chat.groups.<id>]``), in the order
    `yuiju init` writes them (``table`` empty: the top level of the file). ``defaults`` holds
    the defaults (None: the fields' own)."""
    from yuiju.config import _dict_value_model, _toml_value  # values as `yuiju init` writes them

    rows: list[tuple[str, str, str]] = []
    later: list[Table] = []
    for name, field in model.model_fields.items():
        sub = f"{table}.{name}" if table else name
        if field.is_required():
            rows.append((name, "required", _cell(field.description)))
            continue
        value = (
            getattr(defaults, name)
            if defaults is not None
            else field.get_default(call_default_factory=True)
        )
        if isinstance(value, BaseModel):
            later += model_tables(sub, type(value), value, field.description)
        elif (item_model := _dict_value_model(field.annotation)) is not None:
            later += model_tables(f"{sub}.<id>", item_model, None, field.description)
        else:
            example = (
                f" (e.g. `{_one_line(_toml_value(field.examples[0]))}`)" if field.examples else ""
            )
            shown = f"`{_one_line(_toml_value(value))}`" if value is not None else f"unset{example}"
            rows.append((name, shown, _cell(field.description)))
    return [(table, doc, rows), *later]


def render_tables(tables: list[Table], level: int = 2) -> str:
    out: list[str] = []
    for table, doc, rows in tables:
        out += [f"{'#' * level} " + (f"`[{table}]`" if table else "Top level"), ""]
        if doc:
            out += [_cell(doc), ""]
        if rows:
            out += ["| setting | default | what it does |", "|---|---|---|"]
            out += [f"| `{name}` | {default} | {text} |" for name, default, text in rows]
            out.append("")
    return "\n".join(out)


def config_reference() -> str:
    """Every setting of yuiju.toml, by section, with its default and its docstring."""
    from yuiju.config import YuijuConfig

    defaults = YuijuConfig()
    return render_tables(
        [
            table
            for name, field in YuijuConfig.model_fields.items()
            for table in model_tables(
                name, type(getattr(defaults, name)), getattr(defaults, name), field.description
            )
        ]
    )


def card_reference() -> str:
    """Every field of a character card (characters/<id>/card.toml)."""
    from yuiju.characters import CharacterCard

    return render_tables(model_tables("", CharacterCard, None), level=3)


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield helps.get(name) or "", sub


def cli_reference() -> str:
    """``yuiju --help`` and every subcommand's help, as argparse prints it (100 columns)."""
    from yuiju.cli import build_parser

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse's HelpFormatter reads the width from here
    try:
        out: list[str] = []

        def add(parser: argparse.ArgumentParser, level: int, summary: str) -> None:
            out.extend([f"{'#' * level} `{parser.prog}`", ""])
            if summary:
                out.extend([_cell(summary[0].upper() + summary[1:]) + ".", ""])
            out.extend(["```text", parser.format_help().rstrip(), "```", ""])
            for text, sub in _subcommands(parser):
                add(sub, min(level + 1, 3), text)

        add(build_parser(), 2, "")
        return "\n".join(out)
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


GENERATED: dict[str, Callable[[], str]] = {
    "config-reference": config_reference,
    "card-reference": card_reference,
    "cli-reference": cli_reference,
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    for name, render in GENERATED.items():
        marker = f"<!-- generated: {name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return markdown
