"""Her chat platforms at the NoneBot edge: what each adapter says that alconna's universal layer
does not (`AdapterEdge`). (`yuiju run` / `yuiju bot` start the platforms yuiju.toml switches on:
`yuiju.cli.nonebot_settings`; the plugin inside someone else's app uses that app's adapters.)

alconna reads any adapter's segments (`uni`), names the conversation (``get_target``) and the
message (``get_message_id``), and sends (`send`). What is left differs per adapter and is here,
one small entry each:

- ``her_ids``: what an @ of her carries (Telegram mentions her by ``@username``, Feishu by the
  bot's open_id, both unlike the bot's ``self_id``);
- ``sender``: the sender's id and display name;
- ``reply_to_me``: whether a quoted message is hers (each adapter resolves quotes its own way);
- ``sent_at``: when the platform says the message was sent;
- ``message``: the message as it arrived. Adapters strip an @ of her, a quote and a leading
  nickname from ``get_message()``; the core reads every message whole, so it gets the original
  (Feishu's rich-text posts opened into words, @s and images; Telegram's ``/cmd@her_bot`` as an @
  of her and the command);
- ``message_id`` and ``may_quote``: the message's id, and whether alconna may read a quote in
  it (both know message events only: a Satori command picked from the platform's menu,
  ``interaction/command``, is none);
- ``direct_channel``: where a private answer goes when it is not the person (Satori).

A new platform costs one entry in `EDGES` (and, to be started by `yuiju run`, a config section
in `yuiju.config` and its adapter in `yuiju.cli.nonebot_settings` and ``ADAPTER_MODULES``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from nonebot.adapters import Bot, Event

if TYPE_CHECKING:
    from nonebot.adapters import Message
    from nonebot.adapters.feishu import Bot as FeishuBot
    from nonebot.adapters.feishu import MessageEvent as FeishuEvent
    from nonebot.adapters.satori import Bot as SatoriBot
    from nonebot.adapters.satori.event import MessageEvent as SatoriEvent
    from nonebot.adapters.satori.message import MessageSegment as SatoriSegment
    from nonebot.adapters.telegram import Bot as TelegramBot
    from nonebot.adapters.telegram.event import MessageEvent as TelegramEvent

BotT = TypeVar("BotT", bound=Bot)
EventT = TypeVar("EventT", bound=Event)


def _original(event: Event) -> Message:
    original: Message | None = getattr(event, "original_message", None)
    return original if original is not None else event.get_message()


def _as_arrived(bot: Bot, event: Event) -> Message:
    return _original(event)


def _self_only(bot: Bot) -> set[str]:
    return {str(bot.self_id)}


def _no_reply_info(bot: Bot, event: Event) -> bool:
    return False


def _no_time(event: Event) -> float | None:
    return None


def _no_channel(event: Event) -> str | None:
    return None


def _alconna_message_id(bot: Bot, event: Event) -> str:
    from nonebot_plugin_alconna.uniseg import get_message_id

    return str(get_message_id(event, bot))


def _a_message(event: Event) -> bool:
    return True


def _user_only(event: Event) -> tuple[str, str]:
    user = event.get_user_id()
    return user, user


@dataclass(frozen=True)
class AdapterEdge(Generic[BotT, EventT]):
    """What the core needs to know of one NoneBot adapter beyond alconna's universal layer."""

    prefix: str
    """The platform prefix of its people and conversations (``tg`` → ``tg:678``); Satori's comes
    from each login (`platform_of`)."""
    her_ids: Callable[[BotT], set[str]] = _self_only
    sender: Callable[[EventT], tuple[str, str]] = _user_only
    """The sender's platform id (unprefixed) and display name."""
    reply_to_me: Callable[[BotT, EventT], bool] = _no_reply_info
    sent_at: Callable[[EventT], float | None] = _no_time
    """Unix time the platform stamped on the message, or None (then: when it arrived)."""
    message: Callable[[BotT, EventT], Message] = _as_arrived
    message_id: Callable[[BotT, EventT], str] = _alconna_message_id
    """The message's id (alconna's ``get_message_id``, which knows message events only)."""
    may_quote: Callable[[EventT], bool] = _a_message
    """Whether the event is a message that may quote another (alconna reads a quote of message
    events only)."""
    direct_channel: Callable[[EventT], str | None] = _no_channel
    """The private channel a message came in, where the platform sends a private answer there
    rather than to the person (Satori: a server need not open a channel by ``user.channel.create``)."""


# -- Satori ---------------------------------------------------------------------------------------


def _satori_her_ids(bot: SatoriBot) -> set[str]:
    # the bot's self_id is "<platform>:<id>" (one adapter, many logins); an @ names the id alone
    return {str(bot.self_id), str(bot.get_self_id())}


def _satori_sender(event: SatoriEvent) -> tuple[str, str]:
    user = event.user
    member = getattr(event, "member", None)
    name = (member.nick if member is not None else None) or user.nick or user.name or user.id
    return str(user.id), str(name)


