"""Feishu (Lark) Open Platform on loopback: the OpenAPI under ``/open-apis/`` and event callbacks.

The adapter is pointed here with ``feishu_bots=[{..., "api_base": "<fake>"}]`` (the adapter's own
setting; nothing patched). At start-up it fetches a tenant access token
(``auth/v3/tenant_access_token/internal``) and the bot's info (``bot/v3/info``), then registers its
webhook ``/feishu/<app_id>`` on the NoneBot app's HTTP server. Events are schema-2.0 callbacks
POSTed there, carrying the verification token in ``header.token``, encrypted with the Encrypt Key
(AES-256-CBC, key = SHA-256 of the Encrypt Key, IV first) and signed
(``X-Lark-Signature`` = SHA-256 of timestamp + nonce + Encrypt Key + body), as Feishu sends them.
Messages: ``im.message.receive_v1`` with ``chat_type`` ``group`` or ``p2p``; a mention is
``@_user_1`` in the text plus an entry in ``mentions``; an image alone is an ``image`` message, an
image with text a ``post``; a reply carries ``parent_id``.

    async with FeishuFake() as fake, NoneBotApp(tmp_path, fake, plugin) as app:
        await fake.wait_connected()          # also answers Feishu's url_verification challenge
        await fake.send_group_message("在吗", mention_bot=True)
        [sent] = await fake.sent_until_quiet(3.0)   # Sent(chat="oc_fake_group", ...)

Bad frames are callbacks the webhook cannot use (``fake.deliveries`` keeps each one's HTTP status):
``truncated`` and ``garbage`` bodies make the real ``nonebot-adapter-feishu`` answer 500 (its JSON
decoding raises inside the request); ``malformed`` and ``unknown`` events are accepted (200) as
plain events no message handler matches. Every callback is its own HTTP request, so nothing stays
broken for the next one.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import time
import uuid
from typing import Any, ClassVar

import httpx
from Crypto.Cipher import AES  # pycryptodome: a dependency of nonebot-adapter-feishu
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from tests.fakes._base import (
    ELEMENTS_TEXT,
    ApiCall,
    BadFrame,
    FakePlatform,
    Person,
    Sent,
    deep_json,
    now_ms,
    parse_multipart,
    tiny_png,
)

INVALID_TOKEN = 99991663
"""Feishu's code for a missing or wrong tenant access token."""
INVALID_PARAMETER = 230001
"""Feishu's code for a bad parameter ("invalid receive_id", "invalid message_id")."""


