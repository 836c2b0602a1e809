"""The ``yuiju`` command: run the daemon, simulate, inspect state and actions, write a config."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from yuiju.config import ConfigError, YuijuConfig, default_toml, load_config, resolve_path

if TYPE_CHECKING:
    from yuiju.llm import ChatModel
    from yuiju.memory.governance import Governance, Subject
    from yuiju.memory.semantic import SemanticMemory
    from yuiju.storage.redis import RedisClient
    from yuiju.world.clock import Clock, RealClock
    from yuiju.world.runtime import Runtime
    from yuiju.world.store import StateStore

log = logging.getLogger("yuiju")


class TownTimeFormatter(logging.Formatter):
    """Stamps a log line with the wall-clock time in the town's zone and its offset
    (``08:40:41+08:00``): on a server in UTC the log then reads like the panel's clock whenever
    world time runs with real time, and says which zone it is in. Not world time: a log line
    says when something happened to the process (a start, an outage), which other programs'
    logs and the user's own clock tell in wall time, and which a sped-up world would move
    hours or days away from them; the panel says how far world time is ahead."""

    def __init__(self, fmt: str, tz: tzinfo | None) -> None:
        super().__init__(fmt)
        self.tz = tz

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        stamp = datetime.fromtimestamp(record.created, self.tz).astimezone(self.tz)
        return stamp.isoformat(timespec="seconds")[11:]  # after the date: 08:40:41+08:00


def _setup_logging(level: str, *, tz: tzinfo | None = None, stream: Any = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(TownTimeFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s", tz))
    logging.basicConfig(level=getattr(logging, level), handlers=[handler])
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # its job bookkeeping is noise here


def _fail(message: str) -> int:
    print(f"yuiju: {message}", file=sys.stderr)
    return 2


# -- init ---------------------------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    path = resolve_path(args.config)
    if path.exists() and not args.force:
        return _fail(f"{path} already exists; pass --force to overwrite it")
    path.write_text(default_toml(), encoding="utf-8")
    print(
        f"wrote {path}: every setting with its default and a comment, and a random [onebot] access_token "
        "for NapCat/Lagrange. Edit it, then `yuiju run`."
    )
    return 0


# -- actions --------------------------------------------------------------------------------------


def cmd_actions(args: argparse.Namespace, cfg: YuijuConfig) -> int:
    from yuiju.world.action_check import problems as action_problems
    from yuiju.world.errors import ConfigurationError
    from yuiju.world.loader import load_actions
    from yuiju.world.town import HAURA

    try:
        catalogue = load_actions("yuiju.actions", cfg.world.action_dirs)
    except ConfigurationError as exc:
        return _fail(str(exc))
    if args.action_cmd == "why":
        return asyncio.run(_actions_why(cfg, args.id, args.character))
    if args.action_cmd == "check":
        problems = [f"module {m}: {e}" for m, e in catalogue.broken.items()]
        problems += action_problems(catalogue, HAURA, cfg.app.tz)
        print(f"{len(catalogue)} actions from {len(set(catalogue.origins.values()))} modules")
        for problem in problems:
            print(f"  problem: {problem}")
        return 1 if problems else 0
    rows = [
        {
            "id": a.id,
            "name": a.name,
            "place": a.at,
            "tags": sorted(a.tags),
            "moves_to": a.moves_to,
            "share": a.share,
            "module": catalogue.origins[a.id],
            "description": a.description,
        }
        for a in catalogue
    ]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
    else:
        table = [
            [a.id, a.name, HAURA.place_name(a.at) if a.at else "任意", ",".join(sorted(a.tags))]
            for a in catalogue
        ]
        for line in columns(table):
            print(line)
    return 0


async def _actions_why(
    cfg: YuijuConfig, action_id: str, character_id: str | None, *, now: datetime | None = None
) -> int:
    """`yuiju actions why ID`: whether the action is offered to her now, and which of its
    preconditions hold and which do not, each in its own words. Now is her state in the stores
    (a fresh start from her card when nothing is saved) caught up to the present (``now``, the
    wall clock unless given) as the next step would see it; nothing is written."""
    import difflib

    from yuiju.storage.keys import Keys
    from yuiju.storage.redis import open_redis
    from yuiju.world.action_check import moment_at
    from yuiju.world.errors import CorruptState
    from yuiju.world.loader import load_actions
    from yuiju.world.runtime import character_from_card, load_cards, resolve_evolutions
    from yuiju.world.social import company_of
    from yuiju.world.store import StateStore, latest_saved_time
    from yuiju.world.town import HAURA

    catalogue = load_actions("yuiju.actions", cfg.world.action_dirs)
    action = catalogue.actions.get(action_id)
    if action is None:
        close = difflib.get_close_matches(action_id, list(catalogue.actions), n=3)
        return _fail(
            f"no action {action_id!r}"
            + (f" (did you mean {', '.join(close)}?)" if close else "")
            + "; `yuiju actions list` lists every action with its id"
        )
    towns = cfg.towns()
    cid = character_id or cfg.world.characters[0]
    prefix = next((p for p, town in towns.items() if cid in town.characters), None)
    if prefix is None:
        configured = [c for town in towns.values() for c in town.characters]
        return _fail(f"--character {cid!r} is not configured; the characters are {configured}")
    card = load_cards([cid])[cid]
    redis = await open_redis(
        cfg.redis.url.get_secret_value() if cfg.redis.url else None,
        cfg.data_path(),
        cluster=cfg.redis.cluster,
    )
    town_ids = list(towns[prefix].characters)
    try:
        store = StateStore(redis.client, Keys(prefix))
        world, character = await store.load(cid)
        others = await store.peek_characters([c for c in town_ids if c != cid])
    except CorruptState as exc:
        return _fail(str(exc))
    finally:
        await redis.aclose()
    wall = now or datetime.now(cfg.app.tz)
    saved = latest_saved_time(world, [character])
    fresh = character is None
    ctx = moment_at(
        max(wall, saved) if saved is not None else wall,  # world time never goes back
        world,
        character or character_from_card(card),
        town=HAURA,
        evolutions=[(e.name, e.fn) for e in resolve_evolutions(cfg.world.evolutions)],
        seed=cfg.world.seed if (seed := towns[prefix].seed) is None else seed,
    )
    ctx.company = company_of(  # who else is there, as her decision would see them
        ctx.character,
        [o for o in others.values() if o is not None],
        now=ctx.now,
        town=HAURA,
        action_of=catalogue.actions.get,
        names=_display_names(town_ids),
    )
    verdicts = action.precondition.verdicts(ctx)
    failing = sum(not v.holds for v in verdicts)
    where = f" @ {HAURA.place_name(action.at)}" if action.at else ""
    print(
        f"{action.id} {action.name}{where}: "
        + (
            f"not offered now, {failing} of {len(verdicts)} preconditions fail"
            if failing
            else "offered now, every precondition holds"
        )
    )
    print(
        f"  {card.name} ({cid}) at {ctx.now:%Y-%m-%d %H:%M} world time, in {ctx.place_name}, "
        + (
            "from a fresh start (nothing saved yet: her card's start)"
            if fresh
            else "from the saved state"
        )
    )
    if ctx.world.paused:
        print("  the world is paused: nothing is offered until it resumes")
    if (running := ctx.character.running) is not None:
        print(
            f"  she is busy with {running.name} until {running.ends_at.astimezone(cfg.app.tz):%H:%M}: "
            "nothing is offered before it ends"
        )
    for verdict in verdicts:
        print(f"  {'✓' if verdict.holds else '✗'} {verdict.text}")
    return 0


def display_width(text: str) -> int:
    """Terminal columns ``text`` takes: East Asian wide and full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def columns(table: list[list[str]], gap: int = 2) -> list[str]:
    """Rows of cells as lines whose columns line up on screen, padded by display width
    (``str.ljust`` counts a Chinese character as one column; a terminal shows two)."""
    widths = [max(map(display_width, column)) for column in zip(*table, strict=True)]
    return [
        "".join(
            cell + " " * (width - display_width(cell) + gap)
            for cell, width in zip(row, widths, strict=True)
        ).rstrip()
        for row in table
    ]


# -- status ---------------------------------------------------------------------------------------


PANEL_CHARACTERS = 12
"""Characters the status panel shows in full; past that it says how many more (``--json`` lists all)."""


