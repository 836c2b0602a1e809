"""The web chat on the observer page: its routes over real Redis and SQLite and the real chat core
(a scripted model), bad input, tokens and rate limits, the event stream; and real headless
Chromium: type, see her answer, reload, a phone's width (screenshots to look at)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from tests.browser import chromium_page
from tests.chatkit import make_service
from tests.conftest import at_time, make_engine
from tests.test_message_service import LEXICON
from tests.test_web import (
    CHROMIUM,
    RedisProxy,
    client_of,
    needs_chromium,
    observer_of,
    read_events,
    served,
)
from yuiju.config import ChatConfig, YuijuConfig
from yuiju.llm import FunctionChatModel
from yuiju.message.local import LocalChat, LocalSender, local_config
from yuiju.message.stickers import NO_STICKERS, StickerSet, card_folder
from yuiju.storage.history import HistoryStore
from yuiju.web import create_app
from yuiju.web.chat import RateLimit, WebChat
from yuiju.world.clock import SimClock


async def chat_app(
    redis: aioredis.Redis,
    history: HistoryStore,
    *,
    answer: Callable[[list[dict[str, Any]], Any], str] | None = lambda m, s: (
        "你好呀！\n今天我在公园散步了。"
    ),
    token: str | None = None,
    per_minute: int = 20,
    stickers: StickerSet = NO_STICKERS,
    **chat_cfg: Any,
) -> tuple[Any, LocalChat]:
    """The observer app with a web chat on the same stores (as `yuiju world` builds it)."""
    kit = await make_engine(redis, history, start="2026-09-01 10:00")
    clock = SimClock(at_time("2026-09-01 10:00"))
    cfg = local_config(
        YuijuConfig(chat=ChatConfig(**{"max_pause_seconds": 0, **chat_cfg})),
        web_token=token is not None,
    )
    sender = LocalSender(clock)
    service = make_service(
        redis,
        cfg=cfg.chat,
        clock=clock,
        sender=sender,
        keys=kit.keys,
        history=history,
        world=kit.store,
        lexicon=LEXICON,
        model=FunctionChatModel(answer) if answer is not None else None,
        stickers=stickers,
    )
    await service.ensure()
    chat = LocalChat(service, sender)
    app = create_app(
        observer_of(kit, redis, history),
        token=token,
        chat=WebChat.of(chat, per_minute=per_minute),
    )
    return app, chat


async def send(client: httpx.AsyncClient, name: str, text: str, **kw: Any) -> httpx.Response:
    return await client.post("/chat/send", json={"name": name, "text": text}, **kw)


# -- talking ---------------------------------------------------------------------------------------


async def test_a_visitor_talks_to_her_and_the_conversation_is_kept(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    app, _ = await chat_app(redis, sqlite_history)
    async with client_of(app) as client:
        page = await client.get("/")
        said = await send(client, "小明", "你今天做了什么？")
        again = await client.get("/chat/history", params={"name": "小明"})
        other = await client.get("/chat/history", params={"name": "小红"})
    assert (
        page.status_code == 200
        and 'id="chat"' in page.text
        and "和悠酱聊天" in page.text
        and "💬" not in page.text
    )
    assert said.status_code == 200, said.text
    assert said.json() == {
        "answered": True,
        "replies": ["你好呀！", "今天我在公园散步了。"],
        "reason": "answered",
        "note": "",
        "time": "10:00",
    }
    got = again.json()
    assert (got["person"], got["name"], got["available"], got["why"]) == (
        "web:小明",
        "小明",
        True,
        None,
    )
    assert [(m["me"], m["text"]) for m in got["messages"]] == [
        (True, "你今天做了什么？"),
        (False, "你好呀！"),
        (False, "今天我在公园散步了。"),
    ]
    assert all(m["time"] == "10:00" for m in got["messages"])
    assert other.json()["messages"] == []  # a conversation per visitor
    logged = await sqlite_history.find("chat_log", eq={"session_id": "private:web:小明"})
    assert {d["user_id"] for d in logged} == {"web:小明", "self:yuiju"}  # in her message log too


async def test_the_same_name_in_another_case_is_the_same_visitor(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    app, _ = await chat_app(redis, sqlite_history)
    async with client_of(app) as client:
        await send(client, "Alice", "hi")
        got = (await client.get("/chat/history", params={"name": "alice"})).json()
    assert got["person"] == "web:alice" and got["messages"][0]["text"] == "hi"


async def test_without_a_model_the_box_says_why_and_messages_are_still_recorded(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    app, _ = await chat_app(redis, sqlite_history, answer=None)
    async with client_of(app) as client:
        page = await client.get("/")
        said = await send(client, "小明", "在吗")
        got = (await client.get("/chat/history", params={"name": "小明"})).json()
    assert 'id="chat-why"' in page.text and "[llm]" in page.text and "base_url" in page.text
    body = said.json()
    assert said.status_code == 200 and not body["answered"]
    assert body["reason"] == "no chat model configured" and "[llm]" in body["note"]
    assert not got["available"] and "[llm]" in got["why"]
    assert [m["text"] for m in got["messages"]] == ["在吗"]


async def test_her_lines_stream_with_a_typing_event_first(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    app, _ = await chat_app(redis, sqlite_history, max_pause_seconds=0.3, chars_per_second=100)
    async with (
        served(app) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
        client.stream("GET", "/chat/events", params={"name": "小明"}) as stream,
    ):
        assert stream.headers["content-type"].startswith("text/event-stream")
        reading = asyncio.ensure_future(read_events(stream, 4))
        await asyncio.sleep(0.2)  # the stream is listening
        said = await send(client, "小明", "你好")
        events = await reading
    assert said.json()["answered"]
    assert [kind for _, kind, _ in events] == ["typing", "line", "line", "done"]
    assert [data["text"] for _, kind, data in events if kind == "line"] == [
        "你好呀！",
        "今天我在公园散步了。",
    ]
    assert events[-1][2]["answered"] is True


# -- her stickers ---------------------------------------------------------------------------------

GIF = b"GIF89a" + b"\x00" * 32
WEBP = b"RIFF\x00\x00\x00\x00WEBPVP8 " + b"\x00" * 16


def sticker_set(tmp_path: Path) -> StickerSet:
    """开心 (her card's real PNG), 摸鱼 (GIF), 晚 安 (WebP); beside the folder a PNG that is no
    sticker (``secret.png``), inside it a file that cannot be one (``notes.txt``)."""
    folder = tmp_path / "stickers"
    folder.mkdir()
    (folder / "开心.png").write_bytes((card_folder("yuiju") / "开心.png").read_bytes())
    (folder / "摸鱼.gif").write_bytes(GIF)
    (folder / "晚 安.webp").write_bytes(WEBP)
    (folder / "notes.txt").write_text("not a sticker")
    (tmp_path / "secret.png").write_bytes(b"\x89PNG\r\n\x1a\n secret")
    return StickerSet.load(folder)


def sticker_answer(messages: list[dict[str, Any]], _: Any) -> str:
    return "好耶！\n[表情包：开心]"


async def test_her_sticker_streams_by_name_and_reads_back_as_a_sticker(
    redis: aioredis.Redis, sqlite_history: HistoryStore, tmp_path: Path
) -> None:
    app, _ = await chat_app(
        redis, sqlite_history, answer=sticker_answer, stickers=sticker_set(tmp_path)
    )
    async with (
        served(app) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
        client.stream("GET", "/chat/events", params={"name": "小明"}) as stream,
    ):
        reading = asyncio.ensure_future(read_events(stream, 4))
        await asyncio.sleep(0.2)  # the stream is listening
        said = await send(client, "小明", "[表情包：开心] 我考了满分")
        events = await reading
        history = (await client.get("/chat/history", params={"name": "小明"})).json()
    assert said.json()["replies"] == ["好耶！", "[表情包：开心]"]
    lines = [(data["text"], data.get("sticker")) for _, kind, data in events if kind == "line"]
    assert lines == [("好耶！", None), ("[开心]", "开心")]
    # her context keeps the marker; read back, it is her sticker again (a visitor's typed
    # marker stays what they typed)
    assert [(m["me"], m["text"], m["sticker"]) for m in history["messages"]] == [
        (True, "[表情包：开心] 我考了满分", None),
        (False, "好耶！", None),
        (False, "[开心]", "开心"),
    ]


async def test_a_sticker_image_is_served_with_its_type_and_cache_headers(
    redis: aioredis.Redis, sqlite_history: HistoryStore, tmp_path: Path
) -> None:
    stickers = sticker_set(tmp_path)
    app, _ = await chat_app(redis, sqlite_history, stickers=stickers)
    async with client_of(app) as client:
        got = {name: await client.get(f"/chat/stickers/{name}") for name in stickers.names}
        png = got["开心"]
        again = await client.get(
            "/chat/stickers/开心", headers={"If-None-Match": png.headers["etag"]}
        )
    assert {name: r.status_code for name, r in got.items()} == {
        "开心": 200,
        "摸鱼": 200,
        "晚 安": 200,
    }
    assert {name: r.headers["content-type"] for name, r in got.items()} == {
        "开心": "image/png",
        "摸鱼": "image/gif",
        "晚 安": "image/webp",
    }
    assert png.content == (card_folder("yuiju") / "开心.png").read_bytes()
    assert got["晚 安"].content == WEBP
    for response in got.values():
        cache = response.headers["cache-control"]
        assert "private" in cache and "max-age=" in cache, cache  # behind the page's token
        assert response.headers["etag"] and response.headers["x-content-type-options"] == "nosniff"
    assert again.status_code == 304 and not again.content


async def test_only_her_stickers_are_served_never_a_file_beside_them(
    redis: aioredis.Redis, sqlite_history: HistoryStore, tmp_path: Path
) -> None:
    app, _ = await chat_app(redis, sqlite_history, stickers=sticker_set(tmp_path))
    bare, _ = await chat_app(redis, sqlite_history)  # no stickers at all
    async with client_of(app) as client, client_of(bare) as without:
        tried = {
            path: await client.get(path)
            for path in (
                "/chat/stickers/不存在",
                "/chat/stickers/开心.png",  # a name, not a file name
                "/chat/stickers/notes",
                "/chat/stickers/..%2Fsecret",
                "/chat/stickers/..%2Fsecret.png",
                "/chat/stickers/..%2F..%2Fstickers%2F开心.png",
                "/chat/stickers/%2E%2E%2Fsecret.png",
                "/chat/stickers/..",
                "/chat/stickers/%2Fetc%2Fpasswd",
            )
        }
        none = await without.get("/chat/stickers/开心")
    assert {path: r.status_code for path, r in tried.items()} == dict.fromkeys(tried, 404)
    assert all(b"secret" not in r.content and b"root:" not in r.content for r in tried.values())
    assert "不存在" in tried["/chat/stickers/不存在"].json()["error"]
    assert none.status_code == 404


async def test_a_sticker_needs_the_page_token_when_one_is_set(
    redis: aioredis.Redis, sqlite_history: HistoryStore, tmp_path: Path
) -> None:
    app, _ = await chat_app(redis, sqlite_history, token="s3cret", stickers=sticker_set(tmp_path))
    async with client_of(app) as client:
        without = await client.get("/chat/stickers/开心")
        wrong = await client.get("/chat/stickers/开心", params={"token": "wrong"})
        unknown = await client.get("/chat/stickers/不存在")
        right = await client.get("/chat/stickers/开心", params={"token": "s3cret"})
        header = await client.get("/chat/stickers/开心", headers={"X-Yuiju-Token": "s3cret"})
    assert (without.status_code, wrong.status_code, unknown.status_code) == (401, 401, 401)
    assert not without.content.startswith(b"\x89PNG")
    assert (right.status_code, header.status_code) == (200, 200)
    assert right.headers["content-type"] == "image/png"


# -- what is refused -------------------------------------------------------------------------------


async def test_bad_input_is_refused_with_a_reason_and_nothing_is_recorded(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    app, _ = await chat_app(redis, sqlite_history, max_input_chars=50)
    async with client_of(app) as client:
        cases = {
            "empty": await send(client, "小明", ""),
            "blank": await send(client, "小明", "  \n\t "),
            "too long": await send(client, "小明", "啊" * 51),
            "no name": await client.post("/chat/send", json={"text": "你好"}),
            "bad name": await send(client, "小 明", "你好"),
            "long name": await send(client, "名" * 21, "你好"),
            "her name": await send(client, "悠酱", "你好"),
            "text not a string": await client.post(
                "/chat/send", json={"name": "小明", "text": ["你好"]}
            ),
            "not an object": await client.post("/chat/send", json=["小明", "你好"]),
            "not JSON": await client.post(
                "/chat/send", content=b"{nope", headers={"Content-Type": "application/json"}
            ),
            "a form": await client.post("/chat/send", data={"name": "小明", "text": "你好"}),
            "another site": await send(
                client, "小明", "你好", headers={"Origin": "https://evil.example"}
            ),
            "huge": await client.post(
                "/chat/send",
                content=json.dumps({"name": "小明", "text": "x" * 70_000}),
                headers={"Content-Type": "application/json"},
            ),
        }
        history = await client.get("/chat/history", params={"name": "小明"})
        bad_history = await client.get("/chat/history", params={"name": "a:b"})
        bad_events = await client.get("/chat/events", params={"name": ""})
    statuses = {case: r.status_code for case, r in cases.items()}
    assert statuses == {
        "empty": 400,
        "blank": 400,
        "too long": 413,
        "no name": 400,
        "bad name": 400,
        "long name": 400,
        "her name": 400,
        "text not a string": 400,
        "not an object": 400,
        "not JSON": 400,
        "a form": 415,
        "another site": 403,
        "huge": 413,
    }
    errors = {case: r.json()["error"] for case, r in cases.items()}
    assert "空" in errors["empty"] and "50" in errors["too long"] and "51" in errors["too long"]
    assert "空格" in errors["bad name"] and "20" in errors["long name"]
    assert "她的名字" in errors["her name"] and "JSON" in errors["a form"]
    assert history.json()["messages"] == []  # none of it was recorded
    assert bad_history.status_code == 400 and ":" in bad_history.json()["error"]
    assert bad_events.status_code == 400


async def test_the_same_site_may_send(redis: aioredis.Redis, sqlite_history: HistoryStore) -> None:
    app, _ = await chat_app(redis, sqlite_history)
    async with client_of(app) as client:
        said = await send(client, "小明", "你好", headers={"Origin": "http://observer"})
    assert said.status_code == 200


async def test_every_chat_route_needs_the_page_token(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    app, _ = await chat_app(redis, sqlite_history, token="s3cret")
    async with client_of(app) as client:
        for method, path, params in (
            ("GET", "/chat/history", {"name": "小明"}),
            ("GET", "/chat/events", {"name": "小明"}),
            ("POST", "/chat/send", {}),
        ):
            for extra, headers in (({}, {}), ({"token": "wrong"}, {})):
                denied = await client.request(
                    method,
                    path,
                    params={**params, **extra},
                    headers=headers,
                    json={"name": "小明", "text": "你好"},
                )
                assert denied.status_code == 401, (path, extra)
                assert "悠酱" not in denied.text
        history = await client.get("/chat/history", params={"name": "小明", "token": "s3cret"})
        assert history.status_code == 200 and history.json()["messages"] == []  # nothing said
        said = await client.post(
            "/chat/send",
            params={"token": "s3cret"},
            json={"name": "小明", "text": "你好"},
        )
        assert said.status_code == 200 and said.json()["answered"]
        page = await client.get("/", params={"token": "s3cret"})
    assert 'id="chat"' in page.text


async def test_a_visitor_and_an_address_are_rate_limited_with_when_to_retry(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    app, _ = await chat_app(redis, sqlite_history, user_messages_per_minute=2, per_minute=3)
    async with client_of(app) as client:
        first = [(await send(client, "小明", f"第{n}句")).status_code for n in range(3)]
        other = [(await send(client, "小红", f"第{n}句")).status_code for n in range(2)]
        late = await send(client, "小明", "还在吗")
        history = (await client.get("/chat/history", params={"name": "小明"})).json()
    assert first == [200, 200, 429]  # the visitor's own limit ([chat] user_messages_per_minute)
    assert other == [200, 429]  # the address's limit ([web] chat_per_minute) for every name there
    assert late.status_code == 429 and 1 <= int(late.headers["retry-after"]) <= 60
    assert "秒后再发" in late.json()["error"]
    assert [m["text"] for m in history["messages"] if m["me"]] == ["第0句", "第1句"]


async def test_redis_down_refuses_with_503_and_the_chat_comes_back(
    redis: aioredis.Redis, redis_url: str, sqlite_history: HistoryStore
) -> None:
    proxy = RedisProxy(redis_url)
    await proxy.plug()
    through = aioredis.Redis.from_url(
        f"redis://127.0.0.1:{proxy.port}", decode_responses=True, socket_connect_timeout=1
    )
    try:
        app, _ = await chat_app(through, sqlite_history)
        async with client_of(app) as client:
            await proxy.unplug()
            down = await send(client, "小明", "你好")
            history = await client.get("/chat/history", params={"name": "小明"})
            await proxy.plug()
            back = await send(client, "小明", "你好")
    finally:
        await through.aclose()
        with contextlib.suppress(Exception):
            await proxy.unplug()
    assert down.status_code == 503 and down.headers["retry-after"] == "5"
    assert "Redis" in down.json()["error"]
    assert history.status_code == 503
    assert back.status_code == 200 and back.json()["answered"]


def test_a_rate_limit_frees_up_after_a_minute_and_forgets_idle_keys() -> None:
    now = [100.0]
    limit = RateLimit(2, monotonic=lambda: now[0], max_keys=3)
    for _ in range(2):
        assert limit.wait("a") == 0
        limit.hit("a")
    assert limit.wait("a") == pytest.approx(60)
    now[0] += 30
    assert limit.wait("a") == pytest.approx(30)
    now[0] += 30
    assert limit.wait("a") == 0
    for key in ("b", "c", "d"):
        limit.hit(key)
    assert len(limit._hits) == 3 and "a" not in limit._hits  # the least recently used went


async def test_without_a_chat_the_page_has_no_box_and_no_chat_routes(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history)
    app = create_app(observer_of(kit, redis, sqlite_history))
    async with client_of(app) as client:
        page = await client.get("/")
        assert (await client.get("/chat/history", params={"name": "a"})).status_code == 404
        assert (await send(client, "a", "你好")).status_code == 404
    assert 'id="chat"' not in page.text and "只读页面" in page.text


async def test_the_only_route_that_is_not_a_read_is_sending_a_chat_message(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    app, _ = await chat_app(redis, sqlite_history)
    writes = {
        (route.path, m)
        for route in app.routes
        for m in getattr(route, "methods", set())
        if m not in ("GET", "HEAD")
    }
    assert writes == {("/chat/send", "POST")}


# -- a real browser --------------------------------------------------------------------------------

CHAT_LAYOUT = """(() => {
  const problems = [];
  const page = document.documentElement;
  const view = {w: window.innerWidth, h: window.innerHeight};
  if (page.scrollWidth > page.clientWidth + 1) {
    problems.push(`the page scrolls sideways: ${page.scrollWidth} px > ${page.clientWidth} px`);
  }
  const box = document.getElementById("chat").getBoundingClientRect();
  if (box.left < -0.5 || box.top < -0.5 || box.right > view.w + 0.5 || box.bottom > view.h + 0.5) {
    problems.push(`the chat box is outside the screen: ${JSON.stringify(box)} in ${JSON.stringify(view)}`);
  }
  for (const id of ["chat-input", "chat-send", "chat-log"]) {
    const r = document.getElementById(id).getBoundingClientRect();
    if (!r.width || !r.height) { problems.push(`#${id} is not shown`); continue; }
    if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.bottom > box.bottom + 0.5) {
      problems.push(`#${id} sticks out of the chat box`);
    }
  }
  const log = document.getElementById("chat-log");
  if (log.scrollWidth > log.clientWidth + 1) { problems.push("the conversation scrolls sideways"); }
  for (const el of document.querySelectorAll("#chat .bubble, #chat-input, #chat-send")) {
    const size = parseFloat(getComputedStyle(el).fontSize);
    if (size < 14) { problems.push(`${el.id || el.className} text is ${size} px`); }
  }
  const input = document.getElementById("chat-input");
  if (parseFloat(getComputedStyle(input).fontSize) < 16 && view.w < 600) {
    problems.push("the input's text is under 16 px: a phone zooms in on it");
  }
  return problems;
})()"""
"""What a visitor would see wrong with the chat box: off the screen, its input or button cut,
sideways scrolling, text too small to read (or an input a phone zooms into)."""


def screenshots_dir(tmp_path: Path) -> Path:
    """Where the browser tests leave their screenshots: ``$SCREENSHOTS_DIR`` or the test's temp dir."""
    chosen = Path(os.environ.get("SCREENSHOTS_DIR") or tmp_path)
    chosen.mkdir(parents=True, exist_ok=True)
    return chosen


