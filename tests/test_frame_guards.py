"""The per-adapter frame guards (`nonebot_plugin_yuiju.frames`) on their own, without a socket:
what each keeps of a message with parts its adapter cannot read, and what it reports. End to end
over the real adapters: tests/test_platform_frames.py."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from nonebot_plugin_yuiju.frames import FrameReports, feishu, satori, telegram


@pytest.fixture(autouse=True)
def fresh_reports() -> None:
    for reports in (satori.REPORTS, telegram.REPORTS, feishu.REPORTS):
        reports.reset()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def satori_body(content: str) -> dict[str, Any]:
    return {
        "sn": 1,
        "type": "message-created",
        "timestamp": 1,
        "login": {"sn": 1, "platform": "qq", "user": {"id": "10001"}, "status": 1},
        "channel": {"id": "123", "type": 0},
        "guild": {"id": "123"},
        "member": {"nick": "小明"},
        "user": {"id": "20002", "name": "小明"},
        "message": {"id": "5", "content": content},
    }


def test_satori_elements_it_cannot_read_are_left_out_and_the_rest_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from nonebot.adapters.satori import Adapter

    good = '<at id="10001"/> 你好'
    body = satori_body(good + '<img src="x" width="wide"/><a>无链接</a>')
    with caplog.at_level(logging.WARNING, logger="nonebot_plugin_yuiju.frames"):
        fixed = satori.readable_body(Adapter, body)
    assert fixed is not None and fixed["message"]["content"] == good
    assert warnings(caplog) == [
        "bad Satori elements skipped in message 5 (2 of 4 kept): <img> ValueError: invalid "
        "literal for int() with base 10: 'wide'; <a> KeyError: 'href'"
    ]
    assert satori.readable_body(Adapter, satori_body(good)) is not None  # nothing to say


def test_a_satori_event_no_model_fits_is_one_line_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from nonebot.adapters.satori import Adapter

    body = {**satori_body("x"), "message": {}}
    del body["type"]
    with caplog.at_level(logging.WARNING, logger="nonebot_plugin_yuiju.frames"):
        assert satori.readable_body(Adapter, body) is None
    [line] = warnings(caplog)
    assert line.startswith("bad Satori frame skipped: not an event (ValueError: an event without")


def telegram_message(text: str, entities: list[Any]) -> dict[str, Any]:
    return {
        "message_id": 8,
        "from": {"id": 20002, "is_bot": False, "first_name": "小明"},
        "chat": {"id": -100, "type": "supergroup", "title": "南风镇"},
        "date": 1,
        "text": text,
        "entities": entities,
    }


def test_telegram_entities_it_cannot_read_are_dropped_and_the_text_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from nonebot.adapters.telegram.event import Event

    mention = {"type": "mention", "offset": 0, "length": 10}
    bad = [
        {"type": "date_time", "offset": 0, "length": 2},  # a type from a newer Bot API
        {"type": "bold", "offset": 12, "length": 1},  # ends inside the emoji's UTF-16 pair
        {"type": "italic", "offset": 500, "length": 3},
        {"type": "bold", "offset": "0", "length": 1},
        "not an entity",
    ]
    update = {"update_id": 3, "message": telegram_message("@yuiju_bot 😀好\ud800", [mention, *bad])}
    with caplog.at_level(logging.WARNING, logger="nonebot_plugin_yuiju.frames"):
        fixed = telegram.normalise_update(update)
        assert fixed["message"]["entities"] == [mention]
        event = Event.parse_event(fixed)  # as the adapter would, without a traceback
    assert event.get_plaintext() == "@yuiju_bot 😀好\ufffd"
    [line] = warnings(caplog)
    assert line.startswith("bad Telegram entities skipped in message 8 (1 of 6 kept): ")
    assert telegram.normalise_update({"update_id": 4, "message": telegram_message("x", [])}) == {
        "update_id": 4,
        "message": telegram_message("x", []),
    }


def test_one_bad_telegram_update_no_longer_fails_its_whole_batch() -> None:
    # the adapter validated the batch as one list: one bad update failed every poll, since the
    # offset that would confirm it never moved
    good = {"update_id": 5, "message": telegram_message("在吗", [])}
    updates = [telegram.read_update(u) for u in ({"update_id": 4, "message": "x"}, good, "junk")]
    assert [u.update_id if u else None for u in updates] == [4, 5, None]
    assert updates[0] is not None and updates[0].message is None  # confirmed, nothing handled
    assert updates[1] is not None and updates[1].message is not None


def feishu_post(nodes: list[Any], mentions: list[Any]) -> dict[str, Any]:
    message = {
        "message_id": "om_5",
        "create_time": "1",
        "chat_id": "oc_1",
        "chat_type": "group",
        "message_type": "post",
        "content": json.dumps({"title": "", "content": [nodes, "not a line"]}),
        "mentions": mentions,
    }
    sender = {"sender_id": {"open_id": "ou_2", "union_id": "on_2", "user_id": "2"}}
    return {
        "schema": "2.0",
        "header": {
            "event_id": "e",
            "event_type": "im.message.receive_v1",
            "create_time": "1",
            "token": "t",
            "app_id": "cli_1",
            "tenant_key": "k",
        },
        "event": {
            "sender": {**sender, "sender_type": "user", "tenant_key": "k"},
            "message": message,
        },
    }


def test_feishu_post_nodes_and_mentions_it_cannot_read_are_left_out_and_the_rest_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from nonebot.adapters.feishu import Adapter, GroupMessageEvent

    at = {"tag": "at", "user_id": "@_user_1", "user_name": "悠酱"}
    text = {"tag": "text", "text": " 你好"}
    ids = {"open_id": "ou_bot", "union_id": "on_bot", "user_id": ""}
    mention = {"key": "@_user_1", "id": ids, "name": "悠酱", "tenant_key": "k"}
    data = feishu_post([at, text, {"text": "没有 tag"}, {"tag": "img"}, 5], [mention, {"key": 1}])
    with caplog.at_level(logging.WARNING, logger="nonebot_plugin_yuiju.frames"):
        event = feishu.parse_event(Adapter, data)
    assert isinstance(event, GroupMessageEvent)
    assert json.loads(event.event.message.content)["content"] == [[at, text]]
    assert [m.key for m in event.event.message.mentions or []] == ["@_user_1"]
    assert "你好" in str(event.get_message())
    [line] = warnings(caplog)
    assert line.startswith("bad Feishu parts skipped in message om_5 (3 of 8 kept): a mention")


def test_a_feishu_event_that_says_it_is_a_message_but_fits_no_model_is_skipped() -> None:
    from nonebot.adapters.feishu import Adapter

    data = feishu_post([], [])
    data["event"] = {"message": {"chat_type": "group"}}
    assert feishu.parse_event(Adapter, data) is None
    assert feishu.parse_event(Adapter, {**data, "header": [1]}) is None


def test_reports_are_one_short_line_each_at_most_a_burst_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reports = FrameReports("Test", logging.getLogger("nonebot_plugin_yuiju.frames.test"), burst=3)
    with caplog.at_level(logging.WARNING, logger="nonebot_plugin_yuiju.frames"):
        for _ in range(50):
            reports.frame("not JSON (JSONDecodeError)", "x" * 5000)
        reports.frames.reset()
        reports.frame("not JSON", None)
    lines = warnings(caplog)
    assert len(lines) == 4 and all(len(line) < 200 for line in lines), lines
    assert lines[-1] == "bad Test frame skipped: not JSON"


def test_every_guard_installs_once() -> None:
    from nonebot.adapters.feishu import Adapter as FeishuAdapter
    from nonebot.adapters.satori import Adapter as SatoriAdapter
    from nonebot.adapters.telegram import Bot as TelegramBot

    from nonebot_plugin_yuiju import frames

    frames.install()
    seams = (
        SatoriAdapter.receive_payload,
        TelegramBot.call_api,
        FeishuAdapter._handle_http,
        FeishuAdapter.json_to_event,
    )
    frames.install()
    assert seams == (
        SatoriAdapter.receive_payload,
        TelegramBot.call_api,
        FeishuAdapter._handle_http,
        FeishuAdapter.json_to_event,
    )