def render_panel(
    world: Any,
    characters: dict[str, Any],
    now: datetime,
    town: Any,
    drivers: dict[str, str | None] | None = None,
) -> str:
    """The live terminal panel: world time, weather, and per character place, action, stats (and
    which worker drives her, when ``drivers`` is given)."""
    lines = []
    if world is None:
        return "世界还没有开始运行。"
    weather = f"{world.weather.type} {world.weather.temperature}" if world.weather else "未知"
    cal = world.calendar
    day = (
        f"{cal.weekday} {cal.period}{'（' + cal.holiday + '）' if cal and cal.holiday else ''}"
        if cal
        else ""
    )
    lines.append(
        f"羽浦町  {now:%Y-%m-%d %H:%M}  {day}  天气 {weather}{'  [已暂停]' if world.paused else ''}"
    )
    for cid, c in list(characters.items())[:PANEL_CHARACTERS]:
        driver = ""
        if drivers is not None:
            driver = f"  [由 {drivers[cid]} 驱动]" if drivers.get(cid) else "  [无人驱动]"
        if c is None:
            lines.append(f"  {cid}: （尚未创建）{driver}")
            continue
        lines.append(
            f"  {cid} @ {town.place_name(c.location)}{'（睡着）' if c.asleep else ''}{driver}"
        )
        if c.running:
            r = c.running
            total = max(1.0, (r.ends_at - r.started_at).total_seconds())
            done = min(1.0, max(0.0, (now - r.started_at).total_seconds() / total))
            bar = "#" * int(done * 20) + "." * (20 - int(done * 20))
            lines.append(
                f"    正在：{r.name}  [{bar}] {done:4.0%}  到 {r.ends_at.astimezone(now.tzinfo):%H:%M}"
            )
            lines.append(f"    原因：{r.reason}")
        elif c.blocked_reason:
            lines.append(f"    受阻：{c.blocked_reason}")
        lines.append(
            f"    体力 {c.stamina:5.1f}  饱腹 {c.satiety:5.1f}  心情 {c.mood:5.1f}  金币 {c.money}"
            + (f"  背包 {c.inventory}" if c.inventory else "")
        )
        lines.append("    " + "；".join(c.plans.lines()))
    if len(characters) > PANEL_CHARACTERS:
        lines.append(
            f"  ……还有 {len(characters) - PANEL_CHARACTERS} 个角色（`yuiju status --json` 列出全部）"
        )
    return "\n".join(lines)


async def panel_text(store: StateStore, character_ids: list[str], clock: RealClock) -> str:
    """The live panel of `yuiju run` as drawn now, from the stores. Its time never runs past
    what is saved while world time is ahead (`RealClock.shown`): a restart continues from the
    saved time, and what the user saw before Ctrl-C must not step back after it."""
    from yuiju.world.store import latest_saved_time
    from yuiju.world.town import HAURA

    world = await store.load_world()
    chars = {cid: await store.load_character(cid) for cid in character_ids}
    now = clock.shown(latest_saved_time(world, chars.values()))
    return render_panel(world, chars, now, HAURA) + clock_line(clock)


def clock_line(clock: Any) -> str:
    """The panel's note when world time is not the wall clock's (after a ``--speed`` run)."""
    from yuiju.world.clock import duration_text

    if (held := clock.holding_until) is not None:
        wait = duration_text(held - datetime.now(clock.tz))
        return f"\n  世界时间停在 {held:%H:%M}，等现实时间追上（还有 {wait}），之后与现实同步"
    if clock.lead() > timedelta(minutes=1):
        return f"\n  世界时间比现实快 {duration_text(clock.lead())}" + (
            "" if clock.speed != 1 else "（`yuiju run --resync` 回到现实时间）"
        )
    return ""


async def _status(cfg: YuijuConfig, as_json: bool) -> int:
    from yuiju.storage.keys import Keys
    from yuiju.world.commands import pending_view, queued_commands
    from yuiju.world.errors import CorruptState
    from yuiju.world.runtime import open_stores
    from yuiju.world.social import social_lines, social_view
    from yuiju.world.store import StateStore
    from yuiju.world.town import HAURA

    redis, history = await open_stores(cfg)
    try:
        stores = {prefix: StateStore(redis.client, Keys(prefix)) for prefix in cfg.towns()}
        store = stores[cfg.redis.prefix]
        workers = await store.workers()
        names = {token: str(info.get("name") or token[:8]) for token, (_, info) in workers.items()}
        towns: dict[str, dict[str, Any]] = {}
        try:
            for prefix, spec in cfg.towns().items():
                town = stores[prefix]
                holders = await town.lease_holders(spec.characters)
                ticker = await town.town_lease_holder()
                towns[prefix] = {
                    "world": await town.load_world(),
                    "characters": await town.load_characters(spec.characters),
                    "driven_by": {
                        cid: names.get(tok, tok[:8]) if tok else None
                        for cid, tok in holders.items()
                    },
                    "ticked_by": names.get(ticker, ticker[:8]) if ticker else None,
                    "episode_outbox": await town.outbox_size(),
                }
        except CorruptState as exc:
            return _fail(str(exc))
        world, chars = towns[cfg.redis.prefix]["world"], towns[cfg.redis.prefix]["characters"]
        outbox = towns[cfg.redis.prefix]["episode_outbox"]
        names = _display_names(list(chars))
        social = social_view(  # as of the world's own time (the engine may be stopped)
            chars,
            now=world.time if world is not None else datetime.now(cfg.app.tz),
            town=HAURA,
            names=names,
        )
        # what people asked in chat that the world has not reviewed yet (its next tick will)
        social["pending"] = pending_view(await queued_commands(redis.client, store.keys), names)
        dead = await store.dead_letter_count()
        dead_latest = await store.dead_letters(5) if dead else []
        if as_json:
            from yuiju.world.clock import duration_text

            wall = datetime.now(cfg.app.tz)

            def dump(value: Any) -> Any:
                return value.model_dump(mode="json") if value is not None else None

            def lead(world: Any) -> dict[str, Any] | None:
                """How far the saved world time is ahead of the wall clock, as the panel says it
                (0: it follows the wall clock; None: no world yet)."""
                if world is None:
                    return None
                ahead = max(timedelta(0), world.time - wall)
                return {"seconds": round(ahead.total_seconds()), "text": duration_text(ahead)}

            print(
                json.dumps(
                    {
                        "world": dump(world),
                        "world_time_lead": lead(world),
                        "characters": {k: dump(v) for k, v in chars.items()},
                        "social": social,
                        "episode_outbox": outbox,
                        "outbox_dead_letters": {
                            "count": dead,
                            "key": store.keys.outbox_dead,
                            "latest": dead_latest,
                        },
                        "stores": {"redis": redis.description, "history": history.backend},
                        "workers": [
                            {"token": token, "heartbeat_left_ms": left, **info}
                            for token, (left, info) in workers.items()
                        ],
                        "towns": {
                            prefix: {
                                **t,
                                "world": dump(t["world"]),
                                "world_time_lead": lead(t["world"]),
                                "characters": {k: dump(v) for k, v in t["characters"].items()},
                            }
                            for prefix, t in towns.items()
                        },
                    },
                    ensure_ascii=False,
                    indent=2,
                )
            )
        else:
            from yuiju.world.clock import duration_text
            from yuiju.world.store import latest_saved_time

            wall = datetime.now(cfg.app.tz)
            saved = latest_saved_time(world, chars.values())
            now = max(wall, saved) if saved is not None else wall  # world time never goes back
            print(
                render_panel(world, chars, now, HAURA, drivers=towns[cfg.redis.prefix]["driven_by"])
            )
            for line in social_lines(social, names, cfg.app.tz):
                print(line)
            for pending in social["pending"]:
                print(f"  待定：{pending['line']}（下一刻审核）")
            if now - wall > timedelta(minutes=1):
                print(
                    f"  世界时间比现实快 {duration_text(now - wall)}（上次加速运行留下的）；"
                    "`yuiju run` 从这里以正常速度继续，`yuiju run --resync` 等现实时间追上后回到现实时间"
                )
            print(f"  存储：{redis.description}；历史 {history.backend}；待写入 {outbox} 条")
            if dead:
                latest = dead_latest[-1]
                print(
                    f"  死信：{dead} 条队列记录无法写入历史，已移到 {store.keys.outbox_dead}"
                    f"（最近一条：{str(latest.get('entry'))[:60]!r} {latest.get('reason')}）"
                )
            print(_fleet_lines(towns, workers))
    finally:
        await history.close()
        await redis.aclose()
    return 0


def _display_names(character_ids: list[str]) -> dict[str, str]:
    """Each character's name from her card (her id when the card is missing)."""
    from yuiju.characters import CardError
    from yuiju.world.runtime import load_cards
    from yuiju.world.social import unique_names

    try:
        return unique_names({cid: card.name for cid, card in load_cards(character_ids).items()})
    except CardError:
        return {cid: cid for cid in character_ids}


def _fleet_lines(
    towns: dict[str, dict[str, Any]], workers: dict[str, tuple[int, dict[str, Any]]]
) -> str:
    """Who drives what: each town's world tick and undriven characters, then each live worker."""
    from yuiju.config import compact_character_ids

    lines = []
    for prefix, town in towns.items():
        world = town["world"]
        idle = [cid for cid, who in town["driven_by"].items() if who is None]
        lines.append(
            f"  小镇 {prefix}：{len(town['characters'])} 个角色，世界由 {town['ticked_by'] or '（无人）'} 推进"
            + (f"，世界时间 {world.time:%m-%d %H:%M}" if world is not None else "")
            + (f"；无人驱动：{compact_character_ids(idle)}" if idle else "")
        )
    lines.append(
        f"  工作进程 workers：{len(workers)} 个在运行" + ("" if workers else "（没有引擎在运行）")
    )
    for _, (left, info) in workers.items():
        overhead, lag = info.get("overhead_ms") or {}, info.get("lag_ms") or {}
        driving = info.get("driving")
        lines.append(
            f"    {info.get('name', '?')} (pid {info.get('pid', '?')} @ {info.get('host', '?')})：驱动 "
            f"{info.get('characters', 0)} 个"
            + (f" {driving}" if driving else "")
            + (f"；推进 {', '.join(info['towns'])}" if info.get("towns") else "")
            + f"；决策 {info.get('decisions', 0)} 次，"
            + _p95("引擎开销", overhead.get("p95"), "还没有决策")
            + "，"
            + _p95("延迟", lag.get("p95"), "还没有步骤")
            + f"，CPU {info.get('cpu_seconds')} s；心跳剩 {left / 1000:.0f} s"
        )
    return "\n".join(lines)