async def wait_for(page: Any, expression: str, *, seconds: float = 15) -> Any:
    for _ in range(int(seconds / 0.1)):
        value = await page.evaluate(expression)
        if value:
            return value
        await asyncio.sleep(0.1)
    state = await page.evaluate(
        "JSON.stringify({log: [...document.querySelectorAll('#chat-log li')].map(li => li.className"
        " + ':' + li.textContent), note: document.getElementById('chat-note').textContent})"
    )
    raise AssertionError(f"never true in the browser: {expression}; the chat: {state}")


BUBBLES = "[...document.querySelectorAll('#chat-log li')].map(li => [li.className, li.querySelector('.bubble').textContent])"


async def type_and_send(page: Any, text: str) -> None:
    await page.evaluate(
        f"(() => {{ const i = document.getElementById('chat-input'); i.focus();"
        f" i.value = {json.dumps(text)}; i.dispatchEvent(new Event('input'));"
        " i.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true})); return true; })()"
    )


@needs_chromium
async def test_chromium_a_visitor_talks_types_reloads_and_the_conversation_is_there(
    redis: aioredis.Redis, sqlite_history: HistoryStore, tmp_path: Path
) -> None:
    def answer(messages: list[dict[str, Any]], _: Any) -> str:
        said = messages[-1]["content"]
        return "早上好呀小明！\n我刚在家吃完早饭。" if "早上好" in said else "嗯嗯，我在听。"

    app, _ = await chat_app(
        redis,
        sqlite_history,
        answer=answer,
        token="s3cret",
        max_pause_seconds=0.4,
        chars_per_second=40,
        user_messages_per_minute=2,
    )
    shots = screenshots_dir(tmp_path)
    async with served(app) as url, chromium_page(CHROMIUM) as page:
        await page.open(url, width=1280, height=800)
        assert "401" in await page.evaluate("document.body.textContent") or "令牌" in (
            await page.evaluate("document.body.textContent")
        )
        await page.open(url + "?token=s3cret", width=1280, height=800)
        await page.evaluate("document.getElementById('chat-open').click(), true")
        await wait_for(page, "!document.getElementById('chat-name-form').hidden")
        await page.screenshot(shots / "webchat-laptop-name.png", "#chat")
        await page.evaluate(
            "(() => { document.getElementById('chat-name').value = '小明';"
            " document.getElementById('chat-name-form').requestSubmit(); return true; })()"
        )
        await wait_for(page, "!document.getElementById('chat-form').hidden")
        await type_and_send(page, "早上好！")
        await wait_for(page, "!document.getElementById('chat-typing').hidden")  # she is typing
        await wait_for(page, "document.querySelectorAll('#chat-log li.her').length >= 2")
        await wait_for(page, "!document.querySelector('#chat-log li.pending')")  # the send ended
        bubbles = await page.evaluate(BUBBLES)
        assert bubbles == [
            ["me", "早上好！"],
            ["her", "早上好呀小明！"],
            ["her", "我刚在家吃完早饭。"],
        ]
        await wait_for(page, "document.getElementById('chat-typing').hidden")
        laptop = await page.evaluate(CHAT_LAYOUT)
        await page.screenshot(shots / "webchat-laptop.png")
        await page.screenshot(shots / "webchat-laptop-box.png", "#chat")
        # a reload: the name is remembered, the box is open, the conversation is read back
        await page.open(url + "?token=s3cret", width=1280, height=800)
        await wait_for(page, "document.querySelectorAll('#chat-log li').length === 3")
        assert await page.evaluate(BUBBLES) == bubbles
        assert (
            await page.evaluate("document.getElementById('chat-who').textContent") == "· 你是 小明"
        )
        # a phone: the launcher over the page, then the box over the whole screen
        await page.evaluate("localStorage.setItem('yuiju-chat-open', ''), true")
        await page.open(url + "?token=s3cret", width=390, height=844, mobile=True)
        await page.screenshot(shots / "webchat-phone-launcher.png", "#chat-open")
        launcher = await page.evaluate(
            "(() => { const r = document.getElementById('chat-open').getBoundingClientRect();"
            " return r.right <= innerWidth && r.bottom <= innerHeight && r.width > 0; })()"
        )
        await page.evaluate("document.getElementById('chat-open').click(), true")
        await wait_for(page, "document.querySelectorAll('#chat-log li').length === 3")
        await type_and_send(page, "你在干嘛")
        await wait_for(page, "document.querySelectorAll('#chat-log li').length === 5")
        await wait_for(page, "!document.querySelector('#chat-log li.pending')")
        phone = await page.evaluate(CHAT_LAYOUT)
        await page.screenshot(shots / "webchat-phone.png", "#chat")
        # too long: said at once, nothing sent, the text stays in the box
        await type_and_send(page, "啊" * 801)
        await wait_for(page, "!document.getElementById('chat-note').hidden")
        too_long = await page.evaluate("document.getElementById('chat-note').textContent")
        kept = await page.evaluate("document.getElementById('chat-input').value.length")
        # refused by the server (a third message in a minute): the text comes back into the box
        await type_and_send(page, "还有一句")
        await wait_for(page, "!!document.querySelector('#chat-log li.failed')")
        refused = await page.evaluate("document.getElementById('chat-note').textContent")
        back = await page.evaluate("document.getElementById('chat-input').value")
        await page.screenshot(shots / "webchat-phone-refused.png", "#chat")
    print(f"screenshots: {shots}")
    assert {"laptop": laptop, "phone": phone} == {"laptop": [], "phone": []}
    assert launcher  # on the screen
    assert "800" in too_long and kept == 801
    assert "秒后再发" in refused and back == "还有一句"


