"""A OneBot v11 implementation (NapCat, Lagrange) on loopback: it dials the app's reverse
WebSocket ``/onebot/v11/ws`` with its token, pushes events and answers the app's API calls
(``send_msg``, ``get_msg`` for quotes) on the same socket.

    async with OneBotFake() as fake, ...:          # the app listens on fake.app_url
        await fake.wait_connected()                 # dials, sends the lifecycle connect event
        await fake.send_group_message("在吗", mention_bot=True)
        [sent] = await fake.sent_until_quiet(3.0)   # Sent(chat="123456", ...)

Unlike the other fakes it serves nothing: OneBot's reverse WebSocket is the app's server.

Bad frames go on the same socket. What the app does with them depends on the app: plain
``nonebot-adapter-onebot`` drops the connection on a frame that is not JSON (``truncated``,
``garbage``) and logs the others; this fake then dials again, as NapCat does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any, ClassVar, Self

import websockets
from starlette.routing import BaseRoute

from tests.fakes._base import (
    ELEMENTS_TEXT,
    ApiCall,
    BadFrame,
    FakePlatform,
    Person,
    Sent,
    deep_json,
)


class OneBotFake(FakePlatform):
    """One QQ account (the bot), one group and the private chats of whoever writes."""

    adapter: ClassVar[str] = "nonebot.adapters.onebot.v11"
    DEFAULT_USER: ClassVar[Person] = Person(id="20002", name="小明")

    def __init__(
        self, *, token: str = "onebot-secret", self_id: str = "10001", group_id: str = "123456"
    ) -> None:
        super().__init__()
        self.token = token
        self.self_id = self_id
        self.group_id = group_id
        self.connections = 0
        self.messages: dict[int, dict[str, Any]] = {}
        """Every message by id, received or sent: ``get_msg`` answers from here."""
        self._ws: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._lock = asyncio.Lock()

    def routes(self) -> list[BaseRoute]:
        return []

    def nonebot_config(self) -> dict[str, Any]:
        return {"onebot_access_token": self.token}

    async def __aenter__(self) -> Self:
        return self  # nothing to serve: the fake dials the app

    async def __aexit__(self, *exc_info: Any) -> None:
        self.closing.set()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()

    # -- what a test does -----------------------------------------------------------------------

    async def wait_connected(self, within: float = 30.0) -> None:
        """Dial the app's reverse WebSocket (retrying until it listens) and say hello."""
        if not self.app_url:
            raise RuntimeError("OneBotFake: no app_url; the app's server must be known first")
        deadline = time.monotonic() + within
        url = self.app_url.replace("http://", "ws://") + "/onebot/v11/ws"
        headers = {
            "X-Self-ID": self.self_id,
            "X-Client-Role": "Universal",
            "Authorization": f"Bearer {self.token}",
        }
        while True:
            try:
                self._ws = await websockets.connect(url, additional_headers=headers)
                break
            except (OSError, websockets.InvalidStatus, websockets.InvalidHandshake):
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"OneBotFake: {url} did not accept within {within} s"
                    ) from None
                await asyncio.sleep(0.2)
        self.connections += 1
        self._reader = asyncio.create_task(self._answer_calls(self._ws))
        await self._send(
            {
                "time": int(time.time()),
                "self_id": int(self.self_id),
                "post_type": "meta_event",
                "meta_event_type": "lifecycle",
                "sub_type": "connect",
            }
        )
        self._connected.set()

    async def send_group_message(
        self,
        text: str = "",
        *,
        user: Person | None = None,
        mention_bot: bool = False,
        reply_to: str | None = None,
        image: bool = False,
        sticker: bool = False,
    ) -> str:
        return await self._message("group", user, text, mention_bot, reply_to, image, sticker)

    async def send_private_message(
        self,
        text: str = "",
        *,
        user: Person | None = None,
        reply_to: str | None = None,
        image: bool = False,
        sticker: bool = False,
    ) -> str:
        return await self._message("private", user, text, False, reply_to, image, sticker)

    async def send_bad_frame(self, kind: BadFrame) -> None:
        if kind == "elements":  # a text without its text, an at without whom
            bad = [{"type": "text", "data": {}}, {"type": "at", "data": {}}, "not a segment"]
            await self._message("group", None, ELEMENTS_TEXT, True, None, False, False, bad)
            return
        frames = {
            "truncated": '{"post_type": "message", "message_type": "gro',
            "garbage": "<html><body>502 Bad Gateway</body></html>\x00\x07",
            "malformed": json.dumps(
                {"post_type": "message", "self_id": int(self.self_id), "message_type": "group"}
            ),
            "unknown": json.dumps(
                {"post_type": "fake_future_event", "self_id": int(self.self_id), "time": 1}
            ),
            "deep": deep_json(),
            "shape": json.dumps([1, 2, 3]),
        }
        await self._ensure_connected()
        async with self._lock:
            await self._ws.send(frames[kind])

    # -- events ---------------------------------------------------------------------------------

    async def _message(
        self,
        scene: str,
        user: Person | None,
        text: str,
        mention_bot: bool,
        reply_to: str | None,
        image: bool,
        sticker: bool,
        extra: list[Any] | None = None,
    ) -> str:
        user = user or self.DEFAULT_USER
        segments: list[Any] = []
        if reply_to is not None:
            segments.append({"type": "reply", "data": {"id": reply_to}})
        if mention_bot:
            segments.append({"type": "at", "data": {"qq": self.self_id}})
            text = f" {text}" if text else text
        if text:
            segments.append({"type": "text", "data": {"text": text}})
        if image:
            segments.append(
                {"type": "image", "data": {"file": "photo.png", "url": "http://127.0.0.1/p.png"}}
            )
        if sticker:
            segments.append({"type": "mface", "data": {"summary": "[斜眼笑]", "emoji_id": "1"}})
        segments += extra or []
        message_id = self.next_id()
        event: dict[str, Any] = {
            "time": int(time.time()),
            "self_id": int(self.self_id),
            "post_type": "message",
            "message_type": scene,
            "sub_type": "normal" if scene == "group" else "friend",
            "message_id": message_id,
            "user_id": int(user.id),
            "message": segments,
            "raw_message": "",
            "font": 0,
            "sender": {"user_id": int(user.id), "nickname": user.name, "card": ""},
        }
        if scene == "group":
            event["group_id"] = int(self.group_id)
            event["anonymous"] = None
            event["sender"]["role"] = "member"
        self.messages[message_id] = event
        await self._send(event)
        return str(message_id)

    async def _send(self, frame: dict[str, Any]) -> None:
        await self._ensure_connected()
        async with self._lock:
            await self._ws.send(json.dumps(frame, ensure_ascii=False))

    async def _ensure_connected(self) -> None:
        """After the app dropped the socket (a frame it could not read), dial again."""
        if self._ws is not None and self._ws.state is websockets.State.OPEN:
            return
        self._connected.clear()
        await self.wait_connected()

    # -- the app's API calls --------------------------------------------------------------------

    async def _answer_calls(self, ws: Any) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for raw in ws:
                try:
                    frame = json.loads(raw)
                except ValueError:
                    continue
                action, params = frame.get("action"), frame.get("params") or {}
                status, data, sent = self._answer(str(action), params)
                self.calls.record(ApiCall(str(action), params, sent=sent))
                reply = {
                    "status": status,
                    "retcode": 0 if status == "ok" else 100,
                    "data": data,
                    "echo": frame.get("echo"),
                }
                async with self._lock:
                    await ws.send(json.dumps(reply, ensure_ascii=False))

    def _answer(self, action: str, params: dict[str, Any]) -> tuple[str, Any, Sent | None]:
        if action in ("send_msg", "send_group_msg", "send_private_msg"):
            return self._send_msg(action, params)
        if action == "get_msg":
            stored = self.messages.get(int(params.get("message_id", 0)))
            if stored is None:
                return "failed", None, None
            return (
                "ok",
                {
                    "time": stored["time"],
                    "message_type": stored["message_type"],
                    "message_id": stored["message_id"],
                    "real_id": stored["message_id"],
                    "sender": stored["sender"],
                    "message": stored["message"],
                },
                None,
            )
        if action == "get_login_info":
            return "ok", {"user_id": int(self.self_id), "nickname": "悠酱"}, None
        return "ok", None, None

    def _send_msg(self, action: str, params: dict[str, Any]) -> tuple[str, Any, Sent]:
        scene = params.get("message_type") or ("group" if "group" in action else "private")
        chat = str(params.get("group_id") if scene == "group" else params.get("user_id"))
        segments = params.get("message")
        if isinstance(segments, str):
            segments = [{"type": "text", "data": {"text": segments}}]
        text, mentions, media, quote = [], [], [], None
        for seg in segments or []:
            kind, data = seg.get("type"), seg.get("data") or {}
            if kind == "text":
                text.append(str(data.get("text", "")))
            elif kind == "at":
                mentions.append(str(data.get("qq")))
            elif kind == "reply":
                quote = str(data.get("id"))
            elif kind in ("image", "mface"):
                media.append("sticker" if kind == "mface" else "image")
        message_id = self.next_id()
        self.messages[message_id] = {
            "time": int(time.time()),
            "message_type": scene,
            "message_id": message_id,
            "sender": {"user_id": int(self.self_id), "nickname": "悠酱"},
            "message": segments,
        }
        sent = Sent(
            chat=chat,
            text="".join(text).strip(),
            message_id=str(message_id),
            reply_to=quote,
            mentions=tuple(mentions),
            media=tuple(media),
        )
        return "ok", {"message_id": message_id}, sent
