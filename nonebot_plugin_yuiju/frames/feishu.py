"""Feishu/Lark: a callback the adapter cannot read is answered 400 with one line, and a message
with parts it cannot read keeps the rest.

The adapter's webhook decodes each callback (JSON, then its decryption, then JSON again) inside
the request: a body that is not JSON, nested too deep, badly encrypted or of the wrong shape
raises out of the route (a 500 and the server's traceback). An event that fits no model is
logged with the whole raw event and a traceback; a message whose content it cannot read (a post
node without its tag, a mention entry without its id) is turned into a bare event or fails later,
in a task, with a traceback. `install` guards:

- the webhook route ``Adapter._handle_http`` (read when the adapter registers its route at
  start-up, after the plugin loads): a callback it cannot decode is reported and answered 400;
- ``Adapter.json_to_event`` (looked up at every event, webhook and WebSocket): the adapter's own
  models in its own order, a message's content normalised first (`normalise_message`) and read
  once (its message is built lazily, so a crash there would come later, in a task); an event no
  model fits is reported and skipped;
- the ``json`` of its WebSocket client module, which catches bad JSON but not a frame nested past
  the decoder's recursion (that would end the connection);
- ``Adapter.get_bot_info`` (looked up by its start-up hook): a bot Feishu does not answer for at
  start-up is one warning and retried in the background (`starting_or_retrying`), instead of
  ending the app's start-up and with it the process.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nonebot_plugin_yuiju.frames import (
    START_RETRY_SECONDS,
    UNREADABLE,
    FrameReports,
    GuardedJson,
    why,
)

log = logging.getLogger(__name__)
REPORTS = FrameReports("Feishu", log)
CALLBACK_UNREADABLE: tuple[type[Exception], ...] = (*UNREADABLE, AttributeError)
"""What the webhook raises for a callback it cannot decode (AttributeError: a header that is no
object, a body that is a JSON list where the encrypted envelope should be)."""
NEEDS = {
    "text": "text",
    "a": "href",
    "at": "user_id",
    "img": "image_key",
    "media": "file_key",
    "emotion": "emoji_type",
}
"""The field a post node of each tag cannot do without (text and link text must be strings)."""


def install() -> None:
    """Guard the Feishu adapter's callback and event reading (idempotent)."""
    from nonebot.adapters.feishu import Adapter
    from nonebot.adapters.feishu.ws import client as ws_client
    from nonebot.drivers import Response

    if getattr(Adapter, "_yuiju_frames_guarded", False):
        return
    handle_http = Adapter._handle_http

    async def guarded_handle_http(self: Any, request: Any) -> Any:
        try:
            return await handle_http(self, request)
        except CALLBACK_UNREADABLE as exc:
            REPORTS.frame(f"callback unreadable ({why(exc)})", request.content)
            return Response(400, content=b"unreadable callback")

    def json_to_event(cls: Any, json_data: Any) -> Any:
        if not isinstance(json_data, dict) or json_data.get("type") == "url_verification":
            return None  # as the adapter: not an event
        return parse_event(cls, json_data)

    Adapter._handle_http = guarded_handle_http  # type: ignore[method-assign]
    Adapter.json_to_event = classmethod(json_to_event)  # type: ignore[assignment]
    Adapter.get_bot_info = starting_or_retrying(Adapter.get_bot_info)  # type: ignore[method-assign,assignment]
    ws_client.json = GuardedJson(REPORTS.frame)
    Adapter._yuiju_frames_guarded = True  # type: ignore[attr-defined]


START_SECONDS = 10.0
"""The most the app's start-up waits for Feishu to answer (an address that drops packets)."""


GetBotInfo = Callable[[Any, Any], Awaitable[Any]]
"""The adapter's ``get_bot_info(adapter, bot_config)`` (its types are the adapter's)."""


def starting_or_retrying(get_bot_info: GetBotInfo) -> GetBotInfo:
    """The adapter's ``get_bot_info``, which its start-up hook calls for each bot (the tenant
    token, then the bot's info) and which raised out of the app's start-up when Feishu was
    unreachable: the whole process ended (`yuiju run`: her life, the observer page and every other
    platform). Now a bot that cannot start is one warning; the adapter skips it (one line of its
    own, "Skipped Bot … registration") and a task in the adapter's own set (cancelled when the app
    stops) tries again quietly, then runs the adapter's start-up again, which registers it."""

    async def guarded(self: Any, bot_config: Any) -> Any:
        from nonebot.adapters.feishu.models.api import BaseResponse

        try:
            return await asyncio.wait_for(get_bot_info(self, bot_config), START_SECONDS)
        except Exception as exc:  # the adapter's NetworkError, a refused or unreadable answer
            problem = why(exc) if not isinstance(exc, TimeoutError) else "no answer"
        app_id = bot_config.app_id
        retrying: set[str] = self.__dict__.setdefault("_yuiju_retrying", set())
        if app_id not in retrying:
            retrying.add(app_id)
            log.warning(
                "Feishu bot %s did not start (%s): trying again in the background; her life "
                "and the other platforms go on",
                app_id,
                problem[:160],
            )
            task = asyncio.create_task(_retry(self, get_bot_info, bot_config, retrying))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return BaseResponse(code=-1, msg=problem[:200])  # the adapter reads the code, skips it

    return guarded


