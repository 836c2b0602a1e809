"""nonebug: the matcher hands a normalised OneBot event to the chat service and sends its reply."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from nonebot.adapters.onebot.v11 import Adapter, Bot, GroupMessageEvent, Message, MessageSegment
from nonebot.adapters.onebot.v11.event import Sender
from nonebug import App

from nonebot_plugin_yuiju.send import NoneBotSender
from tests.conftest import InstallService
from tests.test_message_service import BOT, GROUP, make_kit


def group_event(
    message: Message, *, user: int = 5, to_me: bool = False, mid: int = 1
) -> GroupMessageEvent:
    return GroupMessageEvent(
        time=1_788_000_000,
        self_id=BOT,
        post_type="message",
        sub_type="normal",
        user_id=user,
        message_type="group",
        message_id=mid,
        message=message,
        original_message=message,
        raw_message=str(message),
        font=0,
        sender=Sender(user_id=user, nickname="小明", card=""),
        to_me=to_me,
        group_id=GROUP,
    )


async def test_an_at_mention_is_answered_with_one_send_msg(
    app: App, redis: Any, install_service: InstallService
) -> None:
    import nonebot_plugin_yuiju.matchers as matchers

    connected: dict[str, Bot] = {}
    # the plugin's own sender: alconna's UniMessage exported to OneBot's send_msg
    kit = await make_kit(redis, sender=NoneBotSender(lambda: connected))
    install_service(kit.service)
    async with app.test_matcher(matchers.chat) as ctx:
        adapter = nonebot_adapter()
        bot = ctx.create_bot(base=Bot, adapter=adapter, self_id=str(BOT))
        connected["bot"] = bot
        event = group_event(MessageSegment.at(BOT) + MessageSegment.text(" 在吗"), to_me=True)
        ctx.receive_event(bot, event)
        ctx.should_call_api(
            "send_msg",
            {
                "message_type": "group",
                "group_id": GROUP,
                "message": Message(MessageSegment.text("嗯嗯，我在")),
            },
            {"message_id": 77},
        )
    async with app.test_matcher(matchers.chat) as ctx:
        bot = ctx.create_bot(base=Bot, adapter=nonebot_adapter(), self_id=str(BOT))
        connected["bot"] = bot
        ctx.receive_event(bot, group_event(Message("大家好"), mid=2))  # recorded, not answered
    recent = await kit.service.sessions.recent(f"group:qq:{GROUP}", 10)
    assert [e.text for e in recent] == ["@悠酱 在吗", "嗯嗯，我在", "大家好"]
    [mine] = [e for e in recent if e.from_bot]
    assert mine.id == "bot-77"  # the platform's message id, through alconna's receipt


def nonebot_adapter() -> Adapter:
    import nonebot

    return nonebot.get_adapter(Adapter)


async def receive_with(
    app: App, redis: Any, install_service: InstallService, handle: Any, *, mid: int
) -> None:
    """One group message through the real matcher, with the chat service's ``handle`` replaced."""
    import nonebot_plugin_yuiju.matchers as matchers

    kit = await make_kit(redis)
    kit.service.handle = handle  # type: ignore[method-assign]
    install_service(kit.service)
    async with app.test_matcher(matchers.chat) as ctx:
        bot = ctx.create_bot(base=Bot, adapter=nonebot_adapter(), self_id=str(BOT))
        ctx.receive_event(
            bot, group_event(MessageSegment.at(BOT) + MessageSegment.text(" 在吗"), mid=mid)
        )


async def test_a_message_the_service_cannot_handle_costs_one_log_line(
    app: App,
    redis: Any,
    caplog: pytest.LogCaptureFixture,
    install_service: InstallService,
) -> None:
    async def broken(entry: Any) -> Any:
        raise RuntimeError("redis went away")

    caplog.set_level(logging.INFO, logger="yuiju.message")

    caplog.set_level(logging.INFO, logger="nonebot_plugin_yuiju")
    for mid in (1, 2):
        await receive_with(app, redis, install_service, broken, mid=mid)
    lines = [r for r in caplog.records if r.name == "nonebot_plugin_yuiju.matchers"]
    assert [r.getMessage() for r in lines] == [
        f"message {mid} not handled: RuntimeError: redis went away" for mid in (1, 2)
    ]
    assert lines[0].exc_info and not lines[1].exc_info  # the traceback once, then one line each