def _p95(label: str, value: float | None, none_yet: str) -> str:
    """A worker's percentile, or why there is none yet (a fresh worker has measured nothing)."""
    return f"{label} p95 {value} ms" if value is not None else f"{label} p95 尚无（{none_yet}）"


# -- run ------------------------------------------------------------------------------------------


def _log_memory_worker_failure(task: asyncio.Task[None]) -> None:
    """A failed memory worker is logged; the world carries on without it."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("memory worker stopped (the world carries on): %s", exc)


async def memory_worker(
    cfg: YuijuConfig,
    runtime: Runtime,
    *,
    semantic: SemanticMemory,
    clock: Clock,
    stop_event: asyncio.Event,
) -> None:
    """The daemon's memory worker (`memory.indexer.run_memory_worker`) on ``runtime``'s stores and
    model, its diaries checked against her record by the closed-world check built from the
    loaded actions and cards (`message.diary_grounding.DiaryGrounding`)."""
    from yuiju.memory.indexer import run_memory_worker
    from yuiju.message.diary_grounding import DiaryGrounding

    await run_memory_worker(
        cfg,
        runtime.redis.client,
        runtime.history,
        clock=clock,
        stop_event=stop_event,
        chat_model=runtime.llm_model,
        semantic=semantic,
        diary_check=DiaryGrounding.build(runtime.catalogue, runtime.cards, tz=cfg.app.tz),
    )


async def daemon_runtime(
    cfg: YuijuConfig,
    *,
    clock: Clock,
    worker_name: str | None = None,
    chat_model: ChatModel | None = None,
) -> Runtime:
    """The runtime of `yuiju run` / `yuiju world`: the engine, with what a model's lines for a
    meeting claim checked against the speakers' records (`message.talk_grounding`)."""
    from yuiju.message.talk_grounding import TalkGrounding
    from yuiju.world.runtime import build_runtime

    return await build_runtime(
        cfg,
        clock=clock,
        worker_name=worker_name,
        chat_model=chat_model,
        talk_check=TalkGrounding.build,
    )


async def _run(cfg: YuijuConfig, args: argparse.Namespace) -> int:
    from yuiju.world.clock import RealClock

    speed = args.speed or cfg.world.speed
    if args.resync and speed != 1:
        return _fail(
            f"--resync brings the world back to real time, so it runs at speed 1, not {speed:g}; "
            "drop --speed (and [world].speed) for this start"
        )
    clock = RealClock(cfg.app.tz, speed=speed)
    with_bot = args.cmd == "run" and bool(cfg.platforms())
    if with_bot:  # before anything imports the message package (the observer page reads its outbox)
        try:
            init_nonebot(cfg, log_to_stderr=True)  # stdout is the daemon's panel
        except RuntimeError as exc:
            return _fail(str(exc))
    worker = args.cmd == "world" and args.worker  # a fleet member: the engine only
    runtime = await daemon_runtime(cfg, clock=clock, worker_name=getattr(args, "name", None))
    await runtime.continue_world_clock(resync=args.resync)  # world time never goes backwards
    log.info(
        "yuiju is running%s: %s",
        f" as worker {runtime.engine.name}" if worker else "",
        json.dumps(cfg.summary(), ensure_ascii=False),
    )
    log.info("stores: redis %s, history %s", runtime.redis.description, runtime.history.backend)
    web_server: Any = None
    page_line = ""
    from yuiju.tasks import LoopLagMonitor, bounded, finish

    monitor = LoopLagMonitor(cfg.app.loop_lag_warn_ms).start()
    memory_stop, memory_task, semantic, bot = asyncio.Event(), None, None, None
    panel_task: asyncio.Task[None] | None = None
    terminal: Any = None
    chat_closers: list[Any] = []  # the in-process chat's (web chat, `yuiju chat`), run last-first
    all_started = False  # every part below exists: a stop may start waiting for them
    others_stopped: asyncio.Future[Any] | None = None

    async def stop_chat_side() -> None:
        """The page and the terminal socket first (turns in flight end), then the chat's own
        closers (archiving), each bounded, before the stores close."""
        await asyncio.gather(
            web_server.stop() if web_server is not None else asyncio.sleep(0),
            terminal.stop() if terminal is not None else asyncio.sleep(0),
        )
        while chat_closers:
            closer = chat_closers.pop()
            await bounded(closer, seconds=0.5, what="the in-process chat's shutdown step")

    def stop_others() -> asyncio.Future[Any]:
        if panel_task is not None:
            panel_task.cancel()
        return asyncio.gather(
            finish(panel_task, what="the panel"),
            bot.stop() if bot is not None and not isinstance(bot, str) else asyncio.sleep(0),
            finish(memory_task, what="the memory worker"),
            stop_chat_side(),
        )

    def request_stop() -> None:
        """Everything is asked to stop at once, and the parts other than the engine are waited
        for from that moment on, alongside the engine's own stop: the slowest part bounds the
        stop, not the sum (a hung Redis holds each of them up to its own bound)."""
        nonlocal others_stopped
        runtime.engine.stop()
        memory_stop.set()
        if web_server is not None:
            web_server.request_stop()
        if bot is not None and not isinstance(bot, str):
            bot.request_stop()
        if all_started and others_stopped is None:
            others_stopped = stop_others()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, request_stop)

    async def panel() -> None:
        while True:
            try:
                text = await panel_text(runtime.store, list(runtime.cards), clock)
            except Exception as exc:  # the panel must never take the daemon down
                text = f"(panel: {exc})"
            sys.stdout.write(
                "\x1b[H\x1b[J"
                + text
                + "\n\n"
                + (page_line + "\n" if page_line else "")
                + "(Ctrl-C 停止)\n"
            )
            sys.stdout.flush()
            await asyncio.sleep(1)

    try:
        if (
            cfg.memory.enabled and not worker
        ):  # one vector store for this process: the embedded one opens once
            from yuiju.memory.service import open_semantic
            from yuiju.memory.vectors import VectorStoreError

            try:
                semantic = await open_semantic(cfg)
            except VectorStoreError as exc:
                log.error("memory is off for this run (the world carries on): %s", exc)
        if not worker:  # the observer page with its web chat, and `yuiju chat`'s socket
            try:
                web_server, terminal, page_line = await _serve_page_and_chat(
                    cfg, runtime, semantic, clock, chat_closers
                )
            except PageUnavailable as exc:
                return _fail(str(exc))
            if page_line:
                print(page_line, flush=True)
        if semantic is not None:  # episodes into Qdrant, the diary at bedtime, nightly distillation
            memory_task = asyncio.create_task(
                memory_worker(cfg, runtime, semantic=semantic, clock=clock, stop_event=memory_stop)
            )
            memory_task.add_done_callback(_log_memory_worker_failure)
        if with_bot:  # her chat platforms, on the same stores and memory
            bot = await _start_bot(cfg, runtime, semantic, clock)
            if isinstance(bot, str):
                return _fail(bot)
            bot_line = "\n".join(bot.lines)
            page_line = f"{page_line}\n{bot_line}" if page_line else bot_line
            print(bot_line, flush=True)
        if sys.stdout.isatty() and not args.no_panel and not worker:
            panel_task = asyncio.create_task(panel())
        all_started = True
        await runtime.engine.run()
    finally:
        request_stop()
        if others_stopped is None:  # stopped during start-up (or it failed)
            others_stopped = stop_others()
        # the leases go (bounded) while the other parts finish: other workers take over at once
        await asyncio.gather(others_stopped, runtime.engine.release())
        if semantic is not None:
            await bounded(semantic.store.close, seconds=1.0, what="closing the vector store")
        await runtime.close()
        await monitor.stop()
        print("yuiju stopped; state is saved.", file=sys.stderr)
    return 0


class PageUnavailable(Exception):
    """The observer page cannot be served (its port is taken); the message names the fix."""