def _satori_reply_to_me(bot: SatoriBot, event: SatoriEvent) -> bool:
    """The adapter resolves a quote (its ``author``, or the message fetched by id) into
    ``event.to_me`` — which an @ of her and a leading nickname set too; only the quote counts here."""
    reply = getattr(event, "reply", None)
    if reply is None:
        return False
    author = reply.children.get("author") if reply.children else None
    if author:
        return str(author[0].data.get("id")) == str(bot.get_self_id())
    if not event.to_me:
        return False
    original = list(_original(event))
    rest = [s for s in original if s.type not in ("quote", "at") or _at_other(s, bot)]
    if any(s.type == "at" and not _at_other(s, bot) for s in original):
        return False  # to_me may be the @ alone
    first = next((s for s in rest if s.type == "text"), None)
    return not (first is not None and _calls_nickname(bot, str(first.data.get("text", ""))))


def _at_other(segment: SatoriSegment, bot: SatoriBot) -> bool:
    return segment.type == "at" and str(segment.data.get("id")) != str(bot.get_self_id())


def _calls_nickname(bot: SatoriBot, text: str) -> bool:
    """The adapter's own nickname check (``^nickname[\\s,，]*``), which sets ``to_me`` too."""
    names = [re.escape(n) for n in bot.config.nickname if n]
    return bool(names) and bool(
        re.search(rf"^({'|'.join(names)})([\s,，]*|$)", text.lstrip(), re.IGNORECASE)
    )


def _satori_message(bot: SatoriBot, event: SatoriEvent) -> Message:
    """A slash command picked from the platform's menu (``interaction/command`` with its
    ``argv``: no message, a name and arguments, always to her) as an @ of her and the command
    written out (``@her /status 今天``), as Telegram's ``/status@her_bot`` reads."""
    from nonebot.adapters.satori import Message as SatoriMessage
    from nonebot.adapters.satori import MessageSegment as SatoriSegment

    argv = getattr(event, "argv", None)
    if argv is None:
        return _original(event)
    command = " ".join([f"/{argv.name}", *(str(a) for a in argv.arguments or [])])
    return SatoriMessage([SatoriSegment.at(bot.get_self_id()), SatoriSegment.text(command)])


def _satori_may_quote(event: SatoriEvent) -> bool:
    return getattr(event, "argv", None) is None  # a command from the menu is no message


def _satori_message_id(bot: SatoriBot, event: SatoriEvent) -> str:
    """The message's id; a command from the menu has no message: its event's ``sn`` (or time)
    names it."""
    message = getattr(event, "message", None)
    if message is not None:
        return str(message.id)
    stamp = getattr(event, "timestamp", None)
    return f"interaction-{getattr(event, 'sn', 0) or (stamp.timestamp() if stamp else 0):.0f}"


def _satori_direct_channel(event: SatoriEvent) -> str | None:
    channel = getattr(event, "channel", None)
    return str(channel.id) if channel is not None and channel.type == 1 else None  # DIRECT


def _satori_sent_at(event: SatoriEvent) -> float | None:
    stamp = getattr(event, "timestamp", None)
    return stamp.timestamp() if stamp is not None else None


# -- Telegram -------------------------------------------------------------------------------------


def _telegram_her_ids(bot: TelegramBot) -> set[str]:
    ids = {str(bot.self_id)}
    if username := getattr(bot, "username", None):  # set by getMe when the bot starts
        ids |= {username, f"@{username}"}
    return ids


def _telegram_sender(event: TelegramEvent) -> tuple[str, str]:
    user = getattr(event, "from_", None)
    if user is None:  # a channel's post: the channel speaks
        chat = event.chat
        return str(chat.id), str(getattr(chat, "title", None) or chat.id)
    name = " ".join(p for p in (user.first_name, user.last_name) if p) or user.username
    return str(user.id), name or str(user.id)


def _telegram_reply_to_me(bot: TelegramBot, event: TelegramEvent) -> bool:
    quoted = getattr(event, "reply_to_message", None)
    author = getattr(quoted, "from_", None)
    return author is not None and str(author.id) == str(bot.self_id)


def _telegram_sent_at(event: TelegramEvent) -> float | None:
    return float(event.date) if getattr(event, "date", None) else None


def _telegram_message(bot: TelegramBot, event: TelegramEvent) -> Message:
    """A command addressed to her by username (``/status@her_bot``, as Telegram clients write
    commands in groups) as an @ of her and the command (``@her /status``)."""
    from nonebot.adapters.telegram import Message as TelegramMessage
    from nonebot.adapters.telegram.message import Entity

    original = _original(event)
    username = getattr(bot, "username", None)
    first = original[0] if original else None
    if not username or first is None or first.type not in ("bot_command", "text"):
        return original
    text = str(first.data.get("text", ""))
    found = re.match(rf"^(/\w+)@{re.escape(username)}\b", text, re.IGNORECASE)
    if found is None:
        return original
    rest = found.group(1) + text[found.end() :]
    out = TelegramMessage([Entity.mention(f"@{username}"), Entity.text(rest)])
    out.extend(original[1:])
    return out


