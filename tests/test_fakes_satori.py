"""The Satori fake against the real nonebot-adapter-satori: a NoneBot app in a subprocess connects
to it over a loopback WebSocket, gets its events and answers through its HTTP API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
import websockets

from tests.fakes import BAD_FRAMES, BadFrame, NoneBotApp, SatoriFake, echo_plugin

PICTURE = """
from nonebot.adapters.satori import MessageSegment

async def picture(bot):
    return MessageSegment.image(raw=b"\\x89PNG fake", mime="image/png")
"""


@dataclass
class Running:
    fake: SatoriFake
    app: NoneBotApp

    def log(self) -> str:
        return self.app.log()[-3000:]


@pytest.fixture(scope="module")
async def running(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    workdir = tmp_path_factory.mktemp("satori-bot")
    async with SatoriFake() as fake, NoneBotApp(workdir, fake, echo_plugin(PICTURE)) as app:
        await fake.wait_connected(30)
        await fake.calls_until_quiet(0.5)
        yield Running(fake, app)


@pytest.mark.slow
async def test_a_mention_in_the_group_gets_an_echo_in_the_group(running: Running) -> None:
    await running.fake.send_group_message("在吗", mention_bot=True)
    sent = await running.fake.sent_until_quiet(1.0, first_within=10)
    assert [(s.chat, s.text) for s in sent] == [("123456", "echo: 在吗 [text]")], running.log()


@pytest.mark.slow
async def test_chatter_in_the_group_gets_nothing(running: Running) -> None:
    await running.fake.send_group_message("今天吃什么")
    assert await running.fake.calls_until_quiet(1.0) == []


@pytest.mark.slow
async def test_a_private_message_gets_an_echo_in_the_direct_channel(running: Running) -> None:
    await running.fake.send_private_message("你好")
    sent = await running.fake.sent_until_quiet(1.0, first_within=10)
    assert [(s.chat, s.text) for s in sent] == [("private:20002", "echo: 你好 [text]")]


@pytest.mark.slow
async def test_quoting_her_message_counts_as_talking_to_her(running: Running) -> None:
    await running.fake.send_group_message("在吗", mention_bot=True)
    [hers] = await running.fake.sent_until_quiet(1.0, first_within=10)
    await running.fake.send_group_message("真的？", reply_to=hers.message_id)
    calls = await running.fake.calls_until_quiet(1.0, first_within=10)
    # the adapter looked the quoted message up, found it was hers, and answered
    assert [c.name for c in calls] == ["message.get", "message.create"], running.log()
    assert calls[0].params == {"channel_id": "123456", "message_id": hers.message_id}
    assert calls[1].sent is not None and calls[1].sent.text == "quote echo: 真的？ [text]"


@pytest.mark.slow
async def test_images_and_stickers_arrive_as_elements_and_her_image_goes_out(
    running: Running,
) -> None:
    await running.fake.send_group_message("看", mention_bot=True, image=True)
    echo, picture = await running.fake.sent_until_quiet(1.0, first_within=10)
    assert echo.text == "echo: 看 [text,img]", running.log()
    assert picture.media == ("image",)
    await running.fake.send_private_message(sticker=True)
    [echo] = await running.fake.sent_until_quiet(1.0, first_within=10)
    assert echo.text.endswith("[emoji]")


@pytest.mark.slow
@pytest.mark.parametrize("kind", BAD_FRAMES)
async def test_a_bad_frame_never_stops_the_bot(running: Running, kind: BadFrame) -> None:
    before = running.fake.connections
    await running.fake.send_bad_frame(kind)
    await running.fake.send_group_message(f"after {kind}", mention_bot=True)
    sent = await running.fake.sent_until_quiet(1.0, first_within=10)
    assert [s.text for s in sent] == [f"echo: after {kind} [text]"], running.log()
    assert running.app.running
    if kind in ("malformed", "unknown"):  # logged and skipped: the same connection goes on
        assert running.fake.connections == before
    else:  # undecodable: the adapter reconnects at once and resumes from the last sn it saw
        assert running.fake.connections == before + 1
        assert isinstance(running.fake.identifies[-1].get("sn"), int)


async def test_the_fake_refuses_a_wrong_token_as_a_satori_server_does() -> None:
    async with SatoriFake(token="right") as fake:
        async with httpx.AsyncClient(trust_env=False) as client:
            response = await client.post(
                f"{fake.base_url}/v1/message.create",
                json={"channel_id": "123456", "content": "hi"},
                headers={
                    "Authorization": "Bearer wrong",
                    "Satori-Platform": "qq",
                    "Satori-User-ID": "10001",
                },
            )
        assert response.status_code == 401
        async with websockets.connect(f"ws://127.0.0.1:{fake.port}/v1/events") as ws:
            await ws.send(json.dumps({"op": 3, "body": {"token": "wrong"}}))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4004
        assert fake.calls.all == []


@pytest.mark.slow
async def test_a_recall_reaches_the_app_as_a_message_deleted_event(running: Running) -> None:
    mid = await running.fake.send_group_message("发错了")
    await running.fake.send_recall(mid)
    await running.fake.calls_until_quiet(1.0)
    deleted = f"[message-deleted]: Message {mid} from 小明(20002)@[南风镇:123456] deleted"
    assert deleted in running.app.log(), running.log()
    assert mid not in running.fake.messages