async def _serve_page_and_chat(
    cfg: YuijuConfig, runtime: Any, semantic: Any, clock: Any, closers: list[Any]
) -> tuple[Any, Any, str]:
    """The in-process chat on the daemon's stores, memory and model (its closers appended to
    ``closers``), served on the observer page (with `[web] chat`) and on the data dir's socket
    for `yuiju chat`: (the page's server or None, the terminal server or None, the line that
    tells where the page is). Raises `PageUnavailable` when the page's port is taken."""
    from yuiju.message.local import build_local_chat
    from yuiju.message.terminal import TerminalServer, socket_path

    token = cfg.web.token.get_secret_value() if cfg.web.token else None
    cid = cfg.chat.character_id or cfg.world.characters[0]
    chat = None
    try:
        memory = None
        if semantic is not None:
            from yuiju.memory.service import build_memory

            memory = await build_memory(
                cfg, runtime.history, semantic, character_id=cid, chat_model=runtime.llm_model
            )
        chat = await build_local_chat(
            cfg,
            clock=clock,
            web_token=token is not None,
            on_stop=closers,
            redis=runtime.redis.client,
            history=runtime.history,
            memory=memory,
            model=runtime.llm_model,
        )
    except Exception as exc:  # her life and its page go on without the chat
        log.error(
            "the web chat and `yuiju chat` through this daemon are off: her chat (%r) could not "
            "be built: %s",
            cid,
            exc,
        )
    terminal: TerminalServer | None = None
    if chat is not None:
        served = TerminalServer(chat, socket_path(cfg))
        try:
            if await served.start():
                terminal = served
        except OSError as exc:
            log.warning("`yuiju chat` cannot reach this daemon (%s): it will chat on its own", exc)
    if not cfg.web.enabled:
        return None, terminal, ""
    from yuiju.web import ObserverServer, create_app, observer_for_runtime

    web_chat = None
    if cfg.web.chat and chat is not None:
        if problem := cfg.web.chat_problem():
            log.warning("%s", problem)
        else:
            from yuiju.web.chat import WebChat

            web_chat = WebChat.of(chat, per_minute=cfg.web.chat_per_minute)
    app = create_app(observer_for_runtime(runtime, clock), token=token, chat=web_chat)
    web_server = ObserverServer(app, cfg.web.host, cfg.web.port)
    try:
        url = await web_server.start()
    except OSError as exc:
        if terminal is not None:
            await terminal.stop()
        raise PageUnavailable(
            f"cannot serve the observer page on {cfg.web.host}:{cfg.web.port} ({exc}); "
            "set [web].port (YUIJU_WEB__PORT) to a free port, or [web].enabled = false"
        ) from exc
    line = f"观察页面 observer page: {url}" + ("  (needs ?token=...)" if token else "")
    if web_chat is not None:
        line += "  · 网页聊天 web chat: on"
    return web_server, terminal, line


async def _start_bot(cfg: YuijuConfig, runtime: Any, semantic: Any, clock: Any) -> Any:
    """Her chat platforms inside the daemon, sharing its Redis, history store, vector store and clock;
    a `message.bot.BotServer`, or why it could not start. nonebot is initialised already."""
    from nonebot_plugin_yuiju.app import serve_bot

    memory = None
    if semantic is not None:
        from yuiju.memory.service import build_memory

        memory = await build_memory(
            cfg,
            runtime.history,
            semantic,
            character_id=cfg.chat.character_id or cfg.world.characters[0],
            chat_model=runtime.llm_model,
        )
    try:
        return await serve_bot(
            cfg,
            describe=lambda host, port: platform_lines(
                cfg, served_platforms(cfg), host=host, port=port
            ),
            redis=runtime.redis.client,
            history=runtime.history,
            memory=memory,
            clock=clock,
            model=runtime.llm_model,
        )
    except OSError as exc:
        return (
            f"cannot serve the chat bot on {cfg.onebot.host}:{cfg.onebot.port} ({exc}); set "
            "[onebot].port (YUIJU_ONEBOT__PORT) to a free port, or switch its platforms off "
            f"({', '.join(f'[{p}] enabled = false' for p in cfg.platforms())})"
        )
    except Exception as exc:
        log.exception("chat bot start-up failed")
        return f"the chat bot did not start: {exc}"


# -- chat -----------------------------------------------------------------------------------------

CHAT_FAILED = ("model failed", "model failing (silent)", "interrupted", "bad request")
"""How a turn ends when something went wrong (`ChatEvent.reason`, a prefix): a pipe exits 1."""


async def _chat(cfg: YuijuConfig) -> int:
    """`yuiju chat`: talk to her as ``term:<os user>``, through the running daemon when there is
    one (`message.terminal`), else in this process on the same stores. Lines from a pipe are
    said one by one, her answers printed, and it ends at the end of the input; at a terminal,
    a prompt until Ctrl-D or Ctrl-C."""
    import getpass

    from yuiju.message.terminal import connect, open_here, socket_path

    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name (a container's bare uid)
        user = "user"
    interactive = sys.stdin.isatty()
    link: Any = await connect(socket_path(cfg), user)
    if link is None:
        link = await open_here(cfg, user)
    hello = link.hello
    notes = sys.stdout if interactive else sys.stderr
    try:
        if interactive:
            where = "，她在正在运行的 yuiju 里" if hello.daemon else ""
            print(f"和{hello.her}聊天（你是 {hello.person}{where}）。Ctrl-D 或 Ctrl-C 结束。")
        if not hello.available:
            print(_no_chat_model(hello.daemon), file=sys.stderr, flush=True)
        if not hello.memory and hello.memory_note:
            print(
                f"（这次她想不起以前的事 / she chats without her memory: {hello.memory_note}）",
                file=notes,
                flush=True,
            )
        failed = await _converse(link, interactive=interactive)
    finally:
        await link.close()
    if interactive:
        return 0
    return 1 if failed or not hello.available else 0


def _no_chat_model(daemon: bool) -> str:
    from yuiju.message.local import NO_MODEL

    restart = (
        ", then restart the running `yuiju run`/`yuiju world` (this conversation is its chat)"
        if daemon
        else ""
    )
    return (
        f"{NO_MODEL}\nshe cannot answer: no chat model is configured. Set [llm] base_url (and "
        "api_key) in yuiju.toml, or YUIJU_LLM__BASE_URL and YUIJU_LLM__API_KEY"
        f"{restart}. What you say is recorded."
    )


async def _converse(link: Any, *, interactive: bool) -> bool:
    """Read lines and say them until the input ends or Ctrl-C; whether a turn went wrong."""

    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    ready = threading.Event()
    stop = asyncio.Event()
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdin.reconfigure(errors="replace")  # type: ignore[union-attr]

    def read() -> None:
        # a daemon thread: blocked in a read, it never holds the exit (Ctrl-C, a stop)
        while True:
            ready.wait()
            ready.clear()
            if interactive:
                # no GNU readline: a process that ends inside it (Ctrl-C) leaves the terminal
                # without echo; the terminal's own line editing serves
                sys.stdout.write("你：")
                sys.stdout.flush()
            try:
                line: str | None = (
                    sys.stdin.readline() or None
                )  # "": the end (Ctrl-D, a pipe's end)
            except (OSError, ValueError):
                line = None
            loop.call_soon_threadsafe(lines.put_nowait, line)
            if line is None:
                return

    threading.Thread(target=read, name="yuiju-chat-stdin", daemon=True).start()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, stop.set)
    failed = False
    try:
        while not stop.is_set():
            ready.set()
            line = await _unless(lines.get(), stop)
            if line is None:
                break
            if not line.strip():
                continue
            reason = await _unless(_show_turn(link, line.strip(), interactive), stop)
            if reason is None:
                break
            failed = failed or reason.startswith(CHAT_FAILED)
    except ConnectionError as exc:
        print(f"\n{exc}", file=sys.stderr)
        return True
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
    if interactive:
        print()  # the prompt's line ends
    return failed


async def _unless(work: Any, stop: asyncio.Event) -> Any:
    """``work``'s result, or None when ``stop`` is set first (then ``work`` is cancelled)."""
    task = asyncio.ensure_future(work)
    halt = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, halt}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        halt.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None
    return task.result()


async def _show_turn(link: Any, text: str, interactive: bool) -> str:
    """Say ``text`` and print her lines as they come (at a terminal with who says them and a
    typing line meanwhile); the reason the turn ended with."""
    her = link.hello.her
    typing = False
    reason = "interrupted"
    async for event in link.turn(text):
        if event.kind == "typing" and interactive and not typing:
            sys.stdout.write(f"\x1b[2m{her}正在输入…\x1b[0m")
            sys.stdout.flush()
            typing = True
        elif event.kind == "line":
            if typing:
                sys.stdout.write("\r\x1b[K")
                typing = False
            print(f"{her}：{event.text}" if interactive else event.text, flush=True)
        elif event.kind == "done":
            reason = event.reason
            if typing:
                sys.stdout.write("\r\x1b[K")
                typing = False
            if event.text and reason != "no chat model configured":  # said once, at the start
                print(event.text, file=sys.stdout if interactive else sys.stderr, flush=True)
    return reason


# -- bot: her chat platforms: which NoneBot adapters `yuiju run` / `yuiju bot` start, with what --------

DRIVER = "~fastapi+~httpx+~websockets"
"""The server (OneBot's reverse WebSocket, Feishu's callbacks) and the clients (Satori's
WebSocket, every adapter's HTTP API)."""

ADAPTER_MODULES = {
    "onebot": "nonebot.adapters.onebot.v11",
    "satori": "nonebot.adapters.satori",
    "telegram": "nonebot.adapters.telegram",
    "feishu": "nonebot.adapters.feishu",
}
"""yuiju.toml section → the NoneBot adapter module it starts (`nonebot_plugin_yuiju.platforms`
has what the plugin needs to know of each)."""


@dataclass(frozen=True)
class NoneBotSettings:
    """What `nonebot.init` and the adapters need for the platforms yuiju.toml switches on."""

    init: dict[str, Any]
    """Keyword arguments of ``nonebot.init`` (secrets included: never log them)."""
    adapters: tuple[str, ...]
    """Sections whose adapters are registered, in order (`ADAPTER_MODULES`)."""


