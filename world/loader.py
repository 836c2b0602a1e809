"""Discovery: action modules by folder (after nonebot's plugin loader), evolutions by name.

Every `Action` at a module's top level is collected, and so is every `Action` inside a top-level
list or tuple (actions generated in a loop, such as the town's movements).

- Modules whose name starts with ``_`` are never imported (``_template.py``).
- A module that fails to import is reported and skipped; the others still load.
- Two actions with the same id (or the same Chinese name) stop start-up with both places named.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import pkgutil
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from yuiju.world.action import Action
from yuiju.world.errors import ActionLoadError, ConfigurationError

log = logging.getLogger(__name__)


@dataclass
class Catalogue:
    """Every loaded action, and what went wrong while loading."""

    actions: dict[str, Action] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    """Action id → module it came from."""
    broken: dict[str, str] = field(default_factory=dict)
    """Module → the error that stopped it from loading."""

    def by_name_or_id(self, key: str) -> Action | None:
        found = self.actions.get(key)
        if found is not None:
            return found
        return next((a for a in self.actions.values() if a.name == key), None)

    def __iter__(self) -> Iterator[Action]:
        return iter(self.actions.values())

    def __len__(self) -> int:
        return len(self.actions)


_OLD_TOP_LEVEL = ("world.", "memory.", "message.", "llm.", "storage.", "web.", "actions.")
"""Our packages' names before they moved under ``yuiju.``."""
_OLD_IMPORT_FIX = (
    "yuiju's packages are now under yuiju.: write `from yuiju.world.action import ...`"
)


def _check_imports_yuiju(module: ModuleType) -> None:
    """An action module that imported the author API by its old name (``from world.action import``,
    which resolves only from the project folder) made actions of another class: say so."""
    for value in vars(module).values():
        if type(value).__name__ == "Action" and f"{type(value).__module__}.".startswith(
            _OLD_TOP_LEVEL
        ):
            raise ActionLoadError(
                f"{module.__name__} uses {type(value).__module__}; {_OLD_IMPORT_FIX}"
            )


def _modules_in_package(package: str) -> Iterable[tuple[str, Callable[[], ModuleType]]]:
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        name = f"{package}.{info.name}"
        yield name, functools.partial(importlib.import_module, name)


def _modules_in_dir(folder: Path) -> Iterable[tuple[str, Callable[[], ModuleType]]]:
    if not folder.is_dir():
        raise ConfigurationError(
            f"action folder {str(folder)!r} does not exist; fix [world].action_dirs"
        )
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        name = f"yuiju_user_actions.{folder.name}.{path.stem}"

        def load(path: Path = path, name: str = name) -> ModuleType:
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)
                raise
            return module

        yield str(path), load


def load_actions(
    package: str | None = "yuiju.actions", extra_dirs: Iterable[Path] = ()
) -> Catalogue:
    """Import every action module and collect the `Action` objects at their top level."""
    catalogue = Catalogue()
    sources: list[tuple[str, Callable[[], ModuleType]]] = []
    if package:
        sources += list(_modules_in_package(package))
    for folder in extra_dirs:
        sources += list(_modules_in_dir(Path(folder)))
    names: dict[str, str] = {}
    for origin, load in sources:
        try:
            module = load()
            _check_imports_yuiju(module)
        except Exception as exc:  # a user module may raise anything; report and go on
            catalogue.broken[origin] = "".join(traceback.format_exception_only(exc)).strip()
            if isinstance(exc, ModuleNotFoundError) and f"{exc.name}.".startswith(_OLD_TOP_LEVEL):
                catalogue.broken[origin] += f"; {_OLD_IMPORT_FIX}"
            log.error(
                "action module %s failed to load and is skipped: %s",
                origin,
                catalogue.broken[origin],
            )
            continue
        found: list[Action] = []
        for value in vars(module).values():
            if isinstance(value, Action):
                found.append(value)
            elif isinstance(value, list | tuple):  # e.g. movements generated from the town's links
                found.extend(v for v in value if isinstance(v, Action))
        for obj in found:
            if catalogue.actions.get(obj.id) is obj:
                continue
            if obj.id in catalogue.actions:
                raise ActionLoadError(
                    f"duplicate action id {obj.id!r}: defined in {catalogue.origins[obj.id]} and in "
                    f"{origin}; rename one of them"
                )
            if obj.name in names:
                raise ActionLoadError(
                    f"duplicate action name {obj.name!r}: used by {names[obj.name]!r} and {obj.id!r} "
                    f"(in {origin}); the model answers by name, so names must be unique"
                )
            catalogue.actions[obj.id] = obj
            catalogue.origins[obj.id] = origin
            names[obj.name] = obj.id
    _check_labels(catalogue)
    return catalogue


def _check_labels(catalogue: Catalogue) -> None:
    """A label stands for its action among the candidates of one place: it must not be another
    action's name, nor the label of another action at the same place."""
    for action in catalogue:
        if action.label is None:
            continue
        for other in catalogue:
            if other is not action and (
                other.name == action.label
                or (other.label == action.label and other.at == action.at)
            ):
                raise ActionLoadError(
                    f"action {action.id!r} ({catalogue.origins[action.id]}) is offered as "
                    f"{action.label!r}, which {other.id!r} ({catalogue.origins[other.id]}) also goes by; "
                    "the model answers with it, so give one of them another label or name"
                )


def resolve(dotted: str) -> Any:
    """``"yuiju.world.evolutions:drift_needs"`` → the object; a clear error when it is not there.

    A name from before the ``yuiju.`` namespace (``world.evolutions:drift_needs``) still resolves,
    with a warning that says how to write it now."""
    module_name, _, attr = dotted.partition(":")
    if module_name.startswith(_OLD_TOP_LEVEL):
        log.warning("[world].evolutions: %r is an old name; write %r", dotted, f"yuiju.{dotted}")
        module_name = f"yuiju.{module_name}"
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r} (from {dotted!r}): {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigurationError(
            f"{module_name!r} has no {attr!r} (from {dotted!r}); check [world].evolutions"
        ) from None
