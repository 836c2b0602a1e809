"""Sending through NoneBot: the core's `Outgoing` as nonebot-plugin-alconna's `UniMessage`, sent
to a `Target` with the connected bot of the conversation's platform. Alconna's exporters turn it
into each adapter's own message (OneBot's ``send_msg`` with segments, Telegram's
``sendMessage``, Satori's ``message.create``), so a new platform needs no sending code here, only
its edge in `platforms.EDGES`.

Group management (member info, mute) has no universal form: `NoneBotGroups` speaks OneBot v11
for QQ and says the platform cannot where there is no mapping yet.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nonebot_plugin_yuiju.platforms import platform_of
from yuiju.message.channel import SendFailed
from yuiju.message.model import Conversation, Outgoing, OutSegment, split_id

if TYPE_CHECKING:
    from nonebot.adapters import Bot
    from nonebot_plugin_alconna.uniseg import Image

log = logging.getLogger(__name__)


def connected_bots() -> dict[str, Bot]:
    import nonebot

    return nonebot.get_bots()


class DirectChannels:
    """The private channel each person last wrote to her from (``qq:20002`` → ``private:20002``),
    on platforms that answer there (`platforms.AdapterEdge.direct_channel`): the most recent
    `LIMIT` people."""

    LIMIT = 10_000

    def __init__(self) -> None:
        self._channels: OrderedDict[str, str] = OrderedDict()

    def note(self, person: str, channel: str) -> None:
        self._channels[person] = channel
        self._channels.move_to_end(person)
        while len(self._channels) > self.LIMIT:
            self._channels.popitem(last=False)

    def get(self, person: str) -> str | None:
        return self._channels.get(person)


class NoneBotSender:
    """`message.channel.Sender` over NoneBot's connected bots, through alconna's `UniMessage`."""

    def __init__(
        self,
        bots: Callable[[], dict[str, Bot]] = connected_bots,
        direct: DirectChannels | None = None,
    ) -> None:
        self.bots = bots
        """The connected bots (looked up at each send: bots connect and go after start-up)."""
        self.direct = direct or DirectChannels()
        """Where a private answer goes on platforms that answer in the channel a message came in."""

    def bot_for(self, platform: str) -> Bot:
        for bot in self.bots().values():
            if platform_of(bot) == platform:
                return bot
        hint = (
            ": is NapCat/Lagrange connected to the reverse WebSocket?" if platform == "qq" else ""
        )
        raise SendFailed(f"no {platform} bot is connected{hint}")

    async def send(self, message: Outgoing) -> str | None:
        """Send ``message``; one with an image the platform cannot take (no image support in its
        adapter, or the upload refused) goes again with the image's text (``[开心]``)."""
        from nonebot.exception import ActionFailed, ApiNotAvailable, NetworkError
        from nonebot_plugin_alconna.uniseg import SerializeFailed

        conversation = message.conversation
        bot = self.bot_for(conversation.platform)
        images = any(seg.type == "image" for seg in message.segments)
        try:
            return await self._send(bot, message, images=images)
        except (ActionFailed, SerializeFailed, OSError) as exc:
            if not images:
                raise SendFailed(f"sending to {conversation} failed: {exc}") from exc
            log.info(
                "image to %s not sent (%s: %.200s); sending its text instead",
                conversation,
                type(exc).__name__,
                exc,
            )
            as_text = Outgoing(
                conversation=conversation,
                segments=tuple(
                    OutSegment(type="text", text=seg.text) if seg.type == "image" else seg
                    for seg in message.segments
                ),
            )
            try:
                return await self._send(bot, as_text, images=False)
            except (ActionFailed, NetworkError, ApiNotAvailable, SerializeFailed) as again:
                raise SendFailed(f"sending to {conversation} failed: {again}") from again
        except (NetworkError, ApiNotAvailable) as exc:
            raise SendFailed(f"sending to {conversation} failed: {exc}") from exc

    async def _send(self, bot: Bot, message: Outgoing, *, images: bool) -> str | None:
        from nonebot_plugin_alconna.uniseg import (
            At,
            FallbackStrategy,
            Reply,
            Target,
            Text,
            UniMessage,
        )

        conversation = message.conversation
        uni: UniMessage = UniMessage()
        for seg in message.segments:
            if seg.type == "text":
                uni.append(Text(seg.text))
            elif seg.type == "image" and seg.ref:
                uni.append(await _image(seg.ref, sticker=seg.sticker))
            elif seg.type == "at" and seg.ref:
                uni.append(At("user", split_id(seg.ref)[1]))
            elif seg.type == "reply" and seg.ref:
                uni.append(Reply(seg.ref))
        private = conversation.scene == "private"
        channel = self.direct.get(f"{conversation.platform}:{conversation.id}") if private else None
        target = (
            Target(channel, self_id=bot.self_id)  # that very channel, as a group's is
            if channel is not None
            else Target(conversation.id, private=private, self_id=bot.self_id)
        )
        # an image a platform cannot show raises here instead of going out as "[image]开心.png"
        fallback = FallbackStrategy.forbid if images else FallbackStrategy.auto
        receipt = await uni.send(target=target, bot=bot, fallback=fallback)
        return sent_message_id(receipt)