def served_platforms(cfg: YuijuConfig) -> list[str]:
    """The platforms `yuiju bot` serves: those enabled, or OneBot v11 alone when none is (the
    QQ bot it always was)."""
    return cfg.platforms() or ["onebot"]


def nonebot_settings(
    cfg: YuijuConfig, platforms: list[str], *, nickname: list[str]
) -> NoneBotSettings:
    """``nonebot.init`` arguments for ``platforms`` (sections of ``cfg``). The bot's own server
    listens on ``[onebot] host``/``port`` (OneBot's reverse WebSocket, Feishu's callbacks)."""
    init: dict[str, Any] = {
        "driver": DRIVER,
        "host": cfg.onebot.host,
        "port": cfg.onebot.port,
        "nickname": nickname,
        "command_start": ["/"],
    }
    if "onebot" in platforms and cfg.onebot.access_token is not None:
        init["onebot_access_token"] = cfg.onebot.access_token.get_secret_value()
    if "satori" in platforms:
        s = cfg.satori
        client: dict[str, Any] = {
            "host": s.host,
            "port": s.port,
            "path": s.path,
            "secure": s.secure,
        }
        if s.token is not None:
            client["token"] = s.token.get_secret_value()
        init["satori_clients"] = [client]
    if "telegram" in platforms:
        t = cfg.telegram
        if t.token is None:  # the config refuses that when enabled; `platforms` may say more
            raise ValueError("[telegram] token is not set")
        init["telegram_bots"] = [{"token": t.token.get_secret_value(), "api_server": t.api_base()}]
        if t.proxy is not None:
            init["telegram_proxy"] = t.proxy.get_secret_value()
    if "feishu" in platforms:
        f = cfg.feishu
        if f.app_id is None or f.app_secret is None or f.verification_token is None:
            raise ValueError("[feishu] app_id, app_secret and verification_token must be set")
        bot: dict[str, Any] = {
            "app_id": f.app_id,
            "app_secret": f.app_secret.get_secret_value(),
            "verification_token": f.verification_token.get_secret_value(),
            "is_lark": f.is_lark,
            "protocol": f.protocol,
        }
        if f.encrypt_key is not None:
            bot["encrypt_key"] = f.encrypt_key.get_secret_value()
        if f.api_base is not None:
            bot["api_base"] = f.api_base
        init["feishu_bots"] = [bot]
    return NoneBotSettings(init=init, adapters=tuple(p for p in ADAPTER_MODULES if p in platforms))


def platform_lines(cfg: YuijuConfig, platforms: list[str], *, host: str, port: int) -> list[str]:
    """One start-up line per platform: where it connects or what connects to her (no secrets)."""
    shown = f"[{host}]" if ":" in host else host
    lines = []
    if "onebot" in platforms:
        lines.append(f"QQ 机器人 bot: NapCat/Lagrange connect to ws://{shown}:{port}/onebot/v11/ws")
    if "satori" in platforms:
        lines.append(f"Satori: connecting to {cfg.satori.describe()}")
    if "telegram" in platforms:
        lines.append(f"Telegram: polling {cfg.telegram.api_base()} for updates")
    if "feishu" in platforms:
        f = cfg.feishu
        where = (
            "a long connection to the open platform"
            if f.protocol == "ws"
            else f"event callbacks at http://{shown}:{port}/feishu/{f.app_id}"
        )
        lines.append(f"{'Lark' if f.is_lark else '飞书 Feishu'}: {where}")
    return lines


def init_nonebot(
    cfg: YuijuConfig, *, log_to_stderr: bool = False, platforms: list[str] | None = None
) -> None:
    """``nonebot.init`` for ``platforms`` (the sections of yuiju.toml whose adapters to register;
    default: `served_platforms`), those adapters, and the plugin `nonebot_plugin_yuiju`.

    Call it before anything imports the `message` package: nonebot's loader refuses a module that
    was imported before it was loaded as a plugin."""
    import importlib

    _nonebot_logs_in_town_time(cfg.app.tz, to_stderr=log_to_stderr)
    import nonebot

    from yuiju.characters import load_card

    platforms = served_platforms(cfg) if platforms is None else platforms
    if "onebot" in platforms:
        if problem := cfg.onebot.token_problem():
            raise RuntimeError(problem)
        if cfg.onebot.access_token is None:
            log.warning(
                "the OneBot WebSocket on %s:%s accepts connections without an access token "
                "([onebot] allow_no_token = true): any process on this machine can connect as the "
                "QQ side and speak as any QQ user, admins included. Set [onebot] access_token for "
                "real use.",
                cfg.onebot.host,
                cfg.onebot.port,
            )
    card = load_card(cfg.chat.character_id or cfg.world.characters[0])
    settings = nonebot_settings(cfg, platforms, nickname=[card.name, *card.nicknames])
    nonebot.init(**settings.init)
    for section in settings.adapters:
        adapter = importlib.import_module(ADAPTER_MODULES[section]).Adapter
        nonebot.get_driver().register_adapter(adapter)
    if nonebot.load_plugin("nonebot_plugin_yuiju") is None:
        raise RuntimeError("the plugin nonebot_plugin_yuiju did not load (see the log above)")


def _nonebot_logs_in_town_time(tz: tzinfo, *, to_stderr: bool) -> None:
    """nonebot's log lines (loguru) stamped as ours are (`TownTimeFormatter`): the town's zone,
    with its offset; on stderr in the daemon (stdout is its panel), in nonebot's own format on
    stdout otherwise."""
    from nonebot.log import default_format, logger, logger_id

    in_town_time = _nonebot_line_filter(tz)
    with contextlib.suppress(ValueError):  # already replaced
        logger.remove(logger_id)
        logger.add(
            sys.stderr if to_stderr else sys.stdout,
            level=0,
            diagnose=False,
            filter=in_town_time,
            format="{extra[town_time]} {level: <7} nonebot: {message}"
            if to_stderr
            else default_format.replace(
                "{time:MM-DD HH:mm:ss}", "{extra[town_day]} {extra[town_time]}"
            ),
        )


def _nonebot_line_filter(tz: tzinfo) -> Callable[[Any], bool]:
    """The filter of our handler for nonebot's (loguru's) lines: nonebot's level, the town's time
    in ``extra``, and the message written even with a lone surrogate in it."""
    from nonebot.log import default_filter

    def in_town_time(record: Any) -> bool:
        if not default_filter(record):  # below nonebot's level: not written, nothing to format
            return False
        # set by the handler's filter, not a patcher: nonebot.init replaces the logger's patcher
        moment = record["time"].astimezone(tz)
        record["extra"]["town_time"] = moment.replace(microsecond=0).isoformat()[11:]
        record["extra"]["town_day"] = moment.strftime("%m-%d")
        if _LONE_SURROGATE.search(record["message"]):
            record["message"] = record["message"].encode("utf-8", "backslashreplace").decode()
        return True

    return in_town_time


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
"""Half of a UTF-16 pair, which a frame's JSON may escape alone: nonebot prints frame fields
(a message's sub_type, a sender's nickname) in its lines, and the UTF-8 log stream refuses it."""


async def _embedded_memory_problem(cfg: YuijuConfig) -> str | None:
    """Why `yuiju bot` must not start, or None: its memory would be the embedded vector store, which
    one process at a time can open — and a running `yuiju run`/`yuiju world` holds it."""
    if not cfg.memory.enabled or cfg.qdrant.url:
        return None
    from yuiju.memory.service import open_semantic
    from yuiju.memory.vectors import VectorStoreError

    try:
        semantic = await open_semantic(cfg)
    except VectorStoreError as exc:
        return (
            f"{exc}.\n`yuiju run` already serves the chat bot when a platform is enabled, sharing its "
            "memory; run `yuiju bot` as a separate process only with [qdrant].url set to a Qdrant "
            "server that both use (or with [memory].enabled = false)"
        )
    await semantic.store.close()
    return None


# -- memory -----------------------------------------------------------------------------------------


