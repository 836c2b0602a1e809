"""The plugin's state for one NoneBot driver (`Runtime`): built by `start` on the driver's start-up,
reached by the matchers through typed NoneBot dependencies (`RuntimeDep`, `ServiceDep`), ended by
`stop` on its shutdown. The chat core knows nothing of it.

How the service is built is chosen before the start (`build_with`): `yuiju bot` / `yuiju run`
give a factory over their stores and the tests one that builds nothing (each test installs its own
service); when nobody chose, the plugin builds her from its config, as inside someone else's
NoneBot app (`app.host_app_factory`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Final
from weakref import WeakKeyDictionary

from nonebot import get_driver
from nonebot.drivers import Driver
from nonebot.matcher import Matcher
from nonebot.params import Depends

from nonebot_plugin_yuiju.send import DirectChannels
from yuiju.message.bot import Closer
from yuiju.message.service import ChatService


@dataclass(frozen=True)
class Edge:
    """What the plugin hands the service it builds: where private replies go, and the closers
    run at shutdown."""

    direct_channels: DirectChannels = field(default_factory=DirectChannels)
    """Private channels people wrote from (the matchers note them, the sender answers there)."""
    on_stop: list[Closer] = field(default_factory=list)
    """Closers run last-first at shutdown (stores, proactive task)."""


ServiceFactory = Callable[[Edge], Awaitable[ChatService | None]]
"""Builds her chat service over the plugin's `Edge` at the driver's start-up (None: no service;
the tests install theirs)."""


class Runtime:
    """The plugin's state while one driver runs. (A plain class, not a dataclass: NoneBot checks a
    dependency's value with pydantic, which would rebuild a dataclass field by field.)"""

    __slots__ = ("edge", "service")

    def __init__(self, edge: Edge, service: ChatService | None = None) -> None:
        self.edge: Final = edge
        self.service: Final = service
        """None while it is being built, or when her chat does not run in this app."""


_factories: WeakKeyDictionary[Driver, ServiceFactory] = WeakKeyDictionary()
"""The factory chosen for each driver before its start (`build_with`)."""
_runtimes: WeakKeyDictionary[Driver, Runtime] = WeakKeyDictionary()
"""Each started driver's runtime, from its start-up hook to its shutdown hook."""


def build_with(factory: ServiceFactory, driver: Driver | None = None) -> None:
    """Build the service with ``factory`` when ``driver`` (the app's) starts."""
    _factories[driver or get_driver()] = factory


def chosen_factory(driver: Driver) -> ServiceFactory | None:
    """The factory `build_with` chose for ``driver``, if any."""
    return _factories.get(driver)


async def start(driver: Driver, factory: ServiceFactory | None) -> Runtime:
    """The driver's runtime, its service built by ``factory`` (none without one)."""
    edge = Edge()
    _runtimes[driver] = Runtime(edge)  # a build that fails half-way still has its closers run
    runtime = _runtimes[driver] = Runtime(edge, await factory(edge) if factory else None)
    return runtime


def stop(driver: Driver) -> Edge | None:
    """End the driver's runtime; its `Edge` (whose closers the caller runs), if it had one."""
    runtime = _runtimes.pop(driver, None)
    return runtime.edge if runtime is not None else None


def install(runtime: Runtime | None, driver: Driver | None = None) -> Runtime | None:
    """Put ``runtime`` in place of the driver's own (None: none) and return the one before: for
    tests, which install a service of their own (tests/conftest.py's ``install_service``)."""
    driver = driver or get_driver()
    before = _runtimes.pop(driver, None)
    if runtime is not None:
        _runtimes[driver] = runtime
    return before


async def current_runtime() -> Runtime:
    """The plugin's runtime on this app's driver (the NoneBot dependency behind `RuntimeDep`)."""
    runtime = _runtimes.get(get_driver())
    if runtime is None:
        raise RuntimeError(
            "nonebot_plugin_yuiju has not started on this driver: its runtime is built by the "
            "driver's start-up hook (nonebot.run(), or the ASGI app's lifespan)"
        )
    return runtime


RuntimeDep = Annotated[Runtime, Depends(current_runtime)]
"""A handler's parameter type for the plugin's runtime."""


async def chat_service(runtime: RuntimeDep, matcher: Matcher) -> ChatService:
    """The running chat service (the NoneBot dependency behind `ServiceDep`); without one the
    handler is skipped. (Async: NoneBot runs a plain function dependency in a thread.)"""
    if runtime.service is None:
        matcher.skip()
    return runtime.service


ServiceDep = Annotated[ChatService, Depends(chat_service)]
"""A handler's parameter type for her chat service (handlers are skipped while there is none)."""