STICKER_SHOWN = """(() => {
  const imgs = [...document.querySelectorAll('#chat-log li.her img')];
  if (!imgs.length || !imgs.every(i => i.complete && i.naturalWidth > 0)) { return null; }
  const img = imgs[0], r = img.getBoundingClientRect();
  const log = document.getElementById('chat-log').getBoundingClientRect();
  return {
    count: imgs.length, alt: img.alt, natural: img.naturalWidth,
    width: Math.round(r.width), inside: r.left >= log.left - 0.5 && r.right <= log.right + 0.5,
    bubbles: [...document.querySelectorAll('#chat-log li')].map(li => [li.className,
      li.querySelector('img') ? 'img:' + li.querySelector('img').alt : li.querySelector('.bubble').textContent]),
  };
})()"""
"""Her sticker in the conversation once every sticker image has loaded (None until then)."""


@needs_chromium
async def test_chromium_her_sticker_shows_as_an_image_on_a_phone_and_a_laptop(
    redis: aioredis.Redis, sqlite_history: HistoryStore, tmp_path: Path
) -> None:
    app, _ = await chat_app(
        redis,
        sqlite_history,
        answer=sticker_answer,
        token="s3cret",
        stickers=StickerSet.load(card_folder("yuiju"), configured=False),
    )
    shots = screenshots_dir(tmp_path)
    async with served(app) as url, chromium_page(CHROMIUM) as page:
        page_url = url + "?token=s3cret"
        await page.open(page_url, width=390, height=844, mobile=True)
        await page.evaluate(
            "localStorage.setItem('yuiju-chat-name', '小明'), localStorage.setItem('yuiju-chat-open', '1'), true"
        )
        await page.open(page_url, width=390, height=844, mobile=True)
        await wait_for(page, "!document.getElementById('chat-form').hidden")
        await type_and_send(page, "我考了满分")
        await wait_for(page, STICKER_SHOWN)  # live, from the event stream
        await wait_for(page, "!document.querySelector('#chat-log li.pending')")  # the send ended
        phone = await page.evaluate(STICKER_SHOWN)
        phone_layout = await page.evaluate(CHAT_LAYOUT)
        await page.screenshot(shots / "webchat-phone-sticker.png", "#chat")
        # read back from the conversation's history
        await page.open(page_url, width=1280, height=800)
        laptop = await wait_for(page, STICKER_SHOWN)
        laptop_layout = await page.evaluate(CHAT_LAYOUT)
        await page.screenshot(shots / "webchat-laptop-sticker.png", "#chat")
    print(f"screenshots: {shots}")
    expected = [["me", "我考了满分"], ["her", "好耶！"], ["her", "img:开心"]]
    for seen in (phone, laptop):
        assert seen["bubbles"] == expected
        assert (seen["count"], seen["alt"], seen["natural"]) == (1, "开心", 160)
        assert seen["inside"] and 48 <= seen["width"] <= 160, seen
    assert {"phone": phone_layout, "laptop": laptop_layout} == {"phone": [], "laptop": []}


