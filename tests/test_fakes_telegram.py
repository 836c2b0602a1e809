"""The Telegram Bot API fake against the real nonebot-adapter-telegram: a NoneBot app in a
subprocess, its ``api_server`` pointed at the fake, long-polls updates and answers through it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from tests.fakes import BAD_FRAMES, BadFrame, NoneBotApp, TelegramFake, echo_plugin

PICTURE = """
from nonebot.adapters.telegram.message import File

async def picture(bot):
    return File.photo(b"\\x89PNG fake")
"""


@dataclass
class Running:
    fake: TelegramFake
    app: NoneBotApp

    def log(self) -> str:
        return self.app.log()[-3000:]


@pytest.fixture(scope="module")
async def running(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    workdir = tmp_path_factory.mktemp("telegram-bot")
    async with TelegramFake() as fake, NoneBotApp(workdir, fake, echo_plugin(PICTURE)) as app:
        await fake.wait_connected(30)
        start = await fake.calls_until_quiet(0.5)
        assert [c.name for c in start] == ["getMe", "deleteWebhook"], app.log()[-3000:]
        yield Running(fake, app)


@pytest.mark.slow
async def test_a_mention_in_the_group_gets_an_echo_in_the_group(running: Running) -> None:
    await running.fake.send_group_message("在吗", mention_bot=True)
    calls = await running.fake.calls_until_quiet(1.0, first_within=10)
    assert [c.name for c in calls] == ["sendMessage"], running.log()
    assert calls[0].params["chat_id"] == -1001234567890
    assert calls[0].sent is not None and calls[0].sent.text == "echo: 在吗 [text]"


@pytest.mark.slow
async def test_chatter_in_the_group_gets_nothing(running: Running) -> None:
    await running.fake.send_group_message("今天吃什么")
    assert await running.fake.calls_until_quiet(1.0) == []


@pytest.mark.slow
async def test_a_private_message_gets_an_echo_in_the_private_chat(running: Running) -> None:
    await running.fake.send_private_message("你好")
    sent = await running.fake.sent_until_quiet(1.0, first_within=10)
    assert [(s.chat, s.text) for s in sent] == [("20002", "echo: 你好 [text]")], running.log()


@pytest.mark.slow
async def test_replying_to_her_message_counts_as_talking_to_her(running: Running) -> None:
    await running.fake.send_group_message("在吗", mention_bot=True)
    [hers] = await running.fake.sent_until_quiet(1.0, first_within=10)
    await running.fake.send_group_message("真的？", reply_to=hers.message_id)
    sent = await running.fake.sent_until_quiet(1.0, first_within=10)
    assert [s.text for s in sent] == ["quote echo: 真的？ [text]"], running.log()


@pytest.mark.slow
async def test_photos_and_stickers_arrive_as_segments_and_her_photo_goes_out(
    running: Running,
) -> None:
    await running.fake.send_group_message("看", mention_bot=True, image=True)
    calls = await running.fake.calls_until_quiet(1.0, first_within=10)
    assert [c.name for c in calls] == ["sendMessage", "sendPhoto"], running.log()
    assert calls[0].sent is not None and calls[0].sent.text == "echo: 看 [text,photo]"
    # the photo went up as a multipart file, named by attach:// in the parameters
    attached = calls[1].params["photo"].removeprefix("attach://")
    assert calls[1].files == {attached: b"\x89PNG fake"}
    assert calls[1].sent is not None and calls[1].sent.media == ("image",)
    await running.fake.send_private_message(sticker=True)
    [echo] = await running.fake.sent_until_quiet(1.0, first_within=10)
    assert echo.text == "echo:  [sticker]"


@pytest.mark.slow
@pytest.mark.parametrize("kind", BAD_FRAMES)
async def test_a_bad_frame_never_stops_the_bot(running: Running, kind: BadFrame) -> None:
    await running.fake.send_bad_frame(kind)
    await running.fake.send_group_message(f"after {kind}", mention_bot=True)
    # after an unusable getUpdates answer the adapter waits 5 s before it polls again
    sent = await running.fake.sent_until_quiet(1.0, first_within=15)
    assert [s.text for s in sent] == [f"echo: after {kind} [text]"], running.log()
    assert running.app.running


async def test_getupdates_confirms_earlier_updates_by_offset_and_holds_an_empty_poll() -> None:
    async with TelegramFake(max_hold=0.3) as fake, httpx.AsyncClient(trust_env=False) as client:
        url = f"{fake.base_url}/bot{fake.token}/getUpdates"
        await fake.send_private_message("一")
        await fake.send_private_message("二")
        first = (await client.post(url, json={"timeout": 5})).json()["result"]
        assert [u["message"]["text"] for u in first] == ["一", "二"]
        again = (await client.post(url, json={"offset": first[1]["update_id"]})).json()
        assert [u["message"]["text"] for u in again["result"]] == ["二"]
        confirmed = (await client.post(url, json={"offset": first[1]["update_id"] + 1})).json()
        assert confirmed == {"ok": True, "result": []}
        wrong = await client.post(f"{fake.base_url}/bot1:wrong/getMe")
        assert wrong.status_code == 401 and wrong.json()["ok"] is False


async def test_sending_to_a_chat_the_bot_does_not_know_fails_as_telegram_does() -> None:
    async with TelegramFake() as fake, httpx.AsyncClient(trust_env=False) as client:
        response = await client.post(
            f"{fake.base_url}/bot{fake.token}/sendMessage", json={"chat_id": 42, "text": "hi"}
        )
        assert response.status_code == 400
        assert response.json()["description"] == "Bad Request: chat not found"
        assert [c.sent for c in fake.calls.all] == [None]