class FeishuFake(FakePlatform):
    """The OpenAPI for one app (the bot), one group chat and any number of p2p chats."""

    adapter: ClassVar[str] = "nonebot.adapters.feishu"
    DEFAULT_USER: ClassVar[Person] = Person(id="ou_20002", name="小明")

    def __init__(
        self,
        *,
        app_id: str = "cli_fakeyuiju0001",
        app_secret: str = "fake-app-secret",
        verification_token: str = "fake-verification-token",
        encrypt_key: str | None = "fake-encrypt-key",
        bot_name: str = "悠酱",
        bot_open_id: str = "ou_bot_yuiju",
        chat_id: str = "oc_fake_group",
        tenant_key: str = "fake-tenant",
    ) -> None:
        super().__init__()
        self.app_id = app_id
        self.app_secret = app_secret
        self.verification_token = verification_token
        self.encrypt_key = encrypt_key
        """None sends callbacks in plain JSON (an app without an Encrypt Key)."""
        self.bot_name = bot_name
        self.bot_open_id = bot_open_id
        self.chat_id = chat_id
        self.tenant_key = tenant_key
        self.tenant_access_token = f"t-fake-{uuid.uuid4().hex}"
        self.messages: dict[str, dict[str, Any]] = {}
        """Every message by id, received or sent, in the shape ``GET im/v1/messages/:id`` shows."""
        self.images: dict[str, bytes] = {}
        """Uploaded and received images by image_key."""
        self.deliveries: list[tuple[str, int]] = []
        """Each callback POSTed to the webhook: what it was, and the HTTP status it got."""

    def routes(self) -> list[BaseRoute]:
        return [
            Route(
                "/open-apis/{path:path}",
                self._api,
                methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            )
        ]

    def nonebot_config(self) -> dict[str, Any]:
        bot: dict[str, Any] = {
            "app_id": self.app_id,
            "app_secret": self.app_secret,
            "verification_token": self.verification_token,
            "api_base": self.base_url,
        }
        if self.encrypt_key:
            bot["encrypt_key"] = self.encrypt_key
        return {"feishu_bots": [bot]}

    @property
    def webhook_url(self) -> str:
        if not self.app_url:
            raise RuntimeError(
                "FeishuFake: no app_url; run the bot with NoneBotApp (it sets it) or set it"
            )
        return f"{self.app_url}/feishu/{self.app_id}"

    # -- what a test does -----------------------------------------------------------------------

    async def wait_connected(self, within: float = 30.0) -> None:
        """Wait for the adapter's ``bot/v3/info``, then verify its webhook as Feishu does."""
        deadline = time.monotonic() + within
        await self.calls.wait_for(lambda c: c.name == "GET bot/v3/info", within)
        challenge = uuid.uuid4().hex
        payload = {
            "challenge": challenge,
            "token": self.verification_token,
            "type": "url_verification",
        }
        while True:
            try:
                response = await self._post(self._seal(payload))
                if response.status_code == 200 and response.json().get("challenge") == challenge:
                    return
            except (httpx.HTTPError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"FeishuFake: {self.webhook_url} did not answer the challenge")
            await asyncio.sleep(0.1)

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
        """An ``im.message.receive_v1`` callback from the group; returns the message id."""
        return await self._receive(
            self.chat_id, "group", user, text, mention_bot, reply_to, image, sticker
        )

    async def send_private_message(
        self,
        text: str = "",
        *,
        user: Person | None = None,
        reply_to: str | None = None,
        image: bool = False,
        sticker: bool = False,
    ) -> str:
        """An ``im.message.receive_v1`` callback from the user's p2p chat; returns the id."""
        user = user or self.DEFAULT_USER
        chat_id = f"oc_p2p_{user.id}"
        return await self._receive(chat_id, "p2p", user, text, False, reply_to, image, sticker)

    async def send_recall(self, message_id: str) -> None:
        """An ``im.message.recalled_v1`` callback: the user took the message back (撤回)."""
        message = self.messages.pop(message_id)
        event = {
            "message_id": message_id,
            "chat_id": message["chat_id"],
            "recall_time": str(now_ms()),
        }
        await self._deliver(
            "im.message.recalled_v1", self._seal(self._envelope("im.message.recalled_v1", event))
        )

    async def send_bad_frame(self, kind: BadFrame) -> None:
        if kind == "elements":
            await self._deliver(kind, self._seal(self._elements_event()))
            return
        bodies = {
            "truncated": b'{"schema": "2.0", "header": {"event_id": "',
            "garbage": b"\x00\xff<html><body>502 Bad Gateway</body></html>",
            # right envelope and token, but a message with nothing in it
            "malformed": self._seal(
                self._envelope("im.message.receive_v1", {"message": {"chat_type": "group"}})
            ),
            "unknown": self._seal(self._envelope("im.fake.unknown_event_v1", {"anything": 1})),
            "deep": deep_json().encode(),
            "shape": self._seal({"schema": "2.0", "header": [1, 2], "event": 5}),
        }
        await self._deliver(kind, bodies[kind], must_succeed=False)

    # -- callbacks ------------------------------------------------------------------------------

    async def _receive(
        self,
        chat_id: str,
        chat_type: str,
        user: Person | None,
        text: str,
        mention_bot: bool,
        reply_to: str | None,
        image: bool,
        sticker: bool,
    ) -> str:
        user = user or self.DEFAULT_USER
        if sticker and (text or mention_bot or image):
            raise ValueError("a Feishu sticker message carries nothing else: send text separately")
        mentions = []
        if mention_bot:
            mentions.append(
                {
                    "key": "@_user_1",
                    "id": {"union_id": "on_bot_yuiju", "user_id": "", "open_id": self.bot_open_id},
                    "name": self.bot_name,
                    "tenant_key": self.tenant_key,
                }
            )
        content: dict[str, Any]
        if sticker:
            message_type, content = "sticker", {"file_key": f"file_v3_sticker_{self.next_id()}"}
        elif image and (text or mention_bot):
            line: list[dict[str, Any]] = []
            if mention_bot:
                line.append({"tag": "at", "user_id": "@_user_1", "user_name": self.bot_name})
            if text:
                line.append({"tag": "text", "text": f" {text}" if mention_bot else text})
            image_line = [{"tag": "img", "image_key": self._store_image(tiny_png())}]
            message_type, content = "post", {"title": "", "content": [line, image_line]}
        elif image:
            message_type, content = "image", {"image_key": self._store_image(tiny_png())}
        else:
            message_type = "text"
            content = {"text": f"@_user_1 {text}" if mention_bot else text}
        message_id = f"om_{self.next_id()}"
        created = str(now_ms())
        message: dict[str, Any] = {
            "message_id": message_id,
            "create_time": created,
            "update_time": created,
            "chat_id": chat_id,
            "chat_type": chat_type,
            "message_type": message_type,
            "content": json.dumps(content, ensure_ascii=False),
        }
        if mentions:
            message["mentions"] = mentions
        if reply_to is not None:
            if reply_to not in self.messages:
                raise ValueError(f"FeishuFake: no message {reply_to} to reply to")
            message["parent_id"] = message["root_id"] = reply_to
        user_id = user.id.removeprefix("ou_")
        sender = {
            "sender_id": {"union_id": f"on_{user_id}", "user_id": user_id, "open_id": user.id},
            "sender_type": "user",
            "tenant_key": self.tenant_key,
        }
        self._remember(message, {"id": user.id, "id_type": "open_id", "sender_type": "user"})
        event = {"sender": sender, "message": message}
        await self._deliver(message_id, self._seal(self._envelope("im.message.receive_v1", event)))
        return message_id

    def _elements_event(self) -> dict[str, Any]:
        """A post in the group that @-mentions the bot, among elements the adapter cannot read:
        a node without a tag, one that is no object, a line that is no list, a mention entry
        without its id."""
        user = self.DEFAULT_USER
        line: list[Any] = [
            {"tag": "at", "user_id": "@_user_1", "user_name": self.bot_name},
            {"tag": "text", "text": f" {ELEMENTS_TEXT}"},
            {"text": "没有 tag"},
            "not a node",
        ]
        content = {"title": "", "content": [line, "not a line"]}
        created = str(now_ms())
        message = {
            "message_id": f"om_{self.next_id()}",
            "create_time": created,
            "update_time": created,
            "chat_id": self.chat_id,
            "chat_type": "group",
            "message_type": "post",
            "content": json.dumps(content, ensure_ascii=False),
            "mentions": [
                {
                    "key": "@_user_1",
                    "id": {"union_id": "on_bot_yuiju", "user_id": "", "open_id": self.bot_open_id},
                    "name": self.bot_name,
                    "tenant_key": self.tenant_key,
                },
                {"key": "@_user_2"},
            ],
        }
        user_id = user.id.removeprefix("ou_")
        sender = {
            "sender_id": {"union_id": f"on_{user_id}", "user_id": user_id, "open_id": user.id},
            "sender_type": "user",
            "tenant_key": self.tenant_key,
        }
        self._remember(message, {"id": user.id, "id_type": "open_id", "sender_type": "user"})
        return self._envelope("im.message.receive_v1", {"sender": sender, "message": message})

    def _envelope(self, event_type: str, event: dict[str, Any]) -> dict[str, Any]:
        header = {
            "event_id": uuid.uuid4().hex,
            "event_type": event_type,
            "create_time": str(now_ms()),
            "token": self.verification_token,
            "app_id": self.app_id,
            "tenant_key": self.tenant_key,
        }
        return {"schema": "2.0", "header": header, "event": event}

    def _seal(self, payload: dict[str, Any]) -> bytes:
        """The callback body: encrypted when the app has an Encrypt Key."""
        plain = json.dumps(payload, ensure_ascii=False).encode()
        if not self.encrypt_key:
            return plain
        key = hashlib.sha256(self.encrypt_key.encode()).digest()
        iv = os.urandom(16)
        pad = 16 - len(plain) % 16
        secret = AES.new(key, AES.MODE_CBC, iv).encrypt(plain + bytes([pad]) * pad)
        return json.dumps({"encrypt": base64.b64encode(iv + secret).decode()}).encode()

    async def _post(self, body: bytes) -> httpx.Response:
        timestamp, nonce = str(int(time.time())), uuid.uuid4().hex
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "X-Lark-Request-Timestamp": timestamp,
            "X-Lark-Request-Nonce": nonce,
        }
        if self.encrypt_key:
            signed = (timestamp + nonce + self.encrypt_key).encode() + body
            headers["X-Lark-Signature"] = hashlib.sha256(signed).hexdigest()
        async with httpx.AsyncClient(trust_env=False) as client:  # loopback: no proxy
            return await client.post(self.webhook_url, content=body, headers=headers, timeout=10)

    async def _deliver(self, what: str, body: bytes, *, must_succeed: bool = True) -> None:
        response = await self._post(body)
        self.deliveries.append((what, response.status_code))
        if must_succeed and response.status_code != 200:
            raise RuntimeError(
                f"FeishuFake: the webhook answered {response.status_code} to {what}: "
                f"{response.text[:200]!r}"
            )

    # -- OpenAPI --------------------------------------------------------------------------------

    def _remember(self, message: dict[str, Any], sender: dict[str, str]) -> None:
        self.messages[message["message_id"]] = {
            "message_id": message["message_id"],
            "root_id": message.get("root_id"),
            "parent_id": message.get("parent_id"),
            "msg_type": message["message_type"],
            "create_time": message["create_time"],
            "update_time": message["update_time"],
            "deleted": False,
            "updated": False,
            "chat_id": message["chat_id"],
            "sender": {**sender, "tenant_key": self.tenant_key},
            "body": {"content": message["content"]},
        }

    def _store_image(self, content: bytes) -> str:
        key = f"img_v3_{self.next_id()}"
        self.images[key] = content
        return key

    async def _api(self, request: Request) -> Response:
        path = request.path_params["path"]
        params: dict[str, Any] = dict(request.query_params)
        files: dict[str, bytes] = {}
        body = await request.body()
        content_type = request.headers.get("content-type", "")
        if body and content_type.startswith("multipart/form-data"):
            fields, files = parse_multipart(body, content_type)
            params.update(fields)
        elif body:
            try:
                decoded = json.loads(body)
            except ValueError:
                return _fail(400, INVALID_PARAMETER, "invalid request body")
            if isinstance(decoded, dict):
                params.update(decoded)
        if path == "auth/v3/tenant_access_token/internal" and request.method == "POST":
            self.calls.record(ApiCall("POST " + path, params))
            if (params.get("app_id"), params.get("app_secret")) != (self.app_id, self.app_secret):
                return _fail(400, 10014, "app secret invalid")
            return JSONResponse(
                {
                    "code": 0,
                    "msg": "ok",
                    "tenant_access_token": self.tenant_access_token,
                    "expire": 7200,
                }
            )
        if request.headers.get("authorization") != f"Bearer {self.tenant_access_token}":
            self.calls.record(ApiCall(f"{request.method} {path}", params, files))
            return _fail(400, INVALID_TOKEN, "Invalid access token for authorization.")
        for method, pattern, handler in self._table():
            found = re.fullmatch(pattern, path)
            if found and method == request.method:
                params.update(found.groupdict())
                name = f"{method} {_named(pattern)}"
                result, sent = handler(params, files)
                self.calls.record(ApiCall(name, params, files, sent))
                return result if isinstance(result, Response) else _success(result)
        self.calls.record(ApiCall(f"{request.method} {path}", params, files))
        return PlainTextResponse("404 page not found", status_code=404)

    def _table(self) -> list[tuple[str, str, Any]]:
        mid = r"(?P<message_id>[^/]+)"
        return [
            ("GET", r"bot/v3/info", self._bot_info),
            ("POST", r"im/v1/messages", self._send),
            ("POST", rf"im/v1/messages/{mid}/reply", self._reply),
            ("GET", rf"im/v1/messages/{mid}", self._get_message),
            ("DELETE", rf"im/v1/messages/{mid}", self._delete_message),
            ("GET", rf"im/v1/messages/{mid}/resources/(?P<file_key>[^/]+)", self._resource),
            ("POST", r"im/v1/images", self._upload_image),
        ]

    def _bot_info(self, params: dict[str, Any], files: dict[str, bytes]) -> tuple[Any, None]:
        bot = {
            "activate_status": 2,
            "app_name": self.bot_name,
            "avatar_url": f"{self.base_url}/avatar.png",
            "ip_white_list": [],
            "open_id": self.bot_open_id,
        }
        return JSONResponse({"code": 0, "msg": "ok", "bot": bot}), None

    def _send(self, params: dict[str, Any], files: dict[str, bytes]) -> tuple[Any, Sent | None]:
        id_type, receive_id = params.get("receive_id_type"), str(params.get("receive_id"))
        if id_type == "chat_id" and receive_id == self.chat_id:
            chat_id = receive_id
        elif id_type == "open_id" and receive_id.startswith("ou_"):
            chat_id = f"oc_p2p_{receive_id}"
        else:
            return _fail(400, INVALID_PARAMETER, "invalid receive_id"), None
        return self._create(params, chat_id=chat_id, shown_chat=receive_id, parent=None)

    def _reply(self, params: dict[str, Any], files: dict[str, bytes]) -> tuple[Any, Sent | None]:
        parent = self.messages.get(params["message_id"])
        if parent is None:
            return _fail(400, INVALID_PARAMETER, "invalid message_id"), None
        return self._create(
            params, chat_id=parent["chat_id"], shown_chat=parent["chat_id"], parent=parent
        )

    def _create(
        self,
        params: dict[str, Any],
        *,
        chat_id: str,
        shown_chat: str,
        parent: dict[str, Any] | None,
    ) -> tuple[Any, Sent | None]:
        msg_type, content = str(params.get("msg_type")), params.get("content")
        if not isinstance(content, str):
            return _fail(400, INVALID_PARAMETER, "content must be a JSON string"), None
        try:
            parsed = json.loads(content)
        except ValueError:
            return _fail(400, INVALID_PARAMETER, "invalid content"), None
        created = str(now_ms())
        message_id = f"om_{self.next_id()}"
        message = {
            "message_id": message_id,
            "create_time": created,
            "update_time": created,
            "chat_id": chat_id,
            "message_type": msg_type,
            "content": content,
        }
        if parent is not None:
            message["parent_id"] = parent["message_id"]
            message["root_id"] = parent.get("root_id") or parent["message_id"]
        self._remember(message, {"id": self.app_id, "id_type": "app_id", "sender_type": "app"})
        text, mentions, media = _read_content(msg_type, parsed)
        sent = Sent(
            chat=shown_chat,
            text=text,
            message_id=message_id,
            reply_to=parent["message_id"] if parent else None,
            mentions=tuple(mentions),
            media=tuple(media),
        )
        return self.messages[message_id], sent

    def _get_message(self, params: dict[str, Any], files: dict[str, bytes]) -> tuple[Any, None]:
        message = self.messages.get(params["message_id"])
        if message is None:
            return _fail(400, INVALID_PARAMETER, "invalid message_id"), None
        return {"items": [message]}, None

    def _delete_message(self, params: dict[str, Any], files: dict[str, bytes]) -> tuple[Any, None]:
        if self.messages.pop(params["message_id"], None) is None:
            return _fail(400, INVALID_PARAMETER, "invalid message_id"), None
        return {}, None

    def _resource(self, params: dict[str, Any], files: dict[str, bytes]) -> tuple[Any, None]:
        content = self.images.get(params["file_key"])
        if content is None:
            return _fail(400, INVALID_PARAMETER, "invalid file_key"), None
        return Response(content, media_type="image/png"), None

    def _upload_image(self, params: dict[str, Any], files: dict[str, bytes]) -> tuple[Any, None]:
        if "image" not in files:
            return _fail(400, INVALID_PARAMETER, "image is required"), None
        return {"image_key": self._store_image(files["image"])}, None