async def test_a_message_that_meets_redis_down_costs_one_line_without_a_traceback(
    app: App,
    redis: Any,
    caplog: pytest.LogCaptureFixture,
    install_service: InstallService,
) -> None:
    # a store outage is not a bug in the code: the log says what is down, not where in the code
    from redis.exceptions import ConnectionError as RedisConnectionError

    async def down(entry: Any) -> Any:
        raise RedisConnectionError("Error 111 connecting to redis.socket. Connection refused.")

    caplog.set_level(logging.INFO, logger="yuiju.message")

    caplog.set_level(logging.INFO, logger="nonebot_plugin_yuiju")
    await receive_with(app, redis, install_service, down, mid=3)
    [line] = [r for r in caplog.records if r.name == "nonebot_plugin_yuiju.matchers"]
    assert "store is unavailable" in line.getMessage() and not line.exc_info


async def test_a_reply_in_flight_is_given_up_when_the_bot_stops(
    app: App, redis: Any, install_service: InstallService
) -> None:
    # nonebot runs matchers shielded from cancellation, so a turn waiting on the model (or on a
    # locked history file) held every stop until it finished; found by bench/faults.py
    import nonebot_plugin_yuiju.matchers as matchers

    cancelled = asyncio.Event()

    async def slow(entry: Any) -> Any:
        try:
            await asyncio.sleep(60)  # a model call
        except asyncio.CancelledError:
            cancelled.set()
            raise

    started = time.monotonic()
    asyncio.get_running_loop().call_later(0.2, matchers.STOPPING.set)
    try:
        await receive_with(app, redis, install_service, slow, mid=4)
    finally:
        matchers.STOPPING.clear()
    assert time.monotonic() - started < 5 and cancelled.is_set()


async def test_the_plugins_runtime_is_built_on_start_up_and_ended_at_shutdown() -> None:
    # no module global filled after construction: each driver's runtime comes from its start-up
    # hook, with the factory chosen before the start, and its closers go back at shutdown
    import nonebot_plugin_yuiju.runtime as runtime

    assert not hasattr(runtime, "RUNTIME")

    class Driver:  # any object a weak reference can key
        pass

    driver = Driver()
    built: list[runtime.Edge] = []

    async def closer() -> None:
        pass

    async def factory(edge: runtime.Edge) -> None:
        edge.on_stop.append(closer)
        built.append(edge)

    runtime.build_with(factory, driver)  # type: ignore[arg-type]
    assert runtime.chosen_factory(driver) is factory  # type: ignore[arg-type]
    started = await runtime.start(driver, factory)  # type: ignore[arg-type]
    assert started.edge is built[0] and started.service is None
    edge = runtime.stop(driver)  # type: ignore[arg-type]
    assert edge is started.edge and edge.on_stop == [closer]
    assert runtime.stop(driver) is None  # type: ignore[arg-type]


async def test_without_a_service_the_chat_handler_is_skipped(
    app: App, redis: Any, install_service: InstallService
) -> None:
    # the handler reaches the service through a NoneBot dependency, which skips it while there is none
    import nonebot_plugin_yuiju.matchers as matchers
    from nonebot_plugin_yuiju.runtime import Edge, Runtime, install

    kit = await make_kit(redis)
    install_service(kit.service)  # the fixture puts the runtime before back at the end
    install(Runtime(Edge()))
    async with app.test_matcher(matchers.chat) as ctx:
        bot = ctx.create_bot(base=Bot, adapter=nonebot_adapter(), self_id=str(BOT))
        ctx.receive_event(bot, group_event(MessageSegment.at(BOT) + MessageSegment.text(" 在吗")))
    assert await kit.service.sessions.recent(f"group:qq:{GROUP}", 10) == []
