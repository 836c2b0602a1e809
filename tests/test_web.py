"""The observer page: every route over real Redis and SQLite, the SSE stream, tokens, stores down,
the `yuiju world` daemon serving it, and real headless Chromium: a load, and the layout measured
at a phone's and a laptop's width (with screenshots to look at)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import re
import shutil
import signal
import socket
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from yuiju.memory.episodes import EPISODES
from yuiju.storage.history import HistoryStore
from yuiju.storage.keys import Keys
from yuiju.web import Observer, ObserverServer, create_app, svg
from yuiju.world.plans import apply_plan_changes
from yuiju.world.policies.scripted import ScriptedPolicy
from yuiju.world.town import HAURA

from .browser import chromium_page
from .conftest import TZ, EngineKit, at_time, make_engine

CHROMIUM = "/usr/bin/chromium"


# -- helpers ------------------------------------------------------------------------------------


async def lived(
    redis: aioredis.Redis, history: HistoryStore, *, days: float = 2.3, **kw: Any
) -> EngineKit:
    """Her life under the utility policy from 2026-09-01 06:00 for ``days``, in the stores."""
    kit = await make_engine(redis, history, start="2026-09-01 06:00", **kw)
    await kit.engine.run(until=kit.clock.now() + timedelta(days=days))
    return kit


def observer_of(
    kit: EngineKit, redis: aioredis.Redis, history: HistoryStore, **kw: Any
) -> Observer:
    return Observer(
        redis=redis,
        history=history,
        keys=kit.keys,
        town=HAURA,
        tz=TZ,
        character_ids=["yuiju"],
        catalogue=kit.loop.catalogue,
        now=kit.clock.now,
        names={"yuiju": "悠酱"},
        **kw,
    )


def client_of(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://observer")


@contextlib.asynccontextmanager
async def served(app: Any) -> AsyncIterator[str]:
    server = ObserverServer(app, "127.0.0.1", 0)
    url = await server.start()
    try:
        yield url
    finally:
        await server.stop()


async def running(kit: EngineKit) -> Any:
    state = await kit.character()
    assert state is not None and state.running is not None
    return state.running


# -- the page ----------------------------------------------------------------------------------


async def test_page_shows_her_life_charts_and_map(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await lived(redis, sqlite_history)
    now_running = await running(kit)
    async with client_of(create_app(observer_of(kit, redis, sqlite_history))) as client:
        page = await client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert 'lang="zh-CN"' in html and 'name="viewport"' in html
    assert now_running.name in html and now_running.reason in html
    assert 'role="progressbar"' in html
    for section in (
        "状态",
        "计划",
        "今天",
        "最近七天",
        "每天做了什么",
        "羽浦町地图",
        "今天的 LLM 用量",
    ):
        assert section in html
    assert html.count('class="linechart"') == 2 and html.count('class="strip"') == 1
    assert "<polyline" in html and html.count('<svg class="bar"') == 7  # a bar per day
    assert 'class="place here" data-place="' in html
    assert "暂无日记" in html and "暂无主动分享" in html  # diary and posts do not exist yet
    # today's timeline: every behavior episode of 2026-09-03 so far, with its reason
    today = await kit.history.find(
        EPISODES.name, ranges={"time": (at_time("2026-09-03 00:00"), at_time("2026-09-04 00:00"))}
    )  # type: ignore[union-attr]
    assert today and all(doc["data"]["reason"] in html for doc in today)
    assert (
        "<script>" in html
        and "cdn" not in html.lower()
        and "http://" not in html.split("<script>")[1]
    )


async def test_panel_is_the_live_part_of_the_page(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await lived(redis, sqlite_history, days=0.5)
    async with client_of(create_app(observer_of(kit, redis, sqlite_history))) as client:
        panel = await client.get("/panel")
    assert panel.status_code == 200
    assert "<html" not in panel.text and 'id="current-action"' in panel.text
    assert (await running(kit)).name in panel.text


async def test_a_hand_edited_episode_shows_by_its_summary_and_the_page_still_renders(
    redis: aioredis.Redis, sqlite_history: HistoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    kit = await lived(redis, sqlite_history, days=0.3)
    today = await sqlite_history.find(EPISODES.name, eq={"type": "behavior"}, sort="time")
    edited = {**today[0], "summary": "手改过的一条", "data": {"action": 42, "place": None}}
    await sqlite_history.put(EPISODES.name, edited)
    observer = observer_of(kit, redis, sqlite_history)
    with caplog.at_level("WARNING"):
        async with client_of(create_app(observer)) as client:
            page = await client.get("/")
            state = (await client.get("/api/state")).json()
    assert page.status_code == 200 and "手改过的一条" in page.text
    shown = [e for e in state["timeline"] if e["id"] == edited["_id"]]
    assert shown and shown[0]["name"] == "手改过的一条" and shown[0]["place"] == ""
    warned = [r.getMessage() for r in caplog.records if edited["_id"] in r.getMessage()]
    assert len(warned) == 1 and "data.action" in warned[0] and "Fix:" in warned[0]


async def test_state_api_matches_the_stores(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await lived(redis, sqlite_history, days=1.2)
    day = kit.clock.now().date().isoformat()
    await redis.hset(
        kit.keys.llm_usage,
        mapping={
            f"{day}:tokens": 1234,
            f"{day}:calls": 5,
            f"{day}:decide:calls": 4,
            f"{day}:decide:failed": 1,
            f"{day}:decide:prompt_tokens": 1100,
            f"{day}:decide:estimated_prompt_tokens": 300,
            f"{day}:decide:completion_tokens": 34,
            f"{day}:chat:calls": 1,
            f"{day}:chat:prompt_tokens": 90,
            f"{day}:chat:completion_tokens": 10,
        },
    )
    her = await kit.character()
    assert her is not None
    her.plans, _ = apply_plan_changes(
        her.plans,
        [
            {"scope": "longTerm", "changeType": "created", "nextPlan": "考上好大学"},
            {"scope": "shortTerm", "changeType": "created", "nextPlan": "下午去公园"},
        ],
        kit.clock.now(),
    )
    await redis.set(kit.keys.character("yuiju"), her.model_dump_json())
    async with client_of(create_app(observer_of(kit, redis, sqlite_history))) as client:
        got = (await client.get("/api/state")).json()
        page = (await client.get("/")).text
    state = await kit.character()
    assert state is not None and state.running is not None
    assert got["character"]["running"]["name"] == state.running.name
    assert got["character"]["money"] == state.money
    assert got["character"]["location_id"] == state.location
    decisions = len([e for e in got["timeline"] if e.get("type", "behavior") == "behavior"])
    llm = got["llm"]
    assert (llm["tokens"], llm["calls"], llm["fallbacks"], llm["failed_calls"]) == (1234, 5, 0, 1)
    assert [
        (u["label"], u["calls"], u["prompt_tokens"], u["estimated_prompt_tokens"])
        for u in llm["by_purpose"]
    ] == [("决策", 4, 1100, 300), ("聊天", 1, 90, 0)]
    assert llm["calls_per_decision"] == round(4 / decisions, 2)
    assert "每次决策" in page and "决策" in page and "（估 300）" in page
    assert [p["title"] for p in got["plans"]] == ["长期计划", "短期计划"]
    assert got["timeline"] and got["world"]["weather"]
    assert "考上好大学" in page and "下午去公园" in page and "1,234" in page


async def test_before_the_world_starts_the_page_says_so(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history)
    async with client_of(create_app(observer_of(kit, redis, sqlite_history))) as client:
        page = await client.get("/")
    assert page.status_code == 200
    assert (
        "世界还没有开始运行" in page.text
        and "今天还没有记录" in page.text
        and "暂无数据" in page.text
    )


async def test_fallback_decisions_are_counted(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    def explode(_request: Any) -> Any:
        raise RuntimeError("model down")

    kit = await make_engine(
        redis, sqlite_history, policy=ScriptedPolicy(explode), start="2026-09-01 10:00"
    )
    await kit.engine.run(until=kit.clock.now() + timedelta(hours=3))
    async with client_of(create_app(observer_of(kit, redis, sqlite_history))) as client:
        got = (await client.get("/api/state")).json()
    assert got["llm"]["fallbacks"] == kit.stats.fallbacks > 0


# -- read-only, tokens, 404 ----------------------------------------------------------------------


async def test_every_route_is_read_only(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history)
    app = create_app(observer_of(kit, redis, sqlite_history))
    methods = {m for route in app.routes for m in getattr(route, "methods", set())}
    assert methods <= {"GET", "HEAD"}
    async with client_of(app) as client:
        assert (await client.post("/")).status_code == 405
        assert (await client.delete("/api/state")).status_code == 405


async def test_unknown_routes_and_characters_are_404(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history)
    async with client_of(create_app(observer_of(kit, redis, sqlite_history))) as client:
        assert (await client.get("/admin")).status_code == 404
        assert (await client.get("/api/nope")).status_code == 404
        assert (await client.get("/?character=nobody")).status_code == 404


async def test_token_guards_every_route_and_leaks_nothing(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await lived(redis, sqlite_history, days=0.4)
    name = (await running(kit)).name
    app = create_app(observer_of(kit, redis, sqlite_history), token="s3cret")
    async with client_of(app) as client:
        for path in ("/", "/panel", "/api/state", "/healthz", "/events"):
            for params, headers in (
                ({}, {}),
                ({"token": "wrong"}, {}),
                ({}, {"Authorization": "Bearer nope"}),
            ):
                denied = await client.get(path, params=params, headers=headers)
                assert denied.status_code == 401, (path, params, headers)
                assert name not in denied.text and "yuiju" not in denied.text
        assert (await client.get("/", params={"token": "s3cret"})).status_code == 200
        assert (
            await client.get("/api/state", headers={"Authorization": "Bearer s3cret"})
        ).status_code == 200
        page = await client.get("/", params={"token": "s3cret"})
    assert name in page.text and re.search(
        r"data-query='[^']*s3cret", page.text
    )  # the script passes it on


async def test_healthz_names_the_history_backend(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history)
    async with client_of(create_app(observer_of(kit, redis, sqlite_history))) as client:
        got = await client.get("/healthz")
    assert got.status_code == 200 and got.json() == {"ok": True, "redis": "ok", "history": "sqlite"}


# -- stores down ------------------------------------------------------------------------------------


class RedisProxy:
    """A TCP front for the test Redis that can be unplugged and plugged back on the same port."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.port = 0
        self.server: asyncio.Server | None = None
        self.pipes: set[asyncio.Task[None]] = set()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.target.startswith("unix://"):
            return await asyncio.open_unix_connection(self.target[len("unix://") :])
        url = httpx.URL(self.target)
        return await asyncio.open_connection(url.host, url.port or 6379)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await self._connect()

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except Exception:
                pass
            finally:
                dst.close()

        tasks = [
            asyncio.create_task(pump(reader, up_writer)),
            asyncio.create_task(pump(up_reader, writer)),
        ]
        self.pipes.update(tasks)
        await asyncio.gather(*tasks, return_exceptions=True)

    async def plug(self) -> None:
        self.server = await asyncio.start_server(
            self._handle, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self.server.sockets[0].getsockname()[1]

    async def unplug(self) -> None:
        assert self.server is not None
        self.server.close()
        for task in self.pipes:
            task.cancel()
        await asyncio.gather(*self.pipes, return_exceptions=True)
        self.pipes.clear()
        await self.server.wait_closed()


async def test_redis_down_gives_503_and_the_page_recovers(
    redis: aioredis.Redis, redis_url: str, sqlite_history: HistoryStore
) -> None:
    kit = await lived(redis, sqlite_history, days=0.3)
    proxy = RedisProxy(redis_url)
    await proxy.plug()
    through = aioredis.Redis.from_url(
        f"redis://127.0.0.1:{proxy.port}", decode_responses=True, socket_connect_timeout=1
    )
    try:
        async with client_of(create_app(observer_of(kit, through, sqlite_history))) as client:
            assert (await client.get("/")).status_code == 200
            await proxy.unplug()
            down = await client.get("/")
            assert down.status_code == 503 and down.headers["retry-after"] == "5"
            assert (
                "存储暂时不可用" in down.text
                and "Redis" in down.text
                and 'http-equiv="refresh"' in down.text
            )
            api = await client.get("/api/state")
            assert api.status_code == 503 and "Redis" in api.json()["error"]
            assert (await client.get("/healthz")).status_code == 503
            await proxy.plug()
            back = await client.get("/")
            assert back.status_code == 200 and (await running(kit)).name in back.text
    finally:
        await through.aclose()
        with contextlib.suppress(Exception):
            await proxy.unplug()


async def test_history_down_gives_503(
    redis: aioredis.Redis, sqlite_history: HistoryStore, tmp_path: Path
) -> None:
    from yuiju.storage.sqlite_history import SqliteHistory

    kit = await lived(redis, sqlite_history, days=0.3)
    broken = SqliteHistory.open(tmp_path / "gone.sqlite3")
    await broken.close()
    async with client_of(create_app(observer_of(kit, redis, broken))) as client:
        down = await client.get("/")
        health = await client.get("/healthz")
    assert down.status_code == 503 and "历史存储" in down.text
    assert health.status_code == 503


# -- live updates ---------------------------------------------------------------------------------------


async def read_events(
    response: httpx.Response, want: int, wait_s: float = 10
) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, event, data) of the next ``want`` SSE events (comments skipped)."""
    got: list[tuple[str, str, dict[str, Any]]] = []
    fields: dict[str, str] = {}

    async def collect() -> None:
        async for line in response.aiter_lines():
            if not line:
                if "data" in fields:
                    got.append(
                        (
                            fields.get("id", ""),
                            fields.get("event", "message"),
                            json.loads(fields["data"]),
                        )
                    )
                    if len(got) >= want:
                        return
                fields.clear()
            elif not line.startswith(":"):
                key, _, value = line.partition(":")
                fields[key] = value.strip()

    await asyncio.wait_for(collect(), wait_s)
    return got


async def test_events_stream_her_actions_as_they_happen(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await lived(redis, sqlite_history, days=0.3)
    first = await running(kit)
    app = create_app(observer_of(kit, redis, sqlite_history))
    async with (
        served(app) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
        client.stream("GET", "/events") as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        # the engine goes on: she finishes what she was doing and starts the next thing
        await kit.engine.run(until=first.ends_at + timedelta(minutes=1))
        events = await read_events(response, 2)
    kinds = [e[1] for e in events]
    assert kinds[:2] == ["action_completed", "action_started"]
    assert events[0][2]["data"]["name"] == first.name and events[0][2]["character_id"] == "yuiju"
    assert all(re.fullmatch(r"\d+-\d+", e[0]) for e in events)


async def test_events_resume_after_last_event_id(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history)
    keys: Keys = kit.keys
    ids = [
        await redis.xadd(
            keys.events,
            {
                "type": "action_started",
                "character_id": "yuiju",
                "time": "",
                "data": json.dumps({"name": f"第{n}件事"}, ensure_ascii=False),
            },
        )
        for n in range(3)
    ]
    app = create_app(observer_of(kit, redis, sqlite_history))
    async with (
        served(app) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
        client.stream("GET", "/events", headers={"Last-Event-ID": ids[0]}) as response,
    ):
        events = await read_events(response, 2)
    assert [e[0] for e in events] == ids[1:]
    assert [e[2]["data"]["name"] for e in events] == ["第1件事", "第2件事"]


async def test_server_stops_promptly_with_a_client_listening(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history)
    server = ObserverServer(create_app(observer_of(kit, redis, sqlite_history)), "127.0.0.1", 0)
    url = await server.start()
    async with (
        httpx.AsyncClient(base_url=url, timeout=10) as client,
        client.stream("GET", "/events") as response,
    ):
        assert response.status_code == 200
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.wait_for(server.stop(), 10)
        assert loop.time() - started < 5


async def test_a_read_that_swallows_its_cancellation_at_the_stop_leaves_no_unretrieved_error(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    # redis-py can swallow a cancellation and end the command with an error later (a dead Redis
    # at the stop): asyncio then logs "Task exception was never retrieved" with a traceback
    from redis.exceptions import ConnectionError as RedisConnectionError

    class StubbornRedis:
        def __getattr__(self, name: str) -> Any:
            return getattr(redis, name)

        async def xread(self, *args: Any, **kwargs: Any) -> Any:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                await asyncio.sleep(0.05)
                raise RedisConnectionError("Connection closed by server.") from None

    kit = await make_engine(redis, sqlite_history)
    loop = asyncio.get_running_loop()
    unhandled: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: unhandled.append(context))
    try:
        server = ObserverServer(
            create_app(observer_of(kit, StubbornRedis(), sqlite_history)), "127.0.0.1", 0
        )  # type: ignore[arg-type]
        url = await server.start()
        async with (
            httpx.AsyncClient(base_url=url, timeout=10) as client,
            client.stream("GET", "/events") as response,
        ):
            assert response.status_code == 200
            await asyncio.wait_for(server.stop(), 10)
        await asyncio.sleep(0.2)
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert [c.get("message") for c in unhandled] == []


# -- drawings ----------------------------------------------------------------------------------------


def test_strip_categories_follow_catalogue_tags() -> None:
    assert svg.category_of({"school", "study"}).id == "school"
    assert svg.category_of({"sleep_more"}).id == "sleep"
    assert svg.category_of({"leisure", "study"}).id == "study"
    assert svg.category_of({"mystery"}).id == "other"


def test_day_strip_splits_a_night_across_two_days() -> None:
    day1, day2 = at_time("2026-09-01 00:00"), at_time("2026-09-02 00:00")
    night = svg.Span(
        at_time("2026-09-01 22:00"), at_time("2026-09-02 07:00"), svg.category_of({"sleep"}), "睡觉"
    )
    drawn = svg.day_strip([night], [day1, day2])
    assert drawn.count('class="cat-sleep"') == 2


def test_drawings_escape_names() -> None:
    point = svg.Point(at_time("2026-09-01 10:00"), {"stamina": 50, "satiety": 50, "mood": 50})
    chart = svg.line_chart(
        [point], at_time("2026-09-01 00:00"), at_time("2026-09-02 00:00"), ("stamina",), title="<b>"
    )
    assert "<b>" not in chart and "&lt;b&gt;" in chart
    span = svg.Span(point.time, point.time + timedelta(hours=1), svg.category_of(()), "<script>")
    assert "<script>" not in svg.day_strip([span], [at_time("2026-09-01 00:00")])
    assert "<script>" not in svg.town_map(HAURA, "park", who="<script>")


def test_town_map_has_every_place_and_link() -> None:
    drawn = svg.town_map(HAURA, "park", {"cafe": False})
    assert all(place.name in drawn for place in HAURA.places.values())
    area = {p.id: p.area for p in HAURA.places.values()}
    roads = {frozenset((area[lk.a], area[lk.b])) for lk in HAURA.links if area[lk.a] != area[lk.b]}
    assert drawn.count('class="link"') == len(roads)  # one road per pair of districts
    assert (
        'class="place here" data-place="park"' in drawn
        and 'class="place closed" data-place="cafe"' in drawn
    )


# -- the daemon serves it --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_yuiju_world_serves_the_page_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "YUIJU_APP__DATA_DIR": str(tmp_path / "data"),
        "YUIJU_WEB__PORT": str(port),
        "YUIJU_CONFIG": str(tmp_path / "none.toml"),
        "YUIJU_WORLD__SPEED": "600",
    }
    (tmp_path / "none.toml").write_text("", encoding="utf-8")
    env.pop("REDIS_URL", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "yuiju.cli",
        "world",
        "--no-panel",
        cwd=Path(__file__).parents[1],
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert f"http://127.0.0.1:{port}/" in line, line
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            for _ in range(50):  # the first decision lands within a moment
                state = (await client.get("/api/state")).json()
                if state["character"] and state["character"]["running"]:
                    break
                await asyncio.sleep(0.1)
            assert state["character"]["running"]["name"]
            page = await client.get("/")
            assert page.status_code == 200 and state["character"]["running"]["name"] in page.text
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


# -- a real browser ----------------------------------------------------------------------------------------


async def chromium(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(errors="replace") + err.decode(errors="replace")[-2000:]


needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None,
    reason=f"Chromium is not installed at {CHROMIUM}: `apt-get install -y chromium fonts-wqy-microhei` (.ci/run does)",
)


@needs_chromium
async def test_chromium_renders_her_action_and_the_charts(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await lived(redis, sqlite_history, days=6.3)
    name = (await running(kit)).name
    app = create_app(observer_of(kit, redis, sqlite_history))
    async with served(app) as url:
        code, dom = await chromium("--dump-dom", url)
        assert code == 0, dom
        assert f'data-action="{(await running(kit)).action_id}">{name}<' in dom
        assert (
            dom.count('class="linechart"') == 2
            and dom.count('class="strip"') == 1
            and "<polyline" in dom
            and 'class="place here"' in dom
        )
        assert app.state.event_streams >= 1  # the page's script subscribed to live updates


LAYOUT_PROBLEMS = """(() => {
  const problems = [];
  const name = (el) => el.closest("[id]").id + " " + el.tagName.toLowerCase()
    + (el.getAttribute("class") ? "." + el.getAttribute("class").split(" ").join(".") : "")
    + " " + JSON.stringify(el.textContent.trim().slice(0, 12));
  const page = document.documentElement;
  if (page.scrollWidth > page.clientWidth + 1) {
    problems.push(`the page scrolls sideways: ${page.scrollWidth} px > ${page.clientWidth} px`);
  }
  for (const el of document.querySelectorAll("body *")) {
    const x = getComputedStyle(el).overflowX;
    if ((x === "auto" || x === "scroll") && el.scrollWidth > el.clientWidth + 1) {
      problems.push(`${name(el)} scrolls sideways: ${el.scrollWidth} px in ${el.clientWidth} px`);
    }
  }
  const texts = [...document.querySelectorAll("#charts *, #map *")].filter((el) =>
    el.tagName.toLowerCase() === "text"
    || [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()));
  const boxes = [];
  for (const el of texts) {
    const box = el.getBoundingClientRect();
    if (!box.width || getComputedStyle(el).visibility === "hidden") { continue; }
    const svg = el.closest("svg");
    const scale = svg && el.tagName.toLowerCase() === "text" ? svg.getScreenCTM().a : 1;
    const size = parseFloat(getComputedStyle(el).fontSize) * scale;
    if (size < 11) { problems.push(`${name(el)} is ${size.toFixed(1)} px`); }
    const clips = [page, el.closest(".card")];
    for (let up = el.parentElement; up; up = up.parentElement) {
      if (up.tagName.toLowerCase() === "svg" || getComputedStyle(up).overflowX !== "visible") {
        clips.push(up);
      }
    }
    for (const clip of clips) {
      const c = clip === page ? {left: 0, right: page.clientWidth} : clip.getBoundingClientRect();
      if (box.left < c.left - 0.5 || box.right > c.right + 0.5) {
        problems.push(`${name(el)} is cut: ${box.left.toFixed(0)}–${box.right.toFixed(0)} px`
          + ` outside ${c.left.toFixed(0)}–${c.right.toFixed(0)} px`);
        break;
      }
    }
    boxes.push([el, box]);
  }
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, p] = boxes[i], [b, q] = boxes[j];
      const w = Math.min(p.right, q.right) - Math.max(p.left, q.left);
      const h = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
      if (w > 1 && h > 1 && !a.contains(b) && !b.contains(a)) {
        problems.push(`${name(a)} overlaps ${name(b)}`);
      }
    }
  }
  return problems;
})()"""
"""What a reader would see wrong with the charts and the map: sideways scrolling (which no
scrollbar hints at on a phone), text cut at an edge, text under 11 px, text over text."""


WIDTHS = [("laptop", 1280, 800, False), ("phone", 390, 844, True)]


@needs_chromium
async def test_the_page_fits_a_phone_and_a_laptop_without_cut_or_tiny_text(
    redis: aioredis.Redis, sqlite_history: HistoryStore, tmp_path: Path
) -> None:
    kit = await lived(redis, sqlite_history, days=6.3)
    app = create_app(observer_of(kit, redis, sqlite_history))
    found = {}
    async with served(app) as url, chromium_page(CHROMIUM) as page:
        for label, width, height, mobile in WIDTHS:
            await page.open(url, width=width, height=height, mobile=mobile)
            found[label] = await page.evaluate(LAYOUT_PROBLEMS)
            await page.screenshot(tmp_path / f"observer-{label}.png")
            for section in ("now", "stats", "timeline", "charts", "map"):
                await page.screenshot(tmp_path / f"observer-{label}-{section}.png", f"#{section}")
    print(f"screenshots: {tmp_path}")
    assert found == {label: [] for label, *_ in WIDTHS}, json.dumps(
        found, ensure_ascii=False, indent=1
    )


async def test_latest_diary_entry_is_shown_once_diaries_exist(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    diary = pytest.importorskip("yuiju.memory.diary")
    kit = await lived(redis, sqlite_history, days=0.3)
    await sqlite_history.ensure(diary.DIARIES)
    await sqlite_history.put(
        diary.DIARIES.name,
        {
            "_id": "d1",
            "character_id": "yuiju",
            "period": "daily",
            "date": "2026-09-01",
            "text": "今天在公园捡到了野莓。",
        },
    )
    async with client_of(create_app(observer_of(kit, redis, sqlite_history))) as client:
        page = await client.get("/")
    assert "今天在公园捡到了野莓。" in page.text and "暂无日记" not in page.text