def sent_message_id(receipt: Any) -> str | None:
    """The id of the message a send delivered, or None: never an error, the message is out.

    alconna reads it from the adapter's answer, but Feishu's answer is ``{"code", "msg",
    "data": {"message_id", ...}}`` where alconna looks for ``message_id`` at the top (KeyError)."""
    if not receipt.msg_ids:
        return None
    try:
        reply = receipt.get_reply(0)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError):
        reply = None
    if reply is not None:
        return str(reply.id)
    answer = receipt.msg_ids[0]
    data = answer.get("data") if isinstance(answer, dict) else None
    if isinstance(data, dict) and data.get("message_id"):
        return str(data["message_id"])
    return None


async def _image(ref: str, *, sticker: bool) -> Image:
    """An image segment: a URL as it is, a local file as its bytes (an implementation on another
    machine or in another container cannot open a path of ours). Raises `OSError` when the file
    cannot be read."""
    import asyncio
    from pathlib import Path

    from nonebot_plugin_alconna.uniseg import Image

    if "://" in ref:
        return Image(url=ref, sticker=sticker)
    path = Path(ref)
    raw = await asyncio.to_thread(path.read_bytes)
    return Image(raw=raw, name=path.name, sticker=sticker)


class NoneBotGroups:
    """`message.channel.GroupManager` for the platforms whose API is mapped (OneBot v11)."""

    def __init__(self, sender: NoneBotSender | None = None) -> None:
        self.sender = sender or NoneBotSender()

    def _onebot(self, conversation: Conversation) -> Bot:
        bot = self.sender.bot_for(conversation.platform)
        if bot.adapter.get_name() != "OneBot V11" or conversation.scene != "group":
            raise SendFailed(f"group management is not available on {conversation.platform}")
        return bot

    async def member_info(self, conversation: Conversation, person: str) -> dict[str, str]:
        from nonebot.exception import ActionFailed, NetworkError

        bot = self._onebot(conversation)
        try:
            info = await bot.call_api(
                "get_group_member_info",
                group_id=int(conversation.id),
                user_id=int(split_id(person)[1]),
            )
        except (ActionFailed, NetworkError, ValueError) as exc:
            raise SendFailed(f"member {person} of {conversation.key}: {exc}") from exc
        keep = ("user_id", "nickname", "card", "title", "role", "level")
        return {k: str(info[k]) for k in keep if isinstance(info, dict) and k in info}

    async def mute(self, conversation: Conversation, person: str, seconds: int) -> None:
        from nonebot.exception import ActionFailed, NetworkError

        bot = self._onebot(conversation)
        try:
            await bot.call_api(
                "set_group_ban",
                group_id=int(conversation.id),
                user_id=int(split_id(person)[1]),
                duration=seconds,
            )
        except (ActionFailed, NetworkError, ValueError) as exc:
            raise SendFailed(f"muting {person} in {conversation.key}: {exc}") from exc