@needs_chromium
async def test_chromium_without_a_model_the_box_says_why(
    redis: aioredis.Redis, sqlite_history: HistoryStore, tmp_path: Path
) -> None:
    app, _ = await chat_app(redis, sqlite_history, answer=None)
    shots = screenshots_dir(tmp_path)
    async with served(app) as url, chromium_page(CHROMIUM) as page:
        await page.open(url, width=390, height=844, mobile=True)
        await page.evaluate(
            "localStorage.setItem('yuiju-chat-name', '小明'), localStorage.setItem('yuiju-chat-open', '1'), true"
        )
        await page.open(url, width=390, height=844, mobile=True)
        await wait_for(page, "!document.getElementById('chat-form').hidden")
        why = await page.evaluate("document.getElementById('chat-why').textContent")
        await type_and_send(page, "在吗")
        await wait_for(
            page, "!!document.querySelector('#chat-log li.me .meta').textContent"
        )  # sent
        note_hidden = await page.evaluate("document.getElementById('chat-note').hidden")
        bubbles = await page.evaluate(BUBBLES)
        await page.screenshot(shots / "webchat-phone-no-model.png", "#chat")
    assert "[llm]" in why and "base_url" in why
    assert note_hidden and bubbles == [["me", "在吗"]]  # recorded; the reason is said once, above