def _read_content(msg_type: str, content: Any) -> tuple[str, list[str], list[str]]:
    """Text, mentioned open_ids and media kinds of a message the bot sent."""
    if not isinstance(content, dict):
        return "", [], []
    if msg_type == "text":
        raw = str(content.get("text", ""))
        mentions = re.findall(r'<at user_id="([^"]*)"[^>]*>.*?</at>', raw)
        return re.sub(r"<at [^>]*>.*?</at>", "", raw).strip(), mentions, []
    if msg_type == "image":
        return "", [], ["image"]
    if msg_type == "sticker":
        return "", [], ["sticker"]
    if msg_type == "post":
        # what an app sends is keyed by locale ({"zh_cn": {...}}); what arrives is not
        post = content if "content" in content else next(iter(content.values()), {})
        texts: list[str] = []
        mentions, media = [], []
        for line in post.get("content", []):
            for item in line:
                tag = item.get("tag")
                if tag == "text":
                    texts.append(str(item.get("text", "")))
                elif tag == "at":
                    mentions.append(str(item.get("user_id")))
                elif tag == "img":
                    media.append("image")
            texts.append("\n")
        return "".join(texts).strip(), mentions, media
    return "", [], []


def _named(pattern: str) -> str:
    """``im/v1/messages/(?P<message_id>[^/]+)/reply`` -> ``im/v1/messages/:message_id/reply``."""
    return re.sub(r"\(\?P<(\w+)>[^)]*\)", r":\1", pattern)


def _success(data: Any) -> JSONResponse:
    return JSONResponse({"code": 0, "msg": "success", "data": data})


def _fail(status: int, code: int, msg: str) -> JSONResponse:
    return JSONResponse({"code": code, "msg": msg}, status_code=status)
