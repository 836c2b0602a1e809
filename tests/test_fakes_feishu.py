"""The Feishu fake against the real nonebot-adapter-feishu: a NoneBot app in a subprocess, its
``api_base`` pointed at the fake, gets encrypted event callbacks on its webhook and answers
through the fake's OpenAPI."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from tests.fakes import BAD_FRAMES, BadFrame, FeishuFake, NoneBotApp, echo_plugin

PICTURE = """
from nonebot.adapters.feishu import MessageSegment

async def picture(bot):
    uploaded = await bot.call_api(
        "im/v1/images", method="POST", data={"image_type": "message"},
        files={"image": ("echo.png", b"\\x89PNG fake")},
    )
    return MessageSegment.image(uploaded["data"]["image_key"])
"""


@dataclass
class Running:
    fake: FeishuFake
    app: NoneBotApp

    def log(self) -> str:
        return self.app.log()[-3000:]


@pytest.fixture(scope="module")
async def running(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    workdir = tmp_path_factory.mktemp("feishu-bot")
    async with FeishuFake() as fake, NoneBotApp(workdir, fake, echo_plugin(PICTURE)) as app:
        await fake.wait_connected(30)
        start = await fake.calls_until_quiet(0.5)
        assert [c.name for c in start] == [
            "POST auth/v3/tenant_access_token/internal",
            "GET bot/v3/info",
        ], app.log()[-3000:]
        yield Running(fake, app)


@pytest.mark.slow
async def test_a_mention_in_the_group_gets_an_echo_in_the_group(running: Running) -> None:
    await running.fake.send_group_message("在吗", mention_bot=True)
    calls = await running.fake.calls_until_quiet(1.0, first_within=10)
    assert [c.name for c in calls] == ["POST im/v1/messages"], running.log()
    assert calls[0].params["receive_id_type"] == "chat_id"
    assert calls[0].sent is not None
    assert (calls[0].sent.chat, calls[0].sent.text) == ("oc_fake_group", "echo: 在吗 [text]")


@pytest.mark.slow
async def test_chatter_in_the_group_gets_nothing(running: Running) -> None:
    await running.fake.send_group_message("今天吃什么")
    assert await running.fake.calls_until_quiet(1.0) == []


@pytest.mark.slow
async def test_a_private_message_gets_an_echo_to_the_sender(running: Running) -> None:
    await running.fake.send_private_message("你好")
    sent = await running.fake.sent_until_quiet(1.0, first_within=10)
    assert [(s.chat, s.text) for s in sent] == [("ou_20002", "echo: 你好 [text]")], running.log()


@pytest.mark.slow
async def test_replying_to_her_message_counts_as_talking_to_her(running: Running) -> None:
    await running.fake.send_group_message("在吗", mention_bot=True)
    [hers] = await running.fake.sent_until_quiet(1.0, first_within=10)
    await running.fake.send_group_message("真的？", reply_to=hers.message_id)
    calls = await running.fake.calls_until_quiet(1.0, first_within=10)
    # the adapter fetched the parent message, saw the app had sent it, and answered
    assert [c.name for c in calls] == ["GET im/v1/messages/:message_id", "POST im/v1/messages"]
    assert calls[0].params["message_id"] == hers.message_id
    assert calls[1].sent is not None and calls[1].sent.text == "quote echo: 真的？ [text]"


@pytest.mark.slow
async def test_images_and_stickers_arrive_as_segments_and_her_image_goes_out(
    running: Running,
) -> None:
    await running.fake.send_private_message(image=True)
    calls = await running.fake.calls_until_quiet(1.0, first_within=10)
    names = [c.name for c in calls]
    assert names == ["POST im/v1/messages", "POST im/v1/images", "POST im/v1/messages"], (
        running.log()
    )
    assert calls[0].sent is not None and calls[0].sent.text.endswith("[image]")
    assert calls[1].files == {"image": b"\x89PNG fake"}
    assert calls[2].sent is not None and calls[2].sent.media == ("image",)
    await running.fake.send_group_message("看", mention_bot=True, image=True)  # a post
    echo, _ = await running.fake.sent_until_quiet(1.0, first_within=10)
    assert echo.text.endswith("[post]")
    await running.fake.send_private_message(sticker=True)
    [echo] = await running.fake.sent_until_quiet(1.0, first_within=10)
    assert echo.text.endswith("[sticker]")


@pytest.mark.slow
@pytest.mark.parametrize("kind", BAD_FRAMES)
async def test_a_bad_callback_never_stops_the_bot(running: Running, kind: BadFrame) -> None:
    await running.fake.send_bad_frame(kind)
    what, status = running.fake.deliveries[-1]
    assert what == kind
    assert status == (500 if kind in ("truncated", "garbage") else 200)
    await running.fake.send_group_message(f"after {kind}", mention_bot=True)
    sent = await running.fake.sent_until_quiet(1.0, first_within=10)
    assert [s.text for s in sent] == [f"echo: after {kind} [text]"], running.log()
    assert running.app.running


async def test_callbacks_decrypt_with_the_adapters_own_cipher() -> None:
    from nonebot.adapters.feishu.utils import AESCipher

    fake = FeishuFake(encrypt_key="k3y")
    sealed = json.loads(fake._seal({"challenge": "c", "type": "url_verification"}))
    opened = json.loads(AESCipher("k3y").decrypt_string(sealed["encrypt"]))
    assert opened == {"challenge": "c", "type": "url_verification"}
    assert json.loads(FeishuFake(encrypt_key=None)._seal({"a": 1})) == {"a": 1}


async def test_the_openapi_wants_the_tenant_token_and_the_right_secret() -> None:
    async with FeishuFake() as fake, httpx.AsyncClient(trust_env=False) as client:
        api = f"{fake.base_url}/open-apis"
        refused = await client.post(
            f"{api}/auth/v3/tenant_access_token/internal",
            json={"app_id": fake.app_id, "app_secret": "wrong"},
        )
        assert refused.json()["code"] != 0
        anonymous = await client.get(f"{api}/bot/v3/info")
        assert anonymous.status_code == 400 and anonymous.json()["code"] == 99991663
        token = (
            await client.post(
                f"{api}/auth/v3/tenant_access_token/internal",
                json={"app_id": fake.app_id, "app_secret": fake.app_secret},
            )
        ).json()["tenant_access_token"]
        info = await client.get(f"{api}/bot/v3/info", headers={"Authorization": f"Bearer {token}"})
        assert info.json()["bot"]["open_id"] == fake.bot_open_id


@pytest.mark.slow
async def test_a_recall_reaches_the_app_as_a_recalled_event(running: Running) -> None:
    mid = await running.fake.send_group_message("发错了")
    await running.fake.send_recall(mid)
    await running.fake.calls_until_quiet(1.0)
    assert running.fake.deliveries[-1] == ("im.message.recalled_v1", 200)
    [recalled] = [
        line for line in running.app.log().splitlines() if "[im.message.recalled_v1]" in line
    ]
    assert f"'message_id': '{mid}'" in recalled
