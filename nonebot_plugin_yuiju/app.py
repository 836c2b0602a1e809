"""Starting her chat in NoneBot: `yuiju bot` (its own process), `yuiju run` (inside the daemon's
loop), and the plugin inside someone else's NoneBot app (`host_app_factory`, on that app's
start-up). Each builds the chat service with the plugin's sender (`send.NoneBotSender`) over the
plugin's `runtime.Edge`, on the driver's start-up (`runtime.start`).

NapCat/Lagrange connect to the reverse WebSocket ``ws://HOST:PORT/onebot/v11/ws``; the Satori,
Telegram and Feishu adapters connect out (Feishu's HTTP callbacks come in on the same server).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from nonebot_plugin_yuiju.runtime import Edge, ServiceFactory, build_with
from yuiju.message.bot import build_service
from yuiju.message.service import ChatService

if TYPE_CHECKING:
    import asyncio

    import uvicorn
    from nonebot.config import Config as NoneBotConfig

    from yuiju.config import YuijuConfig

log = logging.getLogger(__name__)

STOP_SECONDS = 1.0
"""About the most a stop of the bot takes: open requests, then each shutdown hook, are bounded."""


def require_nonebot() -> None:
    """nonebot must be initialised, with the platforms' adapters and this plugin loaded, before the
    `message` package is first imported (nonebot's loader refuses a module imported earlier):
    `yuiju.cli.init_nonebot` does that; tests do it in conftest."""
    import nonebot

    try:
        nonebot.get_driver()
    except ValueError:
        raise RuntimeError(
            "nonebot is not initialised: call yuiju.cli.init_nonebot(cfg) first"
        ) from None
    if nonebot.get_plugin("nonebot_plugin_yuiju") is None:
        raise RuntimeError(
            "the plugin nonebot_plugin_yuiju is not loaded: call yuiju.cli.init_nonebot(cfg) first"
        )


async def _build(cfg: YuijuConfig, edge: Edge, **shared: Any) -> ChatService:
    """The chat service with this plugin's sender and group management."""
    from nonebot_plugin_yuiju.send import NoneBotGroups, NoneBotSender

    return await build_service(
        cfg,
        sender=NoneBotSender(direct=edge.direct_channels),
        groups=NoneBotGroups(),
        on_stop=edge.on_stop,
        **shared,
    )


def run_bot(cfg: Any) -> None:
    """`yuiju bot`: the nonebot app in this process until interrupted."""
    import signal
    import sys

    import nonebot

    require_nonebot()
    build_with(lambda edge: _build(cfg, edge))
    _watch_loop_lag(cfg.app.loop_lag_warn_ms)
    # uvicorn stops the app on SIGTERM and then raises the signal again for the handler it found
    # installed: with the default one the process would die of it (status -15, a crash to a
    # supervisor). This one ends the process with 0, as `yuiju run` does, also before uvicorn runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    nonebot.run()


def _watch_loop_lag(warn_ms: int) -> None:
    """The event-loop lag monitor (`yuiju_tasks.LoopLagMonitor`) for the app's lifetime."""
    import nonebot

    from yuiju.tasks import LoopLagMonitor

    monitor = LoopLagMonitor(warn_ms)

    async def start() -> None:  # a coroutine: nonebot runs plain functions in a thread
        monitor.start()

    driver = nonebot.get_driver()
    driver.on_startup(start)
    driver.on_shutdown(monitor.stop)


class BotServer:
    """The nonebot ASGI app on uvicorn as a task in the daemon's loop: `url`, `lines`, `stop`."""

    def __init__(
        self,
        server: uvicorn.Server,
        task: asyncio.Task[None],
        url: str,
        *,
        host: str = "",
        lines: list[str] | None = None,
    ) -> None:
        self.server = server
        self.task = task
        self.url = url
        """OneBot's reverse WebSocket on the server's real port."""
        self.host = host
        self.lines = lines or [f"QQ 机器人 bot: NapCat/Lagrange connect to {url}"]
        """What to print at start-up: one line per platform, where it connects (no secrets)."""

    def request_stop(self) -> None:
        """Begin stopping (`stop` waits for it): replies in flight are given up now."""
        from nonebot_plugin_yuiju.matchers import STOPPING

        STOPPING.set()
        self.server.should_exit = True

    async def stop(self) -> None:
        """Close the WebSocket, run the shutdown hooks (proactive task), release the port: within
        about `STOP_SECONDS`, whatever the hooks wait on."""
        from yuiju.tasks import finish

        self.request_stop()
        await finish(self.task, grace=STOP_SECONDS, what="the chat bot")


async def serve_bot(
    cfg: YuijuConfig, *, describe: Callable[[str, int], list[str]] | None = None, **shared: Any
) -> BotServer:
    """Inside `yuiju run`: the nonebot ASGI app on uvicorn in the running loop, sharing the
    daemon's open stores, memory and clock (``shared``: `build_service`'s keywords). Returns once
    the chat service is built and the port listens; raises `OSError` when the port is taken and
    `RuntimeError` when start-up failed (the log says why). ``describe(host, port)`` gives the
    start-up lines of its platforms (`BotServer.lines`) once the real port is known."""
    import asyncio
    import socket

    import nonebot
    import uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Any:
            yield  # the daemon owns SIGINT/SIGTERM (they stop the engine, which stops us)

    require_nonebot()

    async def factory(edge: Edge) -> ChatService:
        return await _build(cfg, edge, **shared)

    build_with(factory)
    host, port = cfg.onebot.host, cfg.onebot.port
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    port = sock.getsockname()[1]
    server = _Server(
        uvicorn.Config(
            nonebot.get_asgi(),
            log_config=None,
            access_log=False,
            lifespan="on",
            # uvicorn annotates an int but waits any number of seconds (asyncio.wait_for)
            timeout_graceful_shutdown=STOP_SECONDS / 2,  # type: ignore[arg-type]
            log_level="warning",
        )
    )
    task = asyncio.create_task(server.serve(sockets=[sock]), name="qq-bot")
    while not server.started and not task.done():  # noqa: ASYNC110 (uvicorn has no started event)
        await asyncio.sleep(0.01)
    if task.done():
        task.result()  # raise what stopped it
        raise RuntimeError("the chat bot did not start (its start-up failed; see the log above)")
    shown = f"[{host}]" if ":" in host else host
    url = f"ws://{shown}:{port}/onebot/v11/ws"
    return BotServer(server, task, url, host=host, lines=describe(host, port) if describe else None)


# -- the plugin inside someone else's NoneBot app ---------------------------------------------------

YUIJU_LOGGERS = ("yuiju", "nonebot_plugin_yuiju")
"""Our top-level loggers, sent into the app's log when the plugin runs inside a NoneBot app."""


async def host_app_factory() -> ServiceFactory | None:
    """On the NoneBot app's start-up, when nobody chose how to build her (`yuiju bot`/`yuiju run`
    and the tests do, with `runtime.build_with`): her settings come from the plugin config
    (`nonebot_plugin_yuiju.config.Config`), and the factory returned starts her chat service and
    proactive posts with the app (None: her chat is off); the world engine does not start
    (`yuiju world` runs it, on the same stores)."""
    import nonebot

    from nonebot_plugin_yuiju.config import Config

    plugin = nonebot.get_plugin_config(Config)
    if not plugin.yuiju_chat_enabled:
        return None
    host = nonebot.get_driver().config
    cfg = host_app_settings(plugin.yuiju_config, host.model_dump())
    _log_through_nonebot(cfg.app.log_level)
    if problem := host_token_problem(
        host, allow_no_token=cfg.onebot.allow_no_token, adapters=set(nonebot.get_adapters())
    ) or host_telegram_problem(host):
        raise RuntimeError(problem)
    log.info(
        "yuiju chat starts with this NoneBot app (%s): %s",
        plugin.yuiju_config or "no yuiju_config",
        json.dumps(cfg.summary(), ensure_ascii=False),
    )
    # what would otherwise look like a plugin that does nothing
    if not cfg.llm.configured:
        log.warning("[llm] base_url is not set: she records messages but answers none")
    if not (
        cfg.chat.groups
        or cfg.chat.default_group.enabled
        or cfg.chat.private_whitelist
        or cfg.chat.admins
    ):
        log.warning("no [chat.groups] entry, private_whitelist or admin: she answers no one")

    if (
        cfg.memory.enabled
    ):  # importing ONNX Runtime holds the GIL ~1 s: now, not at her first recall
        from yuiju.memory.service import preload_embedder

        preload_embedder(cfg)

    async def factory(edge: Edge) -> ChatService:
        return await _build(cfg, edge)

    return factory


def host_app_settings(
    path: str | None, host_config: dict[str, Any], environ: dict[str, str] | None = None
) -> Any:
    """Her `YuijuConfig` inside a NoneBot app: the TOML file at ``path``, then the app's .env lines
    ``YUIJU_<SECTION>__<FIELD>`` (NoneBot keeps them as ``yuiju_<section>`` dicts in its config),
    then the process environment; raises `yuiju.config.ConfigError` naming the key and the fix."""
    from yuiju.config import load_config

    dotenv = {
        name.removeprefix("yuiju_"): value
        for name, value in host_config.items()
        if name.startswith("yuiju_") and isinstance(value, dict)
    }
    return load_config(path, environ=environ, dotenv=dotenv)


def host_token_problem(
    host_config: NoneBotConfig,
    *,
    allow_no_token: bool,
    adapters: Collection[str] = ("OneBot V11",),
) -> str | None:
    """Why her chat must not start in this NoneBot app, or None: without ONEBOT_ACCESS_TOKEN
    whoever reaches its port connects as the QQ side and speaks as any QQ user, her admins included.
    ``adapters``: the app's (by name); without OneBot v11 there is no QQ side to pose as."""
    from yuiju.config import LOOPBACK_HOSTS

    if "OneBot V11" not in adapters or getattr(host_config, "onebot_access_token", None):
        return None
    host = str(getattr(host_config, "host", "127.0.0.1"))
    if host not in LOOPBACK_HOSTS:
        return (
            f"this NoneBot app listens on {host} without ONEBOT_ACCESS_TOKEN: whoever reaches its port "
            "could connect as the QQ side and speak as any QQ user, her admins included. Set "
            "ONEBOT_ACCESS_TOKEN=<a long random string> in the bot's .env and the same token in "
            "NapCat/Lagrange"
        )
    if allow_no_token:
        log.warning(
            "this NoneBot app accepts OneBot connections without an access token "
            "(YUIJU_ONEBOT__ALLOW_NO_TOKEN=true): any process on this machine can connect as the QQ "
            "side and speak as any QQ user, her admins included. Set ONEBOT_ACCESS_TOKEN for real use."
        )
        return None
    return (
        "this NoneBot app has no ONEBOT_ACCESS_TOKEN: any process on this machine could connect as the "
        "QQ side and speak as any QQ user, her admins included. Set ONEBOT_ACCESS_TOKEN=<a long random "
        "string> in the bot's .env and the same token in NapCat/Lagrange; for a local experiment only, "
        "YUIJU_ONEBOT__ALLOW_NO_TOKEN=true instead"
    )


def host_telegram_problem(host_config: NoneBotConfig) -> str | None:
    """Why a bot of the app's TELEGRAM_BOTS has no usable token, or None: the rule of
    `yuiju bot`'s ``[telegram] token`` (`yuiju.config.telegram_token_problem`)."""
    from yuiju.config import telegram_token_problem

    for i, bot in enumerate(getattr(host_config, "telegram_bots", None) or []):
        token = bot.get("token") if isinstance(bot, dict) else getattr(bot, "token", None)
        if problem := telegram_token_problem(str(token or ""), f"TELEGRAM_BOTS[{i}].token"):
            return problem
    return None


def _log_through_nonebot(level: str) -> None:
    """Her log lines into the app's (loguru) log, unless the app set up standard logging itself."""
    if logging.getLogger().handlers:
        return
    from nonebot.log import LoguruHandler

    for name in YUIJU_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(level)
        if not any(isinstance(h, LoguruHandler) for h in logger.handlers):
            logger.addHandler(LoguruHandler())