async def _retry(
    adapter: Any, get_bot_info: GetBotInfo, bot_config: Any, retrying: set[str]
) -> None:
    tries = 0
    while True:
        await asyncio.sleep(START_RETRY_SECONDS[min(tries, len(START_RETRY_SECONDS) - 1)])
        tries += 1
        try:
            result = await asyncio.wait_for(get_bot_info(adapter, bot_config), START_SECONDS)
        except Exception as exc:  # still unreachable: quiet
            log.debug("Feishu bot %s: try %d failed: %s", bot_config.app_id, tries, why(exc))
            continue
        if result.code != 0:
            log.debug("Feishu bot %s: try %d answered %s", bot_config.app_id, tries, result.msg)
            continue
        retrying.discard(bot_config.app_id)
        await adapter.startup()  # registers every bot not registered yet (the adapter's own)
        log.info("Feishu bot %s started after %d tries", bot_config.app_id, tries + 1)
        return


def parse_event(adapter: Any, data: dict[str, Any]) -> Any:
    """The adapter's own event models in its own order, then its base event; None (reported)
    when none fits. A message is normalised first and its message read once; a frame that says
    it is a message but fits no message model is skipped (as a base event it would reach the
    matchers, which ask it for its message)."""
    from nonebot.adapters.feishu.event import Event, MessageEvent
    from nonebot.compat import type_validate_python

    header, body = data.get("header"), data.get("event")
    if not isinstance(header, dict) or not isinstance(header.get("event_type", ""), str):
        REPORTS.frame("an event without a header", data)
        return None
    name = header.get("event_type", "")
    message = body.get("message") if isinstance(body, dict) else None
    if message:
        if not isinstance(message, dict):
            REPORTS.frame("a message that is no object", data)
            return None
        data = normalise_message(data)
        name += f".{message.get('chat_type')}"
    models = list(adapter.get_event_model(name))
    if message:
        models = [m for m in models if issubclass(m, MessageEvent)]
    problem: Exception | None = None
    for model in models:
        try:
            event = type_validate_python(model, data)
            if isinstance(event, MessageEvent):
                str(event.get_message())
            return event
        except Exception as exc:  # its validators and content readers raise any kind
            problem = problem or exc
    if message:
        REPORTS.frame(f"not a message event ({why(problem) if problem else 'no model'})", data)
        return None
    try:
        return type_validate_python(Event, data)
    except Exception as exc:
        REPORTS.frame(f"not an event ({why(exc)})", data)
        return None


def normalise_message(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its message's mentions and post content in the shape the adapter reads: a
    mention entry or a post node it cannot read is left out, the rest kept (one line)."""
    from nonebot.adapters.feishu.models.common import Mention
    from nonebot.compat import type_validate_python

    message: dict[str, Any] = data["event"]["message"]
    fixed = dict(message)
    problems: list[str] = []
    total = kept = 0
    mentions = message.get("mentions")
    if mentions is not None:
        good: list[Any] = []
        for mention in mentions if isinstance(mentions, list) else [mentions]:
            try:
                type_validate_python(Mention, mention)
            except UNREADABLE as exc:
                problems.append(f"a mention: {why(exc)}"[:80])
                continue
            good.append(mention)
        total, kept = total + (len(mentions) if isinstance(mentions, list) else 1), len(good)
        fixed["mentions"] = good
    content = message.get("content")
    if message.get("message_type") == "post" and isinstance(content, str):
        nodes = _post(content)
        if nodes is not None:
            fixed["content"], post_total, post_kept, post_problems = nodes
            total, kept, problems = total + post_total, kept + post_kept, problems + post_problems
    if not problems:
        return data
    REPORTS.dropped("parts", message.get("message_id"), kept, total, problems)
    return {**data, "event": {**data["event"], "message": fixed}}


def _post(content: str) -> tuple[str, int, int, list[str]] | None:
    """A post's content with the nodes the adapter reads: (content, nodes, kept, problems);
    None when it is not a JSON object (the message then fits no model, and is reported)."""
    try:
        post = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(post, dict):
        return None
    problems: list[str] = []
    total = 0
    title = post.get("title")
    lines: list[list[dict[str, Any]]] = []
    raw_lines = post.get("content")
    if not isinstance(raw_lines, list):
        problems.append("post content not a list of lines")
        raw_lines = []
    for line in raw_lines:
        if not isinstance(line, list):
            problems.append("a line that is no list")
            total += 1
            continue
        kept_line = []
        for node in line:
            total += 1
            problem = _node_problem(node)
            if problem:
                problems.append(problem)
            else:
                kept_line.append(node)
        lines.append(kept_line)
    if not isinstance(title, str):
        problems.append("a title that is no text")
        title = ""
    kept = sum(len(line) for line in lines)
    fixed = json.dumps({**post, "title": title, "content": lines}, ensure_ascii=False)
    return (fixed if problems else content), total, kept, problems


def _node_problem(node: Any) -> str:
    """What keeps the adapter from reading a post node ("" if nothing)."""
    if not isinstance(node, dict):
        return f"a {type(node).__name__}, not a node"
    tag = node.get("tag")
    if not isinstance(tag, str) or not tag:
        return "a node without a tag"
    need = NEEDS.get(tag)
    if need and not isinstance(node.get(need), str):
        return f"a {tag} node without its {need}"
    if tag == "a" and not isinstance(node.get("text", ""), str):
        return "a link whose text is no text"
    return ""