# -- Feishu / Lark --------------------------------------------------------------------------------


def _feishu_her_ids(bot: FeishuBot) -> set[str]:
    ids = {str(bot.self_id)}
    if open_id := getattr(getattr(bot, "bot_info", None), "open_id", None):
        ids.add(open_id)  # an @ of her names her open_id
    return ids


def _feishu_sender(event: FeishuEvent) -> tuple[str, str]:
    # a message event names no sender (the contact API would, with a permission most bots lack)
    open_id = event.get_user_id()
    return open_id, open_id


def _feishu_reply_to_me(bot: FeishuBot, event: FeishuEvent) -> bool:
    reply = getattr(event, "reply", None)  # the quoted message, fetched by the adapter
    sender = getattr(reply, "sender", None)
    return (
        sender is not None
        and sender.id_type == "app_id"
        and str(sender.id) == str(bot.bot_config.app_id)
    )


def _feishu_sent_at(event: FeishuEvent) -> float | None:
    try:
        return int(event.event.message.create_time) / 1000
    except (AttributeError, TypeError, ValueError):
        return None


def _feishu_message(bot: FeishuBot, event: FeishuEvent) -> Message:
    """A rich-text ``post`` (text with an image, a mention, a link) as plain segments: alconna
    reads a whole post as one card, which would lose its words and her @."""
    from nonebot.adapters.feishu import Message as FeishuMessage
    from nonebot.adapters.feishu import MessageSegment

    original = _original(event)
    if not any(s.type == "post" for s in original):
        return original
    mentions = {m.key: m.id.open_id for m in (getattr(event.event.message, "mentions", None) or [])}
    out = FeishuMessage()
    for seg in original:
        if seg.type != "post":
            out.append(seg)
            continue
        if title := seg.data.get("title"):
            out.append(MessageSegment.text(f"{title}\n"))
        for i, line in enumerate(seg.data.get("content") or []):
            if i:
                out.append(MessageSegment.text("\n"))
            for node in line if isinstance(line, list) else []:
                tag = node.get("tag") if isinstance(node, dict) else None
                if tag in ("text", "a", "code_block"):
                    out.append(MessageSegment.text(str(node.get("text", ""))))
                elif tag == "at":
                    user = str(node.get("user_id", ""))
                    out.append(MessageSegment.at(mentions.get(user, user)))
                elif tag == "img" and node.get("image_key"):
                    out.append(MessageSegment.image(str(node["image_key"])))
                elif tag == "emotion":
                    out.append(MessageSegment.text(f"[{node.get('emoji_type', '表情')}]"))
    return out


EDGES: dict[str, AdapterEdge[Any, Any]] = {
    "Satori": AdapterEdge(
        prefix="satori",
        her_ids=_satori_her_ids,
        sender=_satori_sender,
        reply_to_me=_satori_reply_to_me,
        sent_at=_satori_sent_at,
        direct_channel=_satori_direct_channel,
        message=_satori_message,
        message_id=_satori_message_id,
        may_quote=_satori_may_quote,
    ),
    "Telegram": AdapterEdge(
        prefix="tg",
        her_ids=_telegram_her_ids,
        sender=_telegram_sender,
        reply_to_me=_telegram_reply_to_me,
        sent_at=_telegram_sent_at,
        message=_telegram_message,
    ),
    "Feishu": AdapterEdge(
        prefix="lark",
        her_ids=_feishu_her_ids,
        sender=_feishu_sender,
        reply_to_me=_feishu_reply_to_me,
        sent_at=_feishu_sent_at,
        message=_feishu_message,
    ),
}
"""NoneBot adapter name → its edge. OneBot v11 has its own hardened mapping (`onebot`); any other
adapter alconna knows goes through `GENERIC` with its name as prefix (``discord:…``)."""

OTHER_PREFIXES = {"OneBot V11": "qq", "Discord": "discord", "Console": "term"}
"""Prefixes of adapters without an edge of their own."""

SATORI_PLATFORMS = {"qq": "qq", "telegram": "tg", "feishu": "lark", "lark": "lark"}
"""A Satori login's platform → our prefix: QQ through Satori and through OneBot are one QQ."""


def edge_of(adapter: str) -> AdapterEdge[Any, Any]:
    edge = EDGES.get(adapter)
    if edge is not None:
        return edge
    return AdapterEdge(prefix=OTHER_PREFIXES.get(adapter, adapter.lower().replace(" ", "")))


def platform_of(bot: Bot) -> str:
    """The platform prefix of ``bot``'s people (``qq`` for OneBot v11 and for Satori on QQ)."""
    name = bot.adapter.get_name()
    if name == "Satori":  # one adapter, many platforms: its login says which
        platform = str(getattr(bot, "platform", "") or "").lower()
        return SATORI_PLATFORMS.get(platform, platform or "satori")
    return edge_of(name).prefix
