"""The file `yuiju init` writes: the snippets of the README and the docs paste into it, and every
setting in it can be switched on by uncommenting it."""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from yuiju import cli as yuiju_cli
from yuiju.config import ConfigError, YuijuConfig, load_config

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SETTING = re.compile(r"^# ([a-z_]+) = ")
HEADER = re.compile(r"^(# )?\[([a-z_.0-9]+)\]\s*$")


pytestmark = pytest.mark.usefixtures("clean_config_env")


def toml_snippets() -> list[str]:
    """The TOML blocks for yuiju.toml in the README and the docs (not those for a NoneBot bot's
    pyproject.toml, nor a file the docs include whole, such as a character card)."""
    blocks = [
        block
        for page in PAGES
        for block in re.findall(r"```toml\n(.*?)```", page.read_text("utf-8"), flags=re.DOTALL)
    ]
    return [b for b in blocks if "[tool." not in b and "--8<--" not in b]


def init_file(tmp_path: Path) -> Path:
    path = tmp_path / "yuiju.toml"
    assert yuiju_cli.main(["--config", str(path), "init"]) == 0
    return path


def leaves(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(leaves(value, (*prefix, key)))
        else:
            out[(*prefix, key)] = value
    return out


def test_the_readme_and_docs_have_snippets_to_paste() -> None:
    assert len(toml_snippets()) >= 9  # every block the 965-line README had, and its own


@pytest.mark.parametrize("snippet", toml_snippets(), ids=lambda s: s.splitlines()[0][:40])
def test_each_readme_snippet_pasted_at_the_end_of_a_new_file_takes_effect(
    tmp_path: Path, snippet: str
) -> None:
    path = init_file(tmp_path)
    path.write_text(path.read_text(encoding="utf-8") + "\n" + snippet, encoding="utf-8")

    cfg = load_config(path, environ={})

    loaded = cfg.model_dump(mode="json")
    for keys, value in leaves(tomllib.loads(snippet)).items():
        node: Any = loaded
        for key in keys:
            node = node[key]
        if node == "**********":  # a secret (e.g. a URL with a password): compare what it holds
            node = functools.reduce(getattr, keys, cfg).get_secret_value()
        assert node == value, keys


def uncommented(lines: list[str], index: int) -> list[str]:
    """``lines`` with the commented setting at ``index`` switched on, as a user would: the setting
    (every line of it, for a multi-line array) and its section line."""
    out = list(lines)
    header = section_line(lines, index)
    out[header] = lines[header].removeprefix("# ")
    out[index] = lines[index].removeprefix("# ")
    end = index
    if out[index].rstrip().endswith("["):
        while not lines[end].startswith("# ]"):
            end += 1
            out[end] = lines[end].removeprefix("# ")
    return out


def section_line(lines: list[str], index: int) -> int:
    return next(i for i in range(index, -1, -1) if HEADER.match(lines[i]))


def test_uncommenting_any_setting_with_its_section_gives_a_valid_config(tmp_path: Path) -> None:
    path = init_file(tmp_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    shown = {f"{k[0]}.{k[1]}" for k in leaves(tomllib.loads("\n".join(lines)))}  # active ones

    for index, line in enumerate(lines):
        if not (setting := SETTING.match(line)):
            continue
        text = "\n".join(uncommented(lines, index)) + "\n"
        path.write_text(text, encoding="utf-8")
        load_config(path, environ={})  # valid TOML, and a valid config
        table = HEADER.match(lines[section_line(lines, index)]).group(2).split(".")  # type: ignore[union-attr]
        shown.add(f"{table[0]}.{table[1] if len(table) > 1 else setting.group(1)}")

    every = {
        f"{name}.{field}"
        for name, section in YuijuConfig.model_fields.items()
        for field in section.annotation.model_fields
    }  # type: ignore[union-attr]
    assert every - shown == set(), "settings the file does not show"


def test_no_setting_in_the_file_is_an_empty_assignment(tmp_path: Path) -> None:
    text = init_file(tmp_path).read_text(encoding="utf-8")
    assert not re.search(r"^(# )?[a-z_]+ =\s*$", text, flags=re.MULTILINE)
    assert "groups = {}" not in text


def test_a_new_file_gives_the_defaults_and_a_fresh_access_token(tmp_path: Path) -> None:
    first = load_config(init_file(tmp_path), environ={})
    (tmp_path / "yuiju.toml").unlink()
    second = load_config(init_file(tmp_path), environ={})

    assert first.onebot.access_token is not None and second.onebot.access_token is not None
    token = first.onebot.access_token.get_secret_value()
    assert len(token) >= 32 and token != second.onebot.access_token.get_secret_value()
    assert first.model_dump(exclude={"onebot"}) == YuijuConfig().model_dump(exclude={"onebot"})
    assert first.onebot.enabled is False


def test_a_setting_outside_its_section_says_where_it_belongs(tmp_path: Path) -> None:
    path = tmp_path / "yuiju.toml"
    path.write_text('base_url = "https://api.deepseek.com/v1"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[llm\]"):
        load_config(path, environ={})


def test_a_section_declared_twice_says_to_merge_them(tmp_path: Path) -> None:
    path = init_file(tmp_path)
    path.write_text(
        path.read_text(encoding="utf-8") + "\n[onebot]\nenabled = true\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"\[onebot\].*(once|merge)"):
        load_config(path, environ={})
