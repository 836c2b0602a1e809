"""The Telegram Bot API on loopback: ``/bot<token>/<method>`` over HTTP, updates by long polling.

The adapter is pointed here with ``telegram_bots=[{"token": ..., "api_server": "<fake>/"}]``. At
start-up it calls ``getMe`` and ``deleteWebhook``, then polls ``getUpdates`` with the offset of the
next update it wants (which confirms, and so drops, every earlier one); a poll with nothing queued
is held until an update arrives. Answers are ``{"ok": true, "result": ...}`` or
``{"ok": false, "error_code": ..., "description": ...}`` as Telegram gives them. Parameters come as
JSON, form fields or multipart (files as ``attach://<name>``), each decoded by its Bot API type.

    async with TelegramFake() as fake, NoneBotApp(tmp_path, fake, plugin) as app:
        await fake.wait_connected()
        await fake.send_group_message("在吗", mention_bot=True)   # "@yuiju_bot 在吗" + entity
        [sent] = await fake.sent_until_quiet(3.0)   # Sent(chat="-1001234567890", ...)

Bad frames: ``truncated``, ``garbage`` and ``malformed`` are the answer to the next ``getUpdates``
(a proxy's error page, a cut body, an update without its required fields); the real
``nonebot-adapter-telegram`` logs the failed poll, waits 5 s and polls again, so what was queued
meanwhile arrives after that pause. ``unknown`` is a queued update of a kind it does not know.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any, ClassVar
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from tests.fakes._base import (
    ELEMENTS_TEXT,
    ApiCall,
    BadFrame,
    FakePlatform,
    Person,
    Sent,
    deep_json,
    parse_multipart,
    tiny_png,
)

INTEGER_FIELDS = frozenset(
    {
        "chat_id",
        "from_chat_id",
        "message_id",
        "message_thread_id",
        "reply_to_message_id",
        "user_id",
        "offset",
        "limit",
        "timeout",
    }
)
BOOLEAN_FIELDS = frozenset(
    {"disable_notification", "protect_content", "allow_sending_without_reply", "has_spoiler"}
)
JSON_FIELDS = frozenset(
    {
        "entities",
        "caption_entities",
        "reply_parameters",
        "reply_markup",
        "link_preview_options",
        "media",
        "allowed_updates",
        "reaction",
        "commands",
    }
)
MEDIA_METHODS = {"sendphoto": "photo", "sendsticker": "sticker", "senddocument": "document"}
"""Methods that send one file, and the parameter that carries it."""


class ApiError(Exception):
    """An answer Telegram gives with ``"ok": false``."""

    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.description = description


class TelegramFake(FakePlatform):
    """The Bot API for one bot, one supergroup and the private chats of whoever writes."""

    adapter: ClassVar[str] = "nonebot.adapters.telegram"
    DEFAULT_USER: ClassVar[Person] = Person(id="20002", name="小明")

    def __init__(
        self,
        *,
        token: str = "7000000001:fake-token-for-tests",
        username: str = "yuiju_bot",
        first_name: str = "悠酱",
        group_id: int = -1001234567890,
        group_title: str = "南风镇",
        max_hold: float = 20.0,
    ) -> None:
        super().__init__()
        self.token = token
        self.bot_id = int(token.split(":")[0])
        self.username = username
        self.first_name = first_name
        self.group_id = group_id
        self.max_hold = max_hold
        """Longest a ``getUpdates`` is held (below the adapter's 30 s read timeout)."""
        self.chats: dict[int, dict[str, Any]] = {
            group_id: {"id": group_id, "type": "supergroup", "title": group_title}
        }
        """Chats the bot may send to: the group, and each user's private chat once they write."""
        self.messages: dict[int, dict[str, Any]] = {}
        """Every message by id, received or sent: replies quote from here."""
        self.files: dict[str, bytes] = {}
        """File contents by file_id (``getFile`` and the download URL serve them)."""
        self.polls = 0
        """How many ``getUpdates`` calls arrived (they are not in ``calls``: polling is noise)."""
        self._updates: list[dict[str, Any]] = []
        self._bad_answers: list[Response] = []
        self._wake = asyncio.Event()

    async def __aexit__(self, *exc_info: Any) -> None:
        self.closing.set()
        self._wake.set()  # a held getUpdates answers now instead of at its timeout
        await super().__aexit__(*exc_info)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/bot{token}/{method}", self._api, methods=["GET", "POST"]),
            Route("/file/bot{token}/{path:path}", self._download),
        ]

    def nonebot_config(self) -> dict[str, Any]:
        return {"telegram_bots": [{"token": self.token, "api_server": f"{self.base_url}/"}]}

    @property
    def bot_user(self) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": self.first_name,
            "username": self.username,
        }

    # -- what a test does -----------------------------------------------------------------------

    async def wait_connected(self, within: float = 30.0) -> None:
        """Wait for the adapter's first ``getUpdates`` (it polls once it has set up)."""
        deadline = time.monotonic() + within
        while self.polls == 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"TelegramFake: no getUpdates within {within} s")
            await asyncio.sleep(0.05)

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
        """A ``message`` update in the supergroup; returns the message id."""
        chat = self.chats[self.group_id]
        return self._queue_message(chat, user, text, mention_bot, reply_to, image, sticker)

    async def send_private_message(
        self,
        text: str = "",
        *,
        user: Person | None = None,
        reply_to: str | None = None,
        image: bool = False,
        sticker: bool = False,
    ) -> str:
        """A ``message`` update in the user's private chat with the bot; returns the message id."""
        user = user or self.DEFAULT_USER
        if not user.id.isdigit():
            raise ValueError(
                f"Telegram user ids are numbers: Person(id='20002', ...), not {user.id!r}"
            )
        chat = {"id": int(user.id), "type": "private", "first_name": user.name}
        self.chats[int(user.id)] = chat
        return self._queue_message(chat, user, text, False, reply_to, image, sticker)

    async def send_bad_frame(self, kind: BadFrame) -> None:
        if kind == "unknown":  # a kind of update from a newer Bot API
            self._queue({"update_id": self.next_id(), "fake_future_update": {"id": 1}})
            return
        if kind == "shape":  # queued, so it comes back until an offset confirms it
            self._queue({"update_id": self.next_id(), "message": "not a message"})
            return
        if kind == "elements":
            self._queue_elements()
            return
        bodies = {
            "truncated": ('{"ok":true,"result":[{"update_id":', "application/json"),
            "garbage": ("<html><body>502 Bad Gateway</body></html>", "text/html"),
            "malformed": (
                json.dumps({"ok": True, "result": [{"update_id": 1, "message": {"text": 5}}]}),
                "application/json",
            ),
            "deep": ('{"ok":true,"result":' + deep_json() + "}", "application/json"),
        }
        body, media_type = bodies[kind]
        self._bad_answers.append(Response(body, media_type=media_type))
        self._wake.set()

    def send_pin(self, message_id: str, *, user: Person | None = None) -> None:
        """``user`` pins a message in the group: a service message whose ``pinned_message`` is the
        message, or, when the bot cannot see it (an id it never got), Telegram's inaccessible
        message (``date`` 0, no sender, no content)."""
        user = user or self.DEFAULT_USER
        chat = self.chats[self.group_id]
        pinned = self.messages.get(int(message_id)) or {
            "message_id": int(message_id),
            "chat": chat,
            "date": 0,
        }
        service = {
            "message_id": self.next_id(),
            "from": {"id": int(user.id), "is_bot": False, "first_name": user.name},
            "chat": chat,
            "date": int(time.time()),
            "pinned_message": {k: v for k, v in pinned.items() if k != "reply_to_message"},
        }
        self._queue({"update_id": self.next_id(), "message": service})

    # -- updates --------------------------------------------------------------------------------

    def _queue_message(
        self,
        chat: dict[str, Any],
        user: Person | None,
        text: str,
        mention_bot: bool,
        reply_to: str | None,
        image: bool,
        sticker: bool,
    ) -> str:
        user = user or self.DEFAULT_USER
        if not user.id.isdigit():
            raise ValueError(
                f"Telegram user ids are numbers: Person(id='20002', ...), not {user.id!r}"
            )
        if sticker and (text or mention_bot or image):
            raise ValueError(
                "a Telegram sticker message carries nothing else: send the text separately"
            )
        message: dict[str, Any] = {
            "message_id": self.next_id(),
            "from": {"id": int(user.id), "is_bot": False, "first_name": user.name},
            "chat": chat,
            "date": int(time.time()),
        }
        entities = []
        if mention_bot:
            mention = f"@{self.username}"
            entities.append({"type": "mention", "offset": 0, "length": _utf16_len(mention)})
            text = f"{mention} {text}" if text else mention
        text_key, entities_key = ("caption", "caption_entities") if image else ("text", "entities")
        if text:
            message[text_key] = text
        if entities:
            message[entities_key] = entities
        if image:
            file_id = self._store_file(tiny_png())
            message["photo"] = [
                {
                    "file_id": file_id,
                    "file_unique_id": f"u{file_id}",
                    "width": 1,
                    "height": 1,
                    "file_size": len(self.files[file_id]),
                }
            ]
        if sticker:
            file_id = self._store_file(tiny_png((255, 220, 0)))
            message["sticker"] = {
                "file_id": file_id,
                "file_unique_id": f"u{file_id}",
                "type": "regular",
                "width": 512,
                "height": 512,
                "is_animated": False,
                "is_video": False,
                "emoji": "😊",
            }
        if reply_to is not None:
            message["reply_to_message"] = self._quotable(int(reply_to))
        self.messages[message["message_id"]] = message
        self._queue({"update_id": self.next_id(), "message": message})
        return str(message["message_id"])

    def _queue_elements(self) -> None:
        """A mention of the bot whose other entities the adapter cannot read: one of a type from
        a newer Bot API, one that ends inside an emoji's UTF-16 pair, one past the text."""
        mention = f"@{self.username}"
        text = f"{mention} {ELEMENTS_TEXT} 😀"
        emoji = _utf16_len(text) - 2
        message = {
            "message_id": self.next_id(),
            "from": {"id": int(self.DEFAULT_USER.id), "is_bot": False, "first_name": "小明"},
            "chat": self.chats[self.group_id],
            "date": int(time.time()),
            "text": text,
            "entities": [
                {"type": "mention", "offset": 0, "length": _utf16_len(mention)},
                {"type": "fake_future_entity", "offset": 1, "length": 2},
                {"type": "bold", "offset": emoji, "length": 1},
                {"type": "italic", "offset": 500, "length": 3},
                "not an entity",
            ],
        }
        self.messages[message["message_id"]] = message
        self._queue({"update_id": self.next_id(), "message": message})

    def _queue(self, update: dict[str, Any]) -> None:
        self._updates.append(update)
        self._wake.set()

    def _quotable(self, message_id: int) -> dict[str, Any]:
        quoted = self.messages.get(message_id)
        if quoted is None:
            raise ValueError(f"TelegramFake: no message {message_id} to reply to")
        return {k: v for k, v in quoted.items() if k != "reply_to_message"}

    def _store_file(self, content: bytes) -> str:
        file_id = f"file-{self.next_id()}"
        self.files[file_id] = content
        return file_id

    async def _get_updates(self, params: dict[str, Any]) -> Response:
        self.polls += 1
        offset = params.get("offset")
        if isinstance(offset, int) and offset > 0:  # confirms every update before it
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        hold = min(float(params.get("timeout") or 0), self.max_hold)
        deadline = time.monotonic() + hold
        while not (self._updates or self._bad_answers or self.closing.is_set()):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), left)
        if self._bad_answers:
            return self._bad_answers.pop(0)
        limit = int(params.get("limit") or 100)
        return _ok(self._updates[:limit])

    # -- HTTP API -------------------------------------------------------------------------------

    async def _download(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return _error(401, "Unauthorized")
        file_id = request.path_params["path"].rsplit("/", 1)[-1].split(".")[0]
        content = self.files.get(file_id)
        if content is None:
            return _error(404, "Not Found")
        return Response(content, media_type="image/png")

    async def _api(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.path_params["method"]
        try:
            params, files = await _read_params(request)
        except ApiError as e:
            return _error(e.status, e.description)
        if method.lower() == "getupdates":
            return await self._get_updates(params)
        handler = self._handlers().get(method.lower())
        if handler is None:
            self.calls.record(ApiCall(method, params, files))
            return _error(404, "Not Found")
        try:
            result, sent = handler(params, files)
        except ApiError as e:
            self.calls.record(ApiCall(method, params, files))
            return _error(e.status, e.description)
        self.calls.record(ApiCall(method, params, files, sent))
        return _ok(result)

    def _handlers(self) -> dict[str, Any]:
        done = lambda p, f: (True, None)  # noqa: E731
        return {
            "getme": lambda p, f: (self.bot_user, None),
            "deletewebhook": done,
            "setwebhook": done,
            "sendchataction": done,
            "setmycommands": done,
            "setmessagereaction": done,
            "deletemessage": self._delete_message,
            "getchat": lambda p, f: (self._chat(p), None),
            "getfile": self._get_file,
            "sendmessage": self._send_message,
            **dict.fromkeys(MEDIA_METHODS, self._send_media),
        }

    def _chat(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self.chats.get(params.get("chat_id"))  # type: ignore[arg-type]
        if chat is None:
            raise ApiError(400, "Bad Request: chat not found")
        return chat

    def _new_message(self, params: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {
            "message_id": self.next_id(),
            "from": self.bot_user,
            "chat": self._chat(params),
            "date": int(time.time()),
        }
        reply_to = (params.get("reply_parameters") or {}).get("message_id") or params.get(
            "reply_to_message_id"
        )
        if reply_to is not None:
            message["reply_to_message"] = self._quotable(int(reply_to))
        return message

    def _sent(self, message: dict[str, Any], text: str, entities: list[Any], media: str) -> Sent:
        self.messages[message["message_id"]] = message
        mentions = [
            str(e["user"]["id"]) if e.get("type") == "text_mention" else _utf16_slice(text, e)
            for e in entities
            if e.get("type") in ("mention", "text_mention")
        ]
        quoted = message.get("reply_to_message")
        return Sent(
            chat=str(message["chat"]["id"]),
            text=text,
            message_id=str(message["message_id"]),
            reply_to=str(quoted["message_id"]) if quoted else None,
            mentions=tuple(mentions),
            media=(media,) if media else (),
        )

    def _send_message(self, params: dict[str, Any], files: dict[str, bytes]) -> tuple[Any, Sent]:
        text = str(params.get("text") or "")
        if not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        message = self._new_message(params)
        message["text"] = text
        entities = params.get("entities") or []
        if entities:
            message["entities"] = entities
        return message, self._sent(message, text, entities, "")

    def _send_media(self, params: dict[str, Any], files: dict[str, bytes]) -> tuple[Any, Sent]:
        kind = next(k for k in ("photo", "sticker", "document") if k in params)
        content = self._resolve_file(str(params[kind]), files)
        message = self._new_message(params)
        file_id = self._store_file(content)
        if kind == "photo":
            message["photo"] = [
                {"file_id": file_id, "file_unique_id": f"u{file_id}", "width": 1, "height": 1}
            ]
        elif kind == "sticker":
            message["sticker"] = {
                "file_id": file_id,
                "file_unique_id": f"u{file_id}",
                "type": "regular",
                "width": 512,
                "height": 512,
                "is_animated": False,
                "is_video": False,
            }
        else:
            message["document"] = {"file_id": file_id, "file_unique_id": f"u{file_id}"}
        caption = str(params.get("caption") or "")
        if caption:
            message["caption"] = caption
        media = {"photo": "image", "sticker": "sticker", "document": "file"}[kind]
        return message, self._sent(message, caption, params.get("caption_entities") or [], media)

    def _resolve_file(self, value: str, files: dict[str, bytes]) -> bytes:
        if value.startswith("attach://"):
            name = value.removeprefix("attach://")
            if name not in files:
                raise ApiError(400, f"Bad Request: file {name!r} not found in the request")
            return files[name]
        if value in self.files:
            return self.files[value]
        if value.startswith(("http://", "https://")):
            return tiny_png()  # Telegram fetches it; the fake does not go out
        raise ApiError(400, "Bad Request: wrong file identifier/HTTP URL specified")

    def _get_file(self, params: dict[str, Any], files: dict[str, bytes]) -> tuple[Any, None]:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            raise ApiError(400, "Bad Request: invalid file_id")
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": len(self.files[file_id]),
            "file_path": f"photos/{file_id}.png",
        }, None

    def _delete_message(self, params: dict[str, Any], files: dict[str, bytes]) -> tuple[Any, None]:
        if self.messages.pop(params.get("message_id"), None) is None:  # type: ignore[arg-type]
            raise ApiError(400, "Bad Request: message to delete not found")
        return True, None


async def _read_params(request: Request) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Query, JSON, urlencoded or multipart parameters, decoded as the Bot API types them."""
    raw: dict[str, Any] = dict(request.query_params)
    files: dict[str, bytes] = {}
    body = await request.body()
    content_type = request.headers.get("content-type", "")
    if body and content_type.startswith("application/json"):
        try:
            decoded = json.loads(body)
        except ValueError:
            raise ApiError(400, "Bad Request: can't parse JSON object") from None
        if not isinstance(decoded, dict):
            raise ApiError(400, "Bad Request: parameters must be a JSON object")
        raw.update(decoded)
    elif body and content_type.startswith("multipart/form-data"):
        fields, files = parse_multipart(body, content_type)
        raw.update(fields)
    elif body:  # application/x-www-form-urlencoded
        raw.update(parse_qsl(body.decode(), keep_blank_values=True))
    return {key: _decode(key, value) for key, value in raw.items()}, files


def _decode(key: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if key in INTEGER_FIELDS:
        with contextlib.suppress(ValueError):  # chat_id may be "@channelusername"
            return int(value)
        return value
    if key in BOOLEAN_FIELDS:
        return value.lower() == "true"
    if key in JSON_FIELDS:
        try:
            return json.loads(value)
        except ValueError:
            raise ApiError(400, f"Bad Request: can't parse {key} JSON object") from None
    return value


def _ok(result: Any) -> JSONResponse:
    return JSONResponse({"ok": True, "result": result})


def _error(status: int, description: str) -> JSONResponse:
    return JSONResponse(
        {"ok": False, "error_code": status, "description": description}, status_code=status
    )


def _utf16_len(text: str) -> int:
    """Telegram measures entity offsets and lengths in UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _utf16_slice(text: str, entity: dict[str, Any]) -> str:
    units = text.encode("utf-16-le")
    start, length = int(entity["offset"]), int(entity["length"])
    return units[start * 2 : (start + length) * 2].decode("utf-16-le")