async def _memory(cfg: YuijuConfig, args: argparse.Namespace) -> int:
    if args.memory_cmd in GOVERNANCE_COMMANDS:
        return await _memory_governance(cfg, args)
    from yuiju.memory.service import build_memory, open_semantic
    from yuiju.memory.vectors import VectorStoreError
    from yuiju.storage.keys import Keys
    from yuiju.world.clock import RealClock
    from yuiju.world.runtime import configured_model, open_stores

    if args.memory_cmd == "import":
        problem, lines, skipped = await asyncio.to_thread(_read_chat_log, args)
        if problem:
            return _fail(problem)
    if args.memory_cmd == "reindex":
        try:
            print(await _reindex_vectors(cfg, re_embed=args.re_embed))
        except VectorStoreError as exc:
            return _fail(str(exc))
    characters = list(cfg.world.characters)
    if args.memory_cmd == "import":
        if (args.character or characters[0]) not in characters:
            return _fail(
                f"--character {args.character!r} is not configured; [world].characters = {characters}"
            )
        characters = [args.character or characters[0]]
    redis, history = await open_stores(cfg)
    users: list[str] = []
    groups: list[str] = []
    if args.memory_cmd == "search":
        try:  # platform-qualified; a plain number is QQ's, as in an old config
            users, groups = await _search_scopes(cfg, redis.client, args.user, args.group)
        except ValueError as exc:
            await history.close()
            await redis.aclose()
            return _fail(f"--user/--group: {exc}")
    try:
        semantic = await open_semantic(cfg)
    except VectorStoreError as exc:
        await history.close()
        await redis.aclose()
        return _fail(str(exc))
    # distillation (and a diary written from here) need the model, whatever decides her actions
    model = configured_model(
        cfg, redis=redis.client, keys=Keys(cfg.redis.prefix), clock=RealClock(cfg.app.tz)
    )
    try:
        now = datetime.now(cfg.app.tz)
        for cid in characters:
            service = await build_memory(cfg, history, semantic, character_id=cid, chat_model=model)
            if args.memory_cmd == "search":
                found = await service.memory_search(
                    args.text,
                    now=now,
                    user_id=users,
                    group_id=groups,
                    limit=args.limit,
                    # her own view: what anyone may hear, and every chat and private talk
                    every_scope=not (args.user or args.group),
                )
                if len(cfg.world.characters) > 1:
                    print(f"{cid}:")
                if not found:
                    print(f"no memories of {cid} match {args.text!r}")
                for r in found:
                    scope = r.payload.get("scope", "")
                    print(f"{r.score:.3f} [{r.kind} {scope} {r.time:%Y-%m-%d %H:%M}] {r.text}")
                if found.cut_by_budget:
                    print(f"({found.cut_by_budget} more did not fit [memory].recall_token_budget)")
            elif args.memory_cmd == "distill":
                print(cid, await service.distiller.run(now))
            elif args.memory_cmd == "reindex":
                print(cid, await service.knowledge.sync(service.knowledge_roots, now))
            elif args.memory_cmd == "import":
                await _import_chat_log(service, lines, args, skipped)
    finally:
        if model is not None:
            await model.aclose()
        await semantic.store.close()
        await history.close()
        await redis.aclose()
    return 0


GOVERNANCE_COMMANDS = ("export", "forget", "forget-item", "correct", "audit")
"""`yuiju memory` commands over what she keeps about people (memory/governance.py)."""
FORGET_POLL_SECONDS = 0.2


async def _memory_governance(cfg: YuijuConfig, args: argparse.Namespace) -> int:
    """export, forget, forget-item, correct, audit: through the running daemon's world and memory
    worker when one runs (one writer; the embedded vector store is its), else on the stores."""
    from yuiju.memory.governance import Governance, GovernanceDeps
    from yuiju.memory.service import open_semantic
    from yuiju.memory.vectors import VectorStoreError
    from yuiju.message.memory_requests import subject_of
    from yuiju.message.people import People
    from yuiju.storage.keys import Keys
    from yuiju.world.runtime import open_stores
    from yuiju.world.store import StateStore

    if args.memory_cmd in ("forget", "forget-item") and not args.yes:
        return _fail(f"`yuiju memory {args.memory_cmd}` erases for good: add --yes to confirm")
    keys = Keys(cfg.redis.prefix)
    redis, history = await open_stores(cfg)
    semantic = None
    try:
        daemon = bool(await StateStore(redis.client, keys).workers())
        subject = None
        if args.memory_cmd in ("export", "forget"):
            kind: Literal["user", "group"] = "group" if args.group else "user"
            try:
                subject = await subject_of(
                    People(redis.client, keys), kind, args.group or args.user
                )
            except ValueError as exc:
                return _fail(f"--{kind}: {exc}")
        needs_vectors = args.memory_cmd != "audit" and not (daemon and args.memory_cmd == "forget")
        if needs_vectors and cfg.memory.enabled:
            try:
                semantic = await open_semantic(cfg)
            except VectorStoreError as exc:
                if args.memory_cmd != "export":
                    return _fail(
                        f"{exc}\n(with `yuiju run` running, `yuiju memory forget` goes through "
                        "it; forget-item and correct need the vector store: stop it, or use a "
                        "Qdrant server)"
                    )
                # the daemon holds the embedded store: its points are made from the history
                # documents exported (chat memories, facts, episodes)
                print(f"yuiju: {exc}; exporting without the vector store's points", file=sys.stderr)
        gov = Governance(
            GovernanceDeps(
                history=history,
                semantic=semantic,
                redis=redis.client,
                keys=keys,
                character_ids=[c for town in cfg.towns().values() for c in town.characters],
                tz=cfg.app.tz,
            )
        )
        now = datetime.now(cfg.app.tz)
        who = f"admin:{getattr(args, 'by', 'cli')}"
        if args.memory_cmd == "audit":
            for entry in await gov.audit_log(args.limit):
                entry["time"] = entry["time"].astimezone(cfg.app.tz).isoformat()
                print(json.dumps(entry, ensure_ascii=False))
            return 0
        if args.memory_cmd == "forget-item":
            found = await gov.forget_item(args.id, requested_by=who, now=now)
            if found is None:
                return _fail(
                    f"no memory or fact has the id {args.id!r} (`yuiju memory export` lists them)"
                )
            print(f"forgot {args.id} ({found})")
            return 0
        if args.memory_cmd == "correct":
            try:
                new = await gov.correct_fact(args.id, args.text, requested_by=who, now=now)
            except KeyError:
                return _fail(f"no fact has the id {args.id!r} (`yuiju memory export` lists them)")
            except ValueError as exc:
                return _fail(str(exc))
            print(f"{args.id} corrected: now {new['_id']}: {new['content']}")
            return 0
        assert subject is not None
        if args.memory_cmd == "export":
            document = await _export_document(cfg, gov, subject, redis.client, now)
            text = json.dumps(document, ensure_ascii=False, indent=1, default=str)
            if args.out:
                await asyncio.to_thread(Path(args.out).write_text, text + "\n", encoding="utf-8")
                print(f"{len(document['items'])} items about {subject.id} written to {args.out}")
            else:
                print(text)
            return 0
        return await _forget(
            cfg, gov, subject, redis.client, who, now, daemon=daemon, wait=args.wait
        )
    finally:
        if semantic is not None:
            await semantic.store.close()
        await history.close()
        await redis.aclose()


async def _export_document(
    cfg: YuijuConfig, gov: Governance, subject: Subject, redis: RedisClient, now: datetime
) -> dict[str, Any]:
    """One JSON document of everything kept about ``subject``, each item with where it lives."""
    from yuiju.storage.keys import Keys
    from yuiju.world.forgetting import kept_about
    from yuiju.world.store import StateStore

    names = await gov.names(subject)
    items = [i.document() for i in await gov.export(subject)]
    for prefix, town in cfg.towns().items():
        keys = Keys(prefix)
        for cid, state in (await StateStore(redis, keys).load_characters(town.characters)).items():
            if state is None:
                continue
            for part, found in kept_about(state.social, subject.kind, subject.ids, names).items():
                items += [
                    {
                        "store": "state",
                        "where": f"{keys.character(cid)} social.{part}",
                        "id": "",
                        "content": x,
                    }
                    for x in found
                ]
    return {
        "subject": {"kind": subject.kind, "id": subject.id, "ids": list(subject.ids)},
        "names": names,
        "exported_at": now.isoformat(),
        "items": items,
    }


async def _forget(
    cfg: YuijuConfig,
    gov: Governance,
    subject: Subject,
    redis: RedisClient,
    who: str,
    now: datetime,
    *,
    daemon: bool,
    wait: float,
) -> int:
    """The world erases them from the characters' states (the engine, when it runs: one writer),
    then the stores (the daemon's memory worker, or here)."""
    from yuiju.message.memory_requests import forget_command
    from yuiju.storage.keys import Keys
    from yuiju.world.commands import apply_command, enqueue_command
    from yuiju.world.store import Commit, Snapshot, StateStore

    command = forget_command(subject, await gov.names(subject), who)
    if daemon:
        for prefix in cfg.towns():
            await enqueue_command(redis, Keys(prefix), command)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while (entry := await gov.audited(command.request_id)) is None:
            if loop.time() > deadline:
                return _fail(
                    f"the forget of {subject.id} is queued (request {command.request_id}) but not "
                    f"done after {wait:.0f} s: is the daemon's memory worker on ([memory].enabled)? "
                    "`yuiju memory audit` shows it when done"
                )
            await asyncio.sleep(FORGET_POLL_SECONDS)
        counts = entry["counts"]
    else:
        state: dict[str, int] = {}
        for prefix, town in cfg.towns().items():

            def erase(snap: Snapshot) -> tuple[Commit, dict[str, int]]:
                if snap.world is None:
                    return Commit(), {}
                characters = {c: s for c, s in snap.characters.items() if s is not None}
                done = json.loads(apply_command(command, snap.world, characters, now=now))
                return Commit(characters=characters), done["state"]

            store = StateStore(redis, Keys(prefix))
            for part, n in (
                await store.transact(erase, characters=town.characters, now=now)
            ).items():
                state[part] = state.get(part, 0) + n
        counts = await gov.forget(
            subject, requested_by=who, now=now, request_id=command.request_id, state_counts=state
        )
    print(
        f"forgot {subject.kind} {subject.id} ({len(subject.ids)} ids); audit {command.request_id}"
    )
    for store_part, n in sorted(counts.items()):
        print(f"  {store_part}: {n}")
    return 0


