"""Discovery of action modules by folder, and of evolutions by dotted name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from yuiju.world.errors import ActionLoadError, ConfigurationError
from yuiju.world.evolutions import drift_needs
from yuiju.world.loader import load_actions, resolve

HERE = Path(__file__).parent
ROOT = HERE.parent
FIXTURES = HERE / "fixture_actions"
DUPLICATES = HERE / "fixture_actions_dup"


def test_a_folder_loads_its_good_modules_and_skips_underscore_ones() -> None:
    catalogue = load_actions(package=None, extra_dirs=[FIXTURES])

    assert list(catalogue.actions) == ["water_plants"]
    assert catalogue.origins["water_plants"] == str(FIXTURES / "good.py")
    assert catalogue.by_name_or_id("给花浇水") is catalogue.actions["water_plants"]
    assert catalogue.by_name_or_id("water_plants") is catalogue.actions["water_plants"]
    assert catalogue.by_name_or_id("游泳") is None
    assert not any(
        "_hidden" in origin for origin in [*catalogue.origins.values(), *catalogue.broken]
    )


def test_a_broken_module_is_reported_and_the_others_still_load(
    caplog: pytest.LogCaptureFixture,
) -> None:
    catalogue = load_actions(package=None, extra_dirs=[FIXTURES])

    assert set(catalogue.broken) == {str(FIXTURES / "broken.py")}
    assert "RuntimeError: boom" in catalogue.broken[str(FIXTURES / "broken.py")]
    assert "half_done" not in catalogue.actions
    assert "broken.py" in caplog.text


def test_built_in_and_extra_folders_load_together() -> None:
    built_in = load_actions()
    both = load_actions(extra_dirs=[FIXTURES])

    assert set(both.actions) == set(built_in.actions) | {"water_plants"}


def test_a_duplicate_id_stops_loading_and_names_both_modules() -> None:
    with pytest.raises(ActionLoadError) as caught:
        load_actions(package=None, extra_dirs=[DUPLICATES])

    message = str(caught.value)
    assert "'stretch'" in message
    assert str(DUPLICATES / "a.py") in message and str(DUPLICATES / "b.py") in message


@pytest.mark.parametrize("path_entry", [False, True], ids=["elsewhere", "in the project folder"])
def test_an_action_module_importing_the_api_by_its_old_name_is_reported_with_the_fix(
    tmp_path: Path, path_entry: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "old.py").write_text(
        "from world.action import Action\n"
        "nap = Action(id='nap_on_desk', name='趴着', description='趴在桌上。', duration=10)\n",
        encoding="utf-8",
    )
    if not path_entry:  # tests run from the project folder, where `world` is importable
        monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p or ".").resolve() != ROOT])
        monkeypatch.delitem(sys.modules, "world", raising=False)
    catalogue = load_actions(extra_dirs=[tmp_path])
    [why] = catalogue.broken.values()
    assert "from yuiju.world.action import" in why and "nap_on_desk" not in catalogue.actions


def test_a_duplicate_chinese_name_stops_loading(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "from yuiju.world.action import Action\n"
        "nap = Action(id='nap_on_desk', name='发呆', description='趴在桌上。', duration=10)\n",
        encoding="utf-8",
    )
    with pytest.raises(ActionLoadError, match=r"'发呆'.*'idle'.*'nap_on_desk'"):
        load_actions(extra_dirs=[tmp_path])


def test_an_action_id_clashing_with_a_built_in_one_names_both(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "from yuiju.world.action import Action\n"
        "idle2 = Action(id='idle', name='放空', description='放空。', duration=10)\n",
        encoding="utf-8",
    )
    with pytest.raises(ActionLoadError, match=r"'idle'.*actions\.anywhere.*mine\.py"):
        load_actions(extra_dirs=[tmp_path])


def test_a_label_that_is_another_actions_name_stops_loading(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "from yuiju.world.action import Action\n"
        "stroll = Action(id='stroll', name='在家附近转转', label='发呆', description='转一圈。', duration=10)\n",
        encoding="utf-8",
    )
    with pytest.raises(ActionLoadError, match=r"'stroll'.*offered as '发呆'.*'idle'"):
        load_actions(extra_dirs=[tmp_path])


def test_two_actions_of_one_place_cannot_share_a_label(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "from yuiju.world.action import Action\n"
        "a = Action(id='tidy_desk', name='收拾书桌', label='收拾', at='home', description='收拾。', duration=10)\n"
        "b = Action(id='tidy_room', name='收拾房间', label='收拾', at='home', description='收拾。', duration=10)\n"
        "c = Action(id='tidy_locker', name='收拾储物柜', label='收拾', at='school', description='收拾。', duration=10)\n",
        encoding="utf-8",
    )
    with pytest.raises(ActionLoadError, match=r"'tidy_desk'.*'收拾'.*'tidy_room'"):
        load_actions(package=None, extra_dirs=[tmp_path])
    (tmp_path / "mine.py").write_text(
        (tmp_path / "mine.py").read_text().replace("b = Action", "# b = Action")
    )
    assert {"tidy_desk", "tidy_locker"} <= set(
        load_actions(package=None, extra_dirs=[tmp_path]).actions
    )


def test_a_missing_action_folder_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="action_dirs"):
        load_actions(package=None, extra_dirs=[tmp_path / "nope"])


def test_resolve_finds_an_evolution_by_dotted_name() -> None:
    assert resolve("yuiju.world.evolutions:drift_needs") is drift_needs


def test_an_evolution_named_before_the_yuiju_namespace_still_resolves_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert resolve("world.evolutions:drift_needs") is drift_needs
    assert "write 'yuiju.world.evolutions:drift_needs'" in caplog.text


@pytest.mark.parametrize(
    ("dotted", "says"),
    [
        ("yuiju.world.evolutions:no_such_thing", "has no 'no_such_thing'"),
        ("yuiju.world.no_such_module:drift_needs", "cannot import 'yuiju.world.no_such_module'"),
        ("nowhere_at_all:f", "cannot import 'nowhere_at_all'"),
    ],
)
def test_resolve_of_a_bad_name_is_a_configuration_error(dotted: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says) as caught:
        resolve(dotted)
    assert dotted in str(caught.value)
