"""A Satori server (protocol v1) on loopback, as NapCat, LLOneBot, Chronocat or Koishi serve it.

Events go out over the WebSocket ``/v1/events``: the application sends IDENTIFY (token, and the
``sn`` of the last event it saw when it resumes), the server answers READY with its logins, then
pushes EVENT signals and answers PING with PONG. The HTTP API is ``POST /v1/{resource}.{method}``
with ``Authorization: Bearer <token>`` and ``Satori-Platform`` / ``Satori-User-ID`` naming the login.
Message content is Satori's XML-like element text: ``<at id="1"/>``, ``<quote id="m"/>``,
``<img src="..."/>``, ``<emoji id="..."/>``.

    async with SatoriFake() as fake, NoneBotApp(tmp_path, fake, plugin) as app:
        await fake.wait_connected()
        mid = await fake.send_group_message("在吗", mention_bot=True)
        [sent] = await fake.sent_until_quiet(3.0)   # Sent(chat="123456", text=..., ...)

What the real ``nonebot-adapter-satori`` does with bad frames (checked in tests/test_fakes_satori.py):
``malformed`` and ``unknown`` events are logged and the connection stays; ``truncated`` and
``garbage`` frames make it drop the connection and reconnect at once with the last ``sn`` it saw,
and this fake then replays the events it missed, as the protocol's session recovery says.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from html import escape
from html.parser import HTMLParser
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tests.fakes._base import (
    ELEMENTS_TEXT,
    ApiCall,
    BadFrame,
    FakePlatform,
    Person,
    Sent,
    deep_json,
    now_ms,
    tiny_png,
)

EVENT, PING, PONG, IDENTIFY, READY = 0, 1, 2, 3, 4
"""Satori signalling opcodes (META, 5, is never sent here)."""
TEXT_CHANNEL, DIRECT_CHANNEL = 0, 1


class SatoriFake(FakePlatform):
    """A Satori server with one login (the bot), one group and any number of private chats."""

    adapter: ClassVar[str] = "nonebot.adapters.satori"
    DEFAULT_USER: ClassVar[Person] = Person(id="20002", name="小明")

    def __init__(
        self,
        *,
        token: str | None = "satori-secret",
        platform: str = "qq",
        self_id: str = "10001",
        self_name: str = "悠酱",
        group_id: str = "123456",
        group_name: str = "南风镇",
    ) -> None:
        super().__init__()
        self.token = token
        self.platform = platform
        self.self_id = self_id
        self.self_name = self_name
        self.group_id = group_id
        """On QQ a guild has exactly one channel; both carry this id, as QQ-based servers do."""
        self.group_name = group_name
        self.connections = 0
        """How many times an application has identified (a reconnect counts again)."""
        self.identifies: list[dict[str, Any]] = []
        """The IDENTIFY bodies received, in order (``sn`` shows a resume)."""
        self.messages: dict[str, dict[str, Any]] = {}
        """Every message by id, received or sent: ``message.get`` answers from here."""
        self._sockets: set[WebSocket] = set()
        self._sn = 0
        self._events: list[dict[str, Any]] = []
        self._ready = asyncio.Condition()
        self._sending = asyncio.Lock()

    def routes(self) -> list[BaseRoute]:
        return [
            WebSocketRoute("/v1/events", self._event_socket),
            Route("/v1/{name}", self._api, methods=["GET", "POST", "PUT", "DELETE"]),
            Route("/assets/{name}", self._asset),
        ]

    def nonebot_config(self) -> dict[str, Any]:
        client: dict[str, Any] = {"host": "127.0.0.1", "port": self.port}
        if self.token:
            client["token"] = self.token
        return {"satori_clients": [client]}

    # -- what a test does -----------------------------------------------------------------------

    async def wait_connected(self, within: float = 30.0, *, count: int = 1) -> None:
        """Wait until the adapter has identified ``count`` times in all (reconnects included)."""
        async with self._ready:
            await asyncio.wait_for(
                self._ready.wait_for(lambda: self.connections >= count and bool(self._sockets)),
                within,
            )

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
        """A message-created event in the group channel; returns the new message's id."""
        user = user or self.DEFAULT_USER
        channel = {"id": self.group_id, "type": TEXT_CHANNEL, "name": self.group_name}
        content = self._content(text, mention_bot, reply_to, image, sticker)
        return await self._message_created(channel, user, content, guild=True)

    async def send_private_message(
        self,
        text: str = "",
        *,
        user: Person | None = None,
        reply_to: str | None = None,
        image: bool = False,
        sticker: bool = False,
    ) -> str:
        """A message-created event in the user's direct channel; returns the message id."""
        user = user or self.DEFAULT_USER
        channel = {"id": f"private:{user.id}", "type": DIRECT_CHANNEL}
        content = self._content(text, False, reply_to, image, sticker)
        return await self._message_created(channel, user, content, guild=False)

    def successor(self) -> SatoriFake:
        after = super().successor()
        after._sn = self._sn  # the adapter resumes from the last sn it saw
        return after

    async def send_group_content(self, content: str, *, user: Person | None = None) -> str:
        """A message-created event in the group whose content is ``content`` as written: element
        text a server may send unlike this fake (``<at id=10001/>``, unquoted). Returns its id."""
        channel = {"id": self.group_id, "type": TEXT_CHANNEL, "name": self.group_name}
        return await self._message_created(channel, user or self.DEFAULT_USER, content, guild=True)

    async def send_group_command(
        self, name: str, *arguments: str, user: Person | None = None
    ) -> None:
        """An interaction/command event in the group: someone picked the bot's slash command
        ``name`` from the platform's menu (no message, only its name and arguments)."""
        user = user or self.DEFAULT_USER
        body = {
            **self._envelope("interaction/command"),
            "channel": {"id": self.group_id, "type": TEXT_CHANNEL, "name": self.group_name},
            "guild": {"id": self.group_id, "name": self.group_name},
            "user": {"id": user.id, "name": user.name},
            "member": {"nick": user.name},
            "argv": {"name": name, "arguments": list(arguments), "options": {}},
        }
        await self._dispatch(body)

    async def send_recall(self, message_id: str) -> None:
        """A message-deleted event: the user took the message back (撤回)."""
        message = self.messages.pop(message_id)
        body = {
            **self._envelope("message-deleted"),
            **message["_where"],
            "message": _public(message),
        }
        await self._dispatch(body)

    async def send_bad_frame(self, kind: BadFrame) -> None:
        if kind == "elements":  # a quote of a message the server does not have, an image whose
            # width is no number, a link without its href
            bad = '<img src="x.png" width="wide"/><a>无链接</a>'
            content = '<quote id="no-such-message"/>'
            content += self._content(ELEMENTS_TEXT, True, None, False, False) + bad
            channel = {"id": self.group_id, "type": TEXT_CHANNEL, "name": self.group_name}
            await self._message_created(channel, self.DEFAULT_USER, content, guild=True)
            return
        frames = {
            "truncated": '{"op": 0, "body": {"sn": 9, "type": "message-crea',
            "garbage": "<html><body>502 Bad Gateway</body></html>\x00\x07",
            # right envelope and type, but no channel, no user and a message without an id
            "malformed": json.dumps(
                {"op": EVENT, "body": {**self._envelope("message-created"), "message": {}}}
            ),
            "unknown": json.dumps(
                {"op": EVENT, "body": {**self._envelope("fake-unknown-event"), "user": {"id": "1"}}}
            ),
            "deep": deep_json(),
            # an event without its sn, its user a string
            "shape": json.dumps({"op": EVENT, "body": {"type": "message-created", "user": "x"}}),
        }
        await self._broadcast(frames[kind])

    # -- events ---------------------------------------------------------------------------------

    def _content(
        self, text: str, mention_bot: bool, reply_to: str | None, image: bool, sticker: bool
    ) -> str:
        content = ""
        if reply_to is not None:
            content += f'<quote id="{escape(reply_to)}"/>'
        if mention_bot:  # QQ-based servers put a space between the mention and the text
            content += f'<at id="{escape(self.self_id)}" name="{escape(self.self_name)}"/> '
        content += escape(text, quote=False)
        if image:
            content += f'<img src="{self.base_url}/assets/photo.png"/>'
        if sticker:
            content += '<emoji id="178" name="斜眼笑"/>'
        return content

    def _envelope(self, kind: str) -> dict[str, Any]:
        self._sn += 1
        login = {"sn": 1, "platform": self.platform, "user": self._self_user()}
        return {"sn": self._sn, "type": kind, "timestamp": now_ms(), "login": login}

    def _self_user(self) -> dict[str, Any]:
        return {"id": self.self_id, "name": self.self_name, "is_bot": True}

    async def _message_created(
        self, channel: dict[str, Any], user: Person, content: str, *, guild: bool
    ) -> str:
        where: dict[str, Any] = {"channel": channel, "user": {"id": user.id, "name": user.name}}
        if guild:
            where["guild"] = {"id": self.group_id, "name": self.group_name}
            where["member"] = {"nick": user.name}
        message_id = str(self.next_id())
        self.messages[message_id] = {
            "id": message_id,
            "content": content,
            "created_at": now_ms(),
            "_where": where,
        }
        body = {
            **self._envelope("message-created"),
            **where,
            "message": _public(self.messages[message_id]),
        }
        await self._dispatch(body)
        return message_id

    async def _dispatch(self, body: dict[str, Any]) -> None:
        await self._until_someone_listens()
        async with self._sending:
            # Kept for session recovery: an application that resumes with an older sn gets it.
            self._events.append(body)
            await self._send_all(json.dumps({"op": EVENT, "body": body}, ensure_ascii=False))

    async def _broadcast(self, frame: str) -> None:
        await self._until_someone_listens()
        async with self._sending:
            await self._send_all(frame)

    async def _send_all(self, frame: str) -> None:
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):  # a socket closing under us must not stop the rest
                await ws.send_text(frame)

    async def _until_someone_listens(self) -> None:
        if self._sockets:
            return
        try:  # after a drop, wait for the adapter to come back (it reconnects at once)
            await self.wait_connected(10.0, count=max(self.connections, 1))
        except TimeoutError:
            raise RuntimeError(
                "SatoriFake: no application connected within 10 s; start the bot and "
                "`await fake.wait_connected()` before sending events"
            ) from None

    async def _event_socket(self, ws: WebSocket) -> None:
        await ws.accept()
        try:
            try:
                first = json.loads(await asyncio.wait_for(ws.receive_text(), 10))
            except (TimeoutError, ValueError):
                await ws.close(4000, "expected IDENTIFY within 10 s")
                return
            body = first.get("body") or {}
            if first.get("op") != IDENTIFY:
                await ws.close(4000, "expected IDENTIFY")
                return
            if self.token and body.get("token") != self.token:
                await ws.close(4004, "invalid token")
                return
            self.identifies.append(body)
            login = {
                "sn": 1,
                "platform": self.platform,
                "user": self._self_user(),
                "status": 1,
                "adapter": "fake",
                "features": ["message.delete"],
            }
            ready = {"op": READY, "body": {"logins": [login], "proxy_urls": []}}
            resume_after = body.get("sn")
            # One critical section with _dispatch: every event reaches this socket exactly once,
            # either replayed here or broadcast after it joined.
            async with self._sending:
                await ws.send_text(json.dumps(ready))
                if isinstance(resume_after, int):
                    for event in self._events:
                        if event["sn"] > resume_after:
                            await ws.send_text(json.dumps({"op": EVENT, "body": event}))
                self._sockets.add(ws)
            async with self._ready:
                self.connections += 1
                self._ready.notify_all()
            while True:
                try:
                    signal = json.loads(await ws.receive_text())
                except ValueError:
                    await ws.close(4000, "invalid message")
                    return
                if signal.get("op") == PING:
                    await ws.send_text(json.dumps({"op": PONG, "body": {}}))
        except WebSocketDisconnect:
            pass
        finally:
            self._sockets.discard(ws)

    # -- HTTP API -------------------------------------------------------------------------------

    async def _asset(self, request: Request) -> Response:
        return Response(tiny_png(), media_type="image/png")

    async def _api(self, request: Request) -> Response:
        name = request.path_params["name"]
        if request.method != "POST":
            return PlainTextResponse("use POST", status_code=405)
        if self.token and request.headers.get("authorization") != f"Bearer {self.token}":
            return PlainTextResponse("invalid token", status_code=401)
        platform = request.headers.get("satori-platform") or request.headers.get("x-platform")
        self_id = request.headers.get("satori-user-id") or request.headers.get("x-self-id")
        if (platform, self_id) != (self.platform, self.self_id):
            return PlainTextResponse("login not found", status_code=403)
        raw = await request.body()
        try:
            params = json.loads(raw) if raw else {}
        except ValueError:
            return PlainTextResponse("invalid JSON body", status_code=400)
        if not isinstance(params, dict):
            return PlainTextResponse("the body must be a JSON object", status_code=400)
        handler = self._handlers().get(name)
        if handler is None:
            self.calls.record(ApiCall(name, params))
            return PlainTextResponse("method not found", status_code=404)
        try:
            result, sent = handler(params)
        except KeyError as missing:
            self.calls.record(ApiCall(name, params))
            return PlainTextResponse(f"missing or unknown {missing}", status_code=400)
        self.calls.record(ApiCall(name, params, sent=sent))
        if isinstance(result, Response):
            return result
        return JSONResponse(result)

    def _handlers(self) -> dict[str, Any]:
        return {
            "message.create": self._message_create,
            "message.get": self._message_get,
            "message.delete": self._message_delete,
            "login.get": lambda p: (
                {"sn": 1, "platform": self.platform, "user": self._self_user(), "status": 1},
                None,
            ),
            "user.get": lambda p: ({"id": p["user_id"]}, None),
            "user.channel.create": lambda p: (
                {"id": f"private:{p['user_id']}", "type": DIRECT_CHANNEL},
                None,
            ),
            "channel.get": lambda p: ({"id": p["channel_id"], "type": TEXT_CHANNEL}, None),
            "guild.get": lambda p: ({"id": p["guild_id"], "name": self.group_name}, None),
            "guild.list": lambda p: (
                {"data": [{"id": self.group_id, "name": self.group_name}]},
                None,
            ),
            "guild.member.get": lambda p: ({"user": {"id": p["user_id"]}}, None),
            "friend.list": lambda p: ({"data": []}, None),
        }

    def _message_create(self, params: dict[str, Any]) -> tuple[Any, Sent]:
        channel_id, content = str(params["channel_id"]), str(params["content"])
        message_id = str(self.next_id())
        kind = DIRECT_CHANNEL if channel_id.startswith("private:") else TEXT_CHANNEL
        self.messages[message_id] = {
            "id": message_id,
            "content": content,
            "created_at": now_ms(),
            "_where": {"channel": {"id": channel_id, "type": kind}, "user": self._self_user()},
        }
        elements = _Elements.parse(content)
        sent = Sent(
            chat=channel_id,
            text=elements.text,
            message_id=message_id,
            reply_to=elements.quote,
            mentions=tuple(elements.mentions),
            media=tuple(elements.media),
        )
        return [_public(self.messages[message_id])], sent

    def _message_get(self, params: dict[str, Any]) -> tuple[Any, None]:
        message = self.messages.get(str(params["message_id"]))
        if message is None:
            return PlainTextResponse("message not found", status_code=404), None
        return _public(message), None

    def _message_delete(self, params: dict[str, Any]) -> tuple[Any, None]:
        self.messages.pop(str(params["message_id"]), None)
        return {}, None


def _public(message: dict[str, Any]) -> dict[str, Any]:
    """A stored message as the protocol shows it (channel and user promoted into it)."""
    shown = {k: v for k, v in message.items() if k != "_where"}
    return {**shown, **message["_where"]}


class _Elements(HTMLParser):
    """Reads what the bot sent: its text, whom it mentions, what it quotes, which media."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.mentions: list[str] = []
        self.media: list[str] = []
        self.quote: str | None = None
        self._in_quote = 0

    @classmethod
    def parse(cls, content: str) -> _Elements:
        reader = cls()
        reader.feed(content)
        reader.close()
        return reader

    @property
    def text(self) -> str:
        return "".join(self.parts).strip()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "quote":
            self.quote = found.get("id")
            self._in_quote += 1
        elif tag == "at" and found.get("id"):
            self.mentions.append(str(found["id"]))
        elif tag in ("img", "image"):
            self.media.append("image")
        elif tag == "emoji":
            self.media.append("sticker")
        elif tag == "br":
            self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag == "quote":
            self._in_quote -= 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "quote":
            self._in_quote -= 1
        elif tag in ("p", "message"):
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._in_quote:  # a quote's own content is the quoted message, not this one's text
            self.parts.append(data)