def _read_chat_log(args: argparse.Namespace) -> tuple[str | None, list[Any], int]:
    """The checked lines of ``yuiju memory import FILE`` and how many bad ones are skipped, or
    why nothing is imported."""
    from yuiju.memory.chatlog import parse_chat_log

    path = Path(args.file)
    if not path.is_file():
        return (
            f"{path}: no such file (a JSON Lines chat log, see `yuiju memory import --help`)",
            [],
            0,
        )
    parsed = parse_chat_log(path)
    for error in parsed.errors[:20]:
        print(f"{path}: {error}", file=sys.stderr)
    if len(parsed.errors) > 20:
        print(f"{path}: ... and {len(parsed.errors) - 20} more bad lines", file=sys.stderr)
    if parsed.errors and not args.skip_bad:
        return (
            (
                f"{path}: {len(parsed.errors)} bad line(s), nothing imported; fix them, or pass --skip-bad "
                "to import the good lines only"
            ),
            [],
            0,
        )
    return None, parsed.lines, len(parsed.errors)


async def _search_scopes(
    cfg: YuijuConfig, redis: Any, user: str | None, group: str | None
) -> tuple[list[str], list[str]]:
    """Whose memories ``memory search --user/--group`` reads: every account linked to the user
    (`/link`), and the plain ids QQ's were stored under before platforms."""
    from yuiju.message.model import legacy_forms, qualify
    from yuiju.message.people import People
    from yuiju.storage.keys import Keys

    users = await People(redis, Keys(cfg.redis.prefix)).scopes(qualify(user)) if user else []
    return users, legacy_forms(qualify(group)) if group else []


async def _import_chat_log(
    service: Any, lines: list[Any], args: argparse.Namespace, skipped: int
) -> None:
    from tqdm import tqdm

    from yuiju.memory.chatlog import import_chat_log

    with tqdm(total=len(lines), unit="line", desc="import", disable=args.quiet) as bar:
        report = await import_chat_log(service.chat, lines, batch=args.batch, progress=bar.update)
    skipped_text = f", {skipped} bad line(s) skipped" if skipped else ""
    pending = (
        f"; {report.not_indexed} stored but not yet searchable (embedder or vector store failed): "
        "the memory worker of `yuiju run` indexes them"
        if report.not_indexed
        else ""
    )
    print(
        f"{service.character_id}: {report.imported} new chat lines imported, {report.already} "
        f"already there{skipped_text}{pending}"
    )


async def _reindex_vectors(cfg: YuijuConfig, *, re_embed: bool) -> Any:
    """Rewrite the vector store in the current layout (memory/reindex.py), with a progress bar."""
    from tqdm import tqdm

    from yuiju.memory.reindex import reindex_store
    from yuiju.memory.service import make_embedder

    bars: list[Any] = []

    def progress(total: int) -> Any:
        bars.append(tqdm(total=total, unit="memory", desc="reindex"))
        return bars[-1].update

    try:
        return await reindex_store(
            url=cfg.qdrant.url,
            api_key=cfg.qdrant.api_key.get_secret_value() if cfg.qdrant.api_key else None,
            collection=cfg.qdrant.collection,
            data_dir=cfg.data_path(),
            engine=cfg.memory.engine,
            embedder=make_embedder(cfg),
            re_embed=re_embed,
            progress=progress,
            context_minutes=cfg.memory.chat_context_minutes,
        )
    finally:
        for bar in bars:
            bar.close()


# -- simulate ---------------------------------------------------------------------------------------


async def _simulate(cfg: YuijuConfig, args: argparse.Namespace) -> int:
    from yuiju.llm import CassetteError, CassetteMismatch
    from yuiju.llm.cassette import read_cassette
    from yuiju.world.simulate import DEFAULT_START, simulate

    recorded: dict[str, Any] = {}
    if args.replay:
        if args.record:
            return _fail(
                "--record and --replay exclude each other: replay one cassette, or record a new one"
            )
        try:
            recorded, _ = read_cassette(Path(args.replay))
        except CassetteError as exc:
            return _fail(str(exc))
    elif (args.policy == "llm" or args.record) and not cfg.llm.configured:
        return _fail(
            "--policy llm (and --record) need [llm].base_url (and api_key); see `yuiju init`"
        )
    policy = "llm" if args.record or args.replay else args.policy
    try:
        report = await simulate(
            cfg,
            days=args.days or recorded.get("days", 7),
            seed=recorded.get("seed", 0) if args.seed is None else args.seed,
            policy=policy,
            start=args.start or recorded.get("start", DEFAULT_START),
            data_dir=Path(args.data_dir) if args.data_dir else None,
            progress=not args.quiet,
            record=Path(args.record) if args.record else None,
            replay=Path(args.replay) if args.replay else None,
        )
    except CassetteMismatch as exc:
        return _fail(str(exc))
    if args.report:
        text = json.dumps(report, ensure_ascii=False, indent=1)
        await asyncio.to_thread(Path(args.report).write_text, text, encoding="utf-8")
    long = ("timeline", "per_day", "action_histogram", "offered", "offered_histogram")
    summary = {k: v for k, v in report.items() if k not in long}
    print(json.dumps(summary, ensure_ascii=False, indent=1))
    top = list(report["action_histogram"].items())[:12]
    print("most frequent actions: " + ", ".join(f"{k} {v}" for k, v in top))
    if args.report:
        print(f"full report: {args.report}")
    return 1 if report["invariant_violations"] else 0


# -- entry point ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    config_help = "TOML config file (default: ./yuiju.toml or $YUIJU_CONFIG)"
    parser = argparse.ArgumentParser(
        prog="yuiju", description="悠酱's life in 羽浦町: the world daemon and tools."
    )
    parser.add_argument("--config", help=config_help)
    # --config also after the subcommand (`yuiju status --config x.toml`); SUPPRESS keeps a
    # subcommand that was not given it from overwriting the one given before it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS, help=config_help)
    sub = parser.add_subparsers(dest="cmd", required=True, parser_class=_subparser_class(common))

    run = sub.add_parser(
        "run",
        help="run the daemon with a live terminal panel (and her chat on every platform enabled)",
    )
    run.add_argument(
        "--speed", type=float, help="world clock speed-up for demos (default [world].speed)"
    )
    run.add_argument("--no-panel", action="store_true", help="log lines only")
    resync_help = (
        "go back to real time after a --speed run left world time ahead of the wall clock: "
        "the world holds still until the wall clock catches up"
    )
    run.add_argument("--resync", action="store_true", help=resync_help)
    world = sub.add_parser(
        "world", help="run the daemon without the chat platforms (world, memory worker, page)"
    )
    world.add_argument("--speed", type=float)
    world.add_argument("--no-panel", action="store_true")
    world.add_argument("--resync", action="store_true", help=resync_help)
    world.add_argument(
        "--worker",
        action="store_true",
        help=(
            "run as one of several workers sharing the characters: the engine only (no observer page, panel "
            "or memory worker); start as many as you like with the same config, on one machine or several"
        ),
    )
    world.add_argument("--name", help="how `yuiju status` names this worker (default: host:pid)")

    sim = sub.add_parser("simulate", help="fast-forward under a simulated clock and report")
    sim.add_argument(
        "--days", type=int, help="simulated days (default 7, or the cassette's with --replay)"
    )
    sim.add_argument(
        "--seed", type=int, help="world seed (default 0, or the cassette's with --replay)"
    )
    sim.add_argument("--policy", choices=["utility", "llm"], default="utility")
    sim.add_argument(
        "--record",
        metavar="CASSETTE",
        help="store every LLM exchange in this JSON-lines file (implies --policy llm)",
    )
    sim.add_argument(
        "--replay",
        metavar="CASSETTE",
        help="answer from a recorded cassette, no network: the same timeline again",
    )
    sim.add_argument("--report", help="write the full JSON report here")
    sim.add_argument("--start", help="simulated start, e.g. 2026-09-01T06:00 (local time)")
    sim.add_argument("--data-dir", help="use stores under this dir instead of fresh temporary ones")
    sim.add_argument("--quiet", action="store_true", help="no progress bar")

    status = sub.add_parser("status", help="current world and character state from the stores")
    status.add_argument("--json", action="store_true")

    actions = sub.add_parser("actions", help="list or check the loaded actions")
    asub = actions.add_subparsers(dest="action_cmd", required=True)
    lst = asub.add_parser("list")
    lst.add_argument("--json", action="store_true")
    asub.add_parser("check")
    why = asub.add_parser(
        "why",
        help="whether an action is offered to her now, and which of its preconditions hold",
    )
    why.add_argument("id", help="the action's id (`yuiju actions list`)")
    why.add_argument("--character", help="whose (default: the first of [world].characters)")

    mem = sub.add_parser(
        "memory",
        help="search her memory, distil chat memories, re-index knowledge files; export, "
        "forget or correct what she keeps about someone",
    )
    msub = mem.add_subparsers(dest="memory_cmd", required=True)
    search = msub.add_parser(
        "search",
        help="ranked recall (relevance + recency + importance) in every scope, or what one "
        "person or group may hear",
    )
    search.add_argument("text")
    search.add_argument(
        "--user",
        help="platform-qualified user id, e.g. qq:12345: only what this person may hear "
        "(public memories, theirs, what they said to her in private)",
    )
    search.add_argument(
        "--group", help="platform-qualified group id: only what this group may hear"
    )
    search.add_argument("--limit", type=int, help="default: [memory].recall_limit")
    msub.add_parser("distill", help="distil raw chat memories into facts now")
    reindex = msub.add_parser(
        "reindex",
        help="rewrite the memory store in the current layout (keeping stored "
        "vectors when the embedder is unchanged), then index changed knowledge files",
    )
    reindex.add_argument(
        "--re-embed", action="store_true", help="embed every memory again from its text"
    )
    imp = msub.add_parser(
        "import",
        help="import a JSON Lines chat log into her chat memories",
        description=(
            'One JSON object per line: {"time": "2026-03-05T20:15:00+08:00", "user_id": "qq:12345", '
            '"text": "...", "group_id": "qq:67890", "nickname": "小明"}; group_id and nickname optional '
            "(no group_id: said in private). Every line is checked first; with a bad line nothing is "
            "imported unless --skip-bad. Importing the same file again adds nothing twice."
        ),
    )
    imp.add_argument("file")
    imp.add_argument(
        "--character", help="whose memories (default: the first of [world].characters)"
    )
    imp.add_argument(
        "--skip-bad",
        action="store_true",
        help="import the good lines, skipping (and listing) bad ones",
    )
    imp.add_argument(
        "--batch", type=int, default=256, help="lines per history write and embedding call"
    )
    imp.add_argument("--quiet", action="store_true", help="no progress bar")

    export = msub.add_parser(
        "export",
        help="one JSON document of everything she keeps about a person (every linked account) "
        "or a group, from every store, with where each item lives",
    )
    forget = msub.add_parser(
        "forget",
        help="erase a person or a group from every store (states, history, vectors, Redis), "
        "audited; through the running daemon when there is one",
    )
    for p in (export, forget):
        whom = p.add_mutually_exclusive_group(required=True)
        whom.add_argument("--user", help="platform-qualified user id, e.g. qq:777")
        whom.add_argument("--group", help="platform-qualified group id, e.g. qq:5000")
    export.add_argument("--out", help="write the document to this file instead of stdout")
    forget.add_argument("--yes", action="store_true", help="confirm: this cannot be undone")
    forget.add_argument(
        "--wait", type=float, default=120.0, help="seconds to wait for a running daemon to do it"
    )
    item = msub.add_parser(
        "forget-item", help="forget one fact or chat memory by its id (fact_..., chat_...)"
    )
    item.add_argument("id")
    item.add_argument("--yes", action="store_true", help="confirm: this cannot be undone")
    correct = msub.add_parser(
        "correct", help="correct a fact by its id: the new words supersede the old in recall"
    )
    correct.add_argument("id")
    correct.add_argument("text", help="the fact's new words (Chinese, as she would remember it)")
    audit = msub.add_parser("audit", help="the audit log of forgets and corrections (no content)")
    audit.add_argument("--limit", type=int, default=50)
    for p in (forget, item, correct):
        p.add_argument("--by", default="cli", help="who asks, for the audit log (default: cli)")

    sub.add_parser(
        "bot",
        help="run only her chat: the platforms switched on ([onebot], [satori], [telegram], "
        "[feishu]; OneBot v11 when none is) with [chat]; next to a running daemon it needs "
        "[qdrant].url",
    )
    sub.add_parser(
        "chat",
        help="talk to her in the terminal (through the running daemon when there is one); "
        "reads lines from a pipe and ends at its end",
        description=(
            "A private conversation with her as term:<your OS user>, through the same chat as "
            "her groups. At a terminal: a prompt, Ctrl-D or Ctrl-C to end. From a pipe "
            "(`echo 你好 | yuiju chat`): each line is said, her answers printed, and it ends at "
            "the end of the input (exit 1 when she could not answer: no [llm], a failing model)."
        ),
    )
    init = sub.add_parser("init", help="write a commented default config file")
    init.add_argument("--force", action="store_true")
    return parser


def _subparser_class(common: argparse.ArgumentParser) -> type[argparse.ArgumentParser]:
    """Subcommand parsers (and theirs, e.g. `memory search`) that all take ``common``'s options."""

    class Subparser(argparse.ArgumentParser):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**{**kwargs, "parents": [*kwargs.get("parents", []), common]})

        def add_subparsers(self, **kwargs: Any) -> Any:
            return super().add_subparsers(**{"parser_class": Subparser, **kwargs})

    return Subparser


DAEMON_COMMANDS = ("run", "world", "bot")
"""Commands that run until stopped: as a process of their own, they end without the interpreter's teardown."""


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = _main(args)
        sys.stdout.flush()  # here, so a reader that left (`yuiju status | head -3`) is caught below
    except BrokenPipeError:
        # Python ignores SIGPIPE: end as a Unix tool killed by it would, without a traceback, and
        # point stdout at /dev/null so the interpreter's own flush at exit stays quiet too
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    if argv is None and args.cmd in DAEMON_COMMANDS:  # the process itself, not a caller's
        _exit_without_teardown(code)
    return code


class _EndWithoutWaiting(ThreadPoolExecutor):
    """A daemon loop's default executor: when the loop ends it does not wait for work still
    running in its threads (an embedding of a long batch, a blocked read); `join_threads` waits
    for them a bounded time as the process exits."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=True)


def run_daemon(main: Coroutine[Any, Any, int]) -> int:
    """`asyncio.run` for a daemon: the same, but its end never waits without a bound for the
    default executor's threads (`asyncio.run` does, in Python 3.11)."""
    with asyncio.Runner() as runner:
        runner.get_loop().set_default_executor(_EndWithoutWaiting(thread_name_prefix="yuiju"))
        return runner.run(main)


THREADS_JOIN_SECONDS = 3.0
"""How long, in all, a stopped daemon waits for threads still running (an embedding computing,
a library's worker) before it exits without them."""


def join_threads(seconds: float) -> list[threading.Thread]:
    """Wait up to ``seconds`` in all for the threads that would keep the process alive (not
    daemon threads); the ones still running after that."""
    deadline = time.monotonic() + seconds
    waiting = [
        t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon
    ]
    # polled, not `Thread.join(timeout)`: a timed join can wait forever where the clock is faked
    while (waiting := [t for t in waiting if t.is_alive()]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return waiting


def _exit_without_teardown(code: int) -> None:
    """End a daemon that has stopped (stores closed, state saved) without the interpreter's
    teardown of its modules: that alone took 0.7 s after a stop of 0.3 s, and seconds on a loaded
    machine, which whoever stopped it (Ctrl-C, a supervisor's SIGTERM) waits for nothing. What
    the teardown would still do that matters runs first: waiting threads, then the exit handlers
    (an embedded Redis server's stop, log handlers' flush)."""
    import atexit

    if left := join_threads(THREADS_JOIN_SECONDS):
        names = ", ".join(t.name for t in left)
        print(
            f"warning: {len(left)} thread(s) still running after the stop ({names}); exiting "
            "without them (the stores are closed: nothing is lost)",
            file=sys.stderr,
        )
    atexit._run_exitfuncs()  # CPython's own step of the teardown, run here in its order
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _main(args: argparse.Namespace) -> int:
    if args.cmd == "init":
        return cmd_init(args)
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        return _fail(str(exc))
    # their own output on the terminal: log lines only when they matter (or asked for, in chat)
    quiet = args.cmd == "simulate" or (args.cmd == "chat" and cfg.app.log_level != "DEBUG")
    _setup_logging("WARNING" if quiet else cfg.app.log_level, tz=cfg.app.tz)
    from yuiju.characters import CardError
    from yuiju.storage.errors import StorageError
    from yuiju.world.errors import ConfigurationError

    try:
        if args.cmd == "actions":
            return cmd_actions(args, cfg)
        if args.cmd == "status":
            return asyncio.run(_status(cfg, args.json))
        if args.cmd in ("run", "world"):
            if cfg.memory.enabled and not (
                args.cmd == "world" and args.worker
            ):  # as `_run` opens memory
                from yuiju.memory.service import preload_embedder

                preload_embedder(cfg)
            return run_daemon(_run(cfg, args))
        if args.cmd == "simulate":
            return asyncio.run(_simulate(cfg, args))
        if args.cmd == "bot":
            onebot_problem = "onebot" in served_platforms(cfg) and cfg.onebot.token_problem()
            if problem := onebot_problem or asyncio.run(_embedded_memory_problem(cfg)):
                return _fail(problem)
            init_nonebot(cfg)
            logging.getLogger(
                "uvicorn"
            ).propagate = False  # nonebot logs uvicorn itself: no doubled lines
            from nonebot_plugin_yuiju.app import run_bot

            if cfg.memory.enabled:
                from yuiju.memory.service import preload_embedder

                preload_embedder(cfg)
            run_bot(cfg)
            return 0
        if args.cmd == "memory":
            return asyncio.run(_memory(cfg, args))
        if args.cmd == "chat":
            return asyncio.run(_chat(cfg))
    except (ConfigurationError, CardError, StorageError) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
