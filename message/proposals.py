"""What a conversation proposes to her life, through the world.

A person in chat may invite her somewhere (明天下午一起去南风公园吧), remind her of something
(别忘了周五考试), have her promise something, give her a small present (送你一个苹果) or tell her a
piece of news (我下周搬家). The model recognises these through the tools here; each tool turns
what was said into a world command naming who asked (a platform-qualified person, the
conversation it came from) and queues it. The world reviews it at its next tick against her
state, her calendar, opening hours, her other plans and the per-person and per-day limits
(`world.relations`), applies or declines it and records an episode either way: the engine stays
the single writer of her life. A tool first runs the same review on her current state, so the
model knows what is likely (she has class then) without promising what the world has not done;
the next turn's context (`person_context`) shows what the world decided, and later what she did.

Every turn she answers also moves her closeness to the speaker (`chat_tone`, a ``chat_with``
command): a little for talking, more for kind words, less for unkind ones, gains capped per day.
Admins are lenient: their invitations, notes, gifts and news skip the per-person and per-day
limits, never the calendar or the clock.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import datetime, time, timedelta
from typing import Any, TypeAlias

from yuiju.memory.episode_data import ConversationData, PlanData
from yuiju.memory.episodes import GIFT_PREFIX, Episode, EpisodeRepo
from yuiju.message.agent import RunContext, tool
from yuiju.message.deps import ChatDeps
from yuiju.message.when import When, WhenError, resolve_when
from yuiju.world.commands import (
    Command,
    CommandRejected,
    GiveItem,
    Invite,
    Remind,
    TellNews,
    proposal_line,
)
from yuiju.world.items import ALL as ALL_ITEMS
from yuiju.world.relations import (
    MAX_AHEAD_DAYS,
    Appointment,
    Note,
    Party,
    appointment_id,
    band,
    choose_start,
    note_id,
    review_gift,
    review_invitation,
    review_note,
)
from yuiju.world.state import CharacterState
from yuiju.world.town import PLACE_ENDINGS, Town

log = logging.getLogger(__name__)

Ctx: TypeAlias = RunContext[ChatDeps]

USUAL_DAY = ("15:00", "10:00", "19:00")
"""An invitation for a day without a time: usually 15:00, any time 10:00–19:00 she can."""
INVITE_MINUTES = 60
RESULT_DAYS = 7
"""How far back the context looks for what the world decided about a person's proposals."""
QUEUED = "还没定下来：你的生活会在下一刻（一分钟内）正式决定"
"""What every proposal tool tells the model besides the preview: nothing is settled yet."""


def place_in(text: str, words: Mapping[str, str]) -> tuple[str, str, int] | None:
    """The place ``text`` names first by its longest word (``words``: `ChatDeps.place_words`),
    as (place id, the word, where the word ends in ``text``); None when it names none."""
    text = text.strip()
    if text in words:
        return words[text], text, len(text)
    for word, pid in words.items():  # longest first: 学校食堂 before 食堂
        if (i := text.find(word)) >= 0:
            return pid, word, i + len(word)
    return None


def place_of(text: str, words: Mapping[str, str], town: Town) -> str | None:
    """The place ``text`` names (an id, a name, a word for it, or a part of one name), or None."""
    if found := place_in(text, words):
        return found[0]
    text = text.strip()
    named = [pid for pid, p in town.places.items() if text and text in p.name]
    return named[0] if len(named) == 1 else None


SOMEWHERE = re.compile(rf"(?:去|到)(.{{1,6}}?[{PLACE_ENDINGS}])")
"""Where an invitation goes, said as a place noun (去游乐园): a place her town may not have."""
_ASKED_TAIL = re.compile(r"(?:吧|吗|嘛|呢|呀|啊|哦|好不好|怎么样|要不要|行不行|可以吗|可以不)+$")


def asked_what(text: str, word: str, after: int) -> str:
    """What an invitation asks to do there, in its words: 去公园野餐吧 → 一起野餐; said nothing
    more than where (去图书馆吗): 一起去图书馆."""
    rest = re.split(r"[，。！？,.!?~～\s]", text[after:], maxsplit=1)[0]
    rest = _ASKED_TAIL.sub("", rest).removeprefix("一起")
    return f"一起{rest}"[:40] if rest else f"一起去{word}"[:40]


async def speaker(ctx: Ctx) -> Party:
    """The person speaking, as the world names them: their person id (linked accounts are one)
    and the name they go by."""
    person = await ctx.deps.people.canonical(ctx.user_id)
    name = (ctx.user_name or person).strip()[:40] or person
    return Party(kind="person", id=person[:80], name=name)


async def _queue(ctx: Ctx, command: Command) -> str | None:
    """Queue ``command``; an error line for the model when the world's queue refuses it."""
    try:
        await ctx.deps.commands.enqueue(command.model_dump(mode="json"))
    except CommandRejected as exc:
        return f"Error: 没能交给你的生活：{exc}"
    return None


async def _already_queued(ctx: Ctx, command: Command) -> bool:
    """The same proposal is already waiting for the next tick (asked twice in one minute)."""
    same = command.model_dump(mode="json")
    return any(c.model_dump(mode="json") == same for c in await ctx.deps.commands.pending())


# -- plans ------------------------------------------------------------------------------------


@tool(
    "propose_plan",
    "别人约你、提醒你某件事、或你答应了别人某件事时用，把它交给你在羽浦町的生活。"
    "kind：invite（约你某个时间一起去某个地方，place 必填）、remind（提醒你某天某时的事，如考试）、"
    "promise（你答应对方去做的事，可以带地点）。when 照对方说的时间写（如「明天下午」「周五」「后天三点」）。"
    "只有你自己愿意时才用；不想去就直接婉拒，不用调用。你的生活会在下一刻审核（上课、营业时间、"
    "别的约定、约得太多），工具会告诉你按现在的安排看行不行：在那之前别说已经定好了。",
    kind={"type": "string", "enum": ["invite", "remind", "promise"]},
    what={"type": "string", "description": "做什么或记什么，简短中文，如「一起散步」「考试」"},
    when={"type": "string", "description": "什么时候，照原话，如「明天下午」「周五」"},
    place={"type": "string", "description": "在哪里（地点名），邀请必填", "default": ""},
)
async def propose_plan(ctx: Ctx, args: dict[str, Any]) -> str:
    deps = ctx.deps
    kind = str(args.get("kind", ""))
    what = str(args.get("what", "")).strip()
    if kind not in ("invite", "remind", "promise"):
        return "Error: kind 只能是 invite、remind 或 promise。"
    if not what:
        return "Error: what 不能是空的：写做什么或记什么（如「一起散步」「考试」）。"
    now = deps.now()
    try:  # an invitation to a time gone by is declined by the world, and recorded
        when = resolve_when(str(args.get("when", "")), now, past_ok=kind == "invite")
    except WhenError as exc:
        return f"Error: when：{exc}"
    place = None
    names = "、".join(p.name for pid, p in deps.town.places.items() if pid != "home")
    if raw_place := str(args.get("place", "")).strip():
        place = place_of(raw_place, deps.place_words, deps.town)
        if place is None and kind != "invite":
            return f"Error: 羽浦町没有「{raw_place}」这个地方；能去的地方：{names}。"
    char = await deps.character_state()
    by = await speaker(ctx)
    if kind == "invite":
        if place is None and raw_place:  # somewhere her town does not have: declined, recorded
            told = await _invite(ctx, by, char, what, when, raw_place[:40], now)
            return f"{told}能约的地方：{names}。"
        return await _invite(ctx, by, char, what, when, place, now)
    return await _note(ctx, by, char, kind, what, when, place, now)


async def _invite(
    ctx: Ctx,
    by: Party,
    char: CharacterState | None,
    what: str,
    when: When,
    place: str | None,
    now: datetime,
) -> str:
    deps = ctx.deps
    if place is None:
        return "Error: 邀请要写 place：约在哪里（如 南风公园、月汐海岸、薄暮咖啡）。"
    earliest, latest, start = when.earliest, when.latest, when.start
    if when.all_day:
        day = when.start.date()
        usual, first, last = (
            datetime.combine(day, time.fromisoformat(t), tzinfo=now.tzinfo) for t in USUAL_DAY
        )
        start, earliest, latest = usual, first, last
    command = Invite(
        character_id=deps.card.id,
        by=by,
        place=place,
        start=start,
        minutes=INVITE_MINUTES,
        activity=what[:40],
        lenient=ctx.is_admin,
        earliest=earliest,
        latest=latest,
        via=ctx.session_id,
    )
    asked = Appointment(
        id=appointment_id(by, deps.card.id, start, place),
        other=by,
        asked_by=by,
        source="chat",
        place=place,
        start=start,
        minutes=INVITE_MINUTES,
        activity=what[:40],
        created_at=now,
    )
    where = deps.town.place_name(place)
    if char is not None and any(a.id == asked.id for a in char.social.appointments):
        return f"这件事已经在你的约定里了：{when.said}和{by.name}在{where}{what}。"
    if await _already_queued(ctx, command):
        return f"这个邀请刚才已经交给你的生活了，{QUEUED}。"
    if error := await _queue(ctx, command):
        return error
    if char is None:
        return f"已交给你的生活：{by.name}约你{when.said}在{where}{what}。{QUEUED}，现在看不到你的安排。"
    chosen, why = choose_start(
        asked,
        char.social.appointments,
        now=now,
        town=deps.town,
        earliest=earliest,
        latest=latest,
        closeness=char.social.closeness(by.key, now),
        lenient=ctx.is_admin,
    )
    if why is not None:
        outlook = f"按你现在的安排恐怕不行：{why}"
    else:
        local = chosen.start.astimezone(deps.tz)
        outlook = f"按你现在的安排应该可以，时间会是{local.month}月{local.day}日 {local:%H:%M}"
    return f"已交给你的生活：{by.name}约你{when.said}在{where}{what}。{outlook}。{QUEUED}。"


async def _note(
    ctx: Ctx,
    by: Party,
    char: CharacterState | None,
    kind: str,
    what: str,
    when: When,
    place: str | None,
    now: datetime,
) -> str:
    deps = ctx.deps
    command = Remind(
        character_id=deps.card.id,
        by=by,
        kind="reminder" if kind == "remind" else "promise",
        text=what[:60],
        at=when.start,
        all_day=when.all_day,
        place=place,
        via=ctx.session_id,
        lenient=ctx.is_admin,
    )
    note = Note(
        id=note_id(by, deps.card.id, when.start, command.text),
        kind=command.kind,
        text=command.text,
        by=by,
        at=when.start,
        all_day=when.all_day,
        place=place,
        created_at=now,
    )
    said = f"{when.said}{'在' + deps.town.place_name(place) if place else ''}：{what}"
    if char is not None and any(n.id == note.id for n in char.social.notes):
        return f"这件事你已经记着了（{said}）。"
    if await _already_queued(ctx, command):
        return f"这件事刚才已经交给你的生活了，{QUEUED}。"
    if error := await _queue(ctx, command):
        return error
    why = (
        review_note(
            note,
            char.social.notes,
            now=now,
            town=deps.town,
            closeness=char.social.closeness(by.key, now),
            lenient=ctx.is_admin,
        )
        if char is not None
        else None
    )
    outlook = "应该能记下" if why is None else f"恐怕记不下：{why}"
    whose = f"{by.name}提醒你" if kind == "remind" else f"你答应{by.name}"
    return f"已交给你的生活：{whose}{said}。{outlook}。{QUEUED}；到时候你会在安排里看到它。"


# -- what the model heard but did not propose ----------------------------------------------

TOGETHER = re.compile(r"一起|一块儿?|陪我")
"""An invitation says they would do it together ..."""
ASKING = re.compile(r"吧|吗|呢|？|\?|好不好|怎么样|要不要|行不行|可以不|咱们|我们")
"""... and asks her (我明天和朋友一起去公园 tells her of a plan, it invites nobody)."""
REMINDER = re.compile(r"^\s*(?:@\S+\s*)*(?:别忘了|不要忘了|记得|提醒你一下?)[，, ]*")
"""A reminder starts by asking her to keep something in mind."""
DECLINE = re.compile(
    r"不去|去不了|来不了|不行|没空|没时间|不方便|改天|下次吧|算了|抱歉|对不起|不能"
)
"""Her answer turns it down: nothing is proposed for her."""


async def unproposed(
    ctx: Ctx, text: str, replies: list[str], tools_called: list[str]
) -> str | None:
    """She answered a clear invitation (``明天下午一起去南风公园吧``: together, a place, a
    time) or reminder (``别忘了周五考试``) without calling `propose_plan`: propose it for her, as
    the tool would have, with what was asked (一起野餐). Models that answer in words and skip the
    tool are common; without this her plans would not move although she said yes. The world
    reviews it as any proposal. An invitation she turned down in words is left alone, unless it
    could never be: somewhere her town does not have (游乐园), a time gone by (昨天下午), or too
    far ahead (下个月十号) is proposed all the same, so the world declines it with its reason and
    the record (and her next turn with them) says why. Returns what she tells them at once when
    she said yes to such an invitation (why it cannot be), else None. Never raises: the reply
    is out already."""
    if "propose_plan" in tools_called:
        return None
    turned_down = DECLINE.search("".join(replies)) is not None
    text = text.strip()[:200]
    deps = ctx.deps
    now = deps.now()
    try:
        when = resolve_when(text, now, past_ok=True)
    except WhenError:
        return None
    correction = None
    try:
        if TOGETHER.search(text) and ASKING.search(text):
            found = place_in(text, deps.place_words)
            if found is None or found[0] == "home":
                somewhere = SOMEWHERE.search(text)
                if somewhere is None or somewhere.group(1) in deps.place_words:
                    return None
                found = (somewhere.group(1), somewhere.group(1), somewhere.end())
            place, word, after = found
            never = (
                place not in deps.town.places
                or when.past
                or when.start > now + timedelta(days=MAX_AHEAD_DAYS)
            )
            if turned_down and not never:
                return None
            by = await speaker(ctx)
            what = asked_what(text, word, after)
            told = await _invite(ctx, by, await deps.character_state(), what, when, place, now)
            if never and not turned_down:
                asked = Appointment(
                    id="asked", other=by, asked_by=by, place=place, start=when.start, created_at=now
                )
                why = review_invitation(asked, [], now=now, town=deps.town)
                correction = f"啊，等等……{why}，这个约不了呢。" if why else None
        elif (
            not turned_down
            and not when.past
            and REMINDER.search(text)
            and (what := REMINDER.sub("", text).strip(" 哦噢啊呀！!。~～"))
        ):
            by = await speaker(ctx)
            char = await deps.character_state()
            told = await _note(ctx, by, char, "remind", what[:60], when, None, now)
        else:
            return None
    except Exception as exc:  # the reply is out; a proposal lost is one line
        log.warning("what %s asked was not proposed to her life: %s", ctx.user_id, exc)
        return None
    log.info("proposed for her from %s's message (the model called no tool): %s", ctx.user_id, told)
    return correction


# -- gifts and news -------------------------------------------------------------------------


def item_of(text: str) -> str | None:
    """The item of her world ``text`` names (青苹果 for 苹果), or None."""
    text = text.strip()
    if text in ALL_ITEMS:
        return text
    found = [name for name in ALL_ITEMS if text and (text in name or name in text)]
    return found[0] if len(found) == 1 else None


@tool(
    "receive_gift",
    "对方在聊天里送你东西时用（如「送你一个苹果」）：东西会在下一刻到你的背包里。"
    "只能收羽浦町有的日常小东西（零食、水果、食材、便宜的饭菜），每人每天一次、每天最多几份；"
    "贵重的东西和钱收不了。工具会告诉你能不能收到，在那之前别说已经收到了。",
    item={"type": "string", "description": "东西的名字，如 青苹果、铜锣烧"},
    quantity={"type": "integer", "default": 1},
)
async def receive_gift(ctx: Ctx, args: dict[str, Any]) -> str:
    deps = ctx.deps
    said = str(args.get("item", "")).strip()
    try:
        quantity = max(1, min(99, int(args.get("quantity", 1))))
    except (TypeError, ValueError):
        return "Error: quantity 要写一个数字。"
    name = item_of(said)
    if name is None and not ctx.is_admin:
        return (
            f"羽浦町里没有「{said}」这种东西，收不到（现实世界的东西进不了羽浦町）。"
            "可以谢谢对方的心意，别说已经收到了。"
        )
    name = name or said[:40]
    by = await speaker(ctx)
    command = GiveItem(
        character_id=deps.card.id,
        item=name,
        quantity=quantity,
        by=by,
        via=ctx.session_id,
        lenient=ctx.is_admin,
    )
    char = await deps.character_state()
    gifts = char.social.gifts_on(deps.now().date()) if char is not None else []
    pending = [
        c
        for c in await deps.commands.pending()
        if isinstance(c, GiveItem) and c.by is not None and c.character_id == deps.card.id
    ]
    why = review_gift(
        name,
        quantity,
        by,
        [*gifts, *(c.by.key for c in pending if c.by)],
        closeness=char.social.closeness(by.key, deps.now()) if char is not None else None,
        lenient=ctx.is_admin,
    )
    if why is not None:
        return f"这份礼物收不了：{why}。没有交给你的生活；谢谢对方的心意就好。"
    if error := await _queue(ctx, command):
        return error
    return f"{by.name}送你的{name}×{quantity}会在下一刻放进你的背包。"


_FIRST_SECOND = re.compile(r"[我你]")


@tool(
    "remember_news",
    "对方告诉你一件关于他自己或别人的新鲜事（如「我下周搬家」「小王要转学了」），"
    "你想记住、也可能在和朋友聊天时提起时用。text 用第三人称写成你转述给别人的一句话"
    "（如「小林下周要搬家」），不用「我」「你」。about_speaker：这件事是不是关于正在说话的人自己。",
    text={"type": "string"},
    about_speaker={"type": "boolean", "default": True},
)
async def remember_news(ctx: Ctx, args: dict[str, Any]) -> str:
    deps = ctx.deps
    text = str(args.get("text", "")).strip()
    by = await speaker(ctx)
    if not text or len(text) > 60:
        return "Error: text 写成一句 60 字以内的话，如「小林下周要搬家」。"
    if _FIRST_SECOND.search(text):
        return f"Error: text 里不要用「我」「你」，写成你转述给别人时的样子，如「{by.name}下周要搬家」。"
    about = by if bool(args.get("about_speaker", True)) else None
    command = TellNews(
        character_id=deps.card.id,
        by=by,
        text=text,
        about=about,
        via=ctx.session_id,
        lenient=ctx.is_admin,
    )
    if await _already_queued(ctx, command):
        return "这件事刚才已经记下了。"
    if error := await _queue(ctx, command):
        return error
    return f"记下了：{text}（{by.name}说的）。以后和朋友聊天时，你可能会提起。"


PROPOSAL_TOOLS = (propose_plan, receive_gift, remember_news)


# -- what chat does to closeness --------------------------------------------------------------

KIND_WORDS = re.compile(
    r"谢谢|谢啦|多谢|感谢|辛苦了|加油|喜欢你|可爱|好棒|真棒|厉害|晚安|早安|抱抱|摸摸|想你|爱你"
)
UNKIND_WORDS = re.compile(r"滚|傻[逼瓜子]|笨蛋|闭嘴|烦死|讨厌你|去死|垃圾|白痴|恶心|废物|蠢")


def chat_tone(text: str) -> str:
    """How a message sounds to her: unkind, kind or neutral (unkind words win)."""
    if UNKIND_WORDS.search(text):
        return "unkind"
    if KIND_WORDS.search(text):
        return "kind"
    return "neutral"


MAX_QUEUED = 500
"""Commands waiting for the world beyond which chat stops adding closeness updates: a bot running
without its world (``yuiju bot`` alone) does not pile them up."""


async def after_turn(deps: ChatDeps, user_id: str, user_name: str, text: str) -> None:
    """She answered ``user_id``: her closeness to them moves (a ``chat_with`` command)."""
    try:
        if await deps.redis.llen(deps.keys.commands) >= MAX_QUEUED:
            return
    except Exception as exc:  # closeness must never cost the reply
        log.warning("closeness not updated: %s", exc)
        return
    person = await deps.people.canonical(user_id)
    by = Party(kind="person", id=person[:80], name=(user_name or person).strip()[:40] or person)
    try:
        await deps.commands.enqueue(
            {
                "type": "chat_with",
                "character_id": deps.card.id,
                "by": by.model_dump(),
                "tone": chat_tone(text),
            }
        )
    except Exception as exc:  # closeness must never cost the reply
        log.warning("closeness to %s not updated: %s", person, exc)


# -- what she knows about the person she talks to ---------------------------------------------

TONE = {
    "不太熟": "你们还不太熟：礼貌、有点拘谨，不主动说太多私事。",
    "认识": "你们认识：自然友好，可以聊聊日常。",
    "朋友": "你们是朋友：放松随意，可以开玩笑、分享小事。",
    "好朋友": "你们是好朋友：亲近，愿意说心里话。",
    "最好的朋友": "你们是最好的朋友：很亲密，什么都愿意跟对方说。",
}
"""Her tone in chat by how close she is to the speaker (`world.relations.band`)."""


def relation_line(char: CharacterState | None, person: str, name: str, now: datetime) -> str:
    """One line about her and the speaker: how close, how much they talked, the tone."""
    relation = char.social.relations.get(f"person:{person}") if char is not None else None
    closeness = relation.closeness_at(now) if relation is not None else 10.0
    talks = relation.talks if relation is not None else 0
    how = f"聊过 {talks} 次" if talks else "第一次聊"
    return f"{name}：{band(closeness)}（{how}）。{TONE[band(closeness)]}"


async def person_context(
    deps: ChatDeps, user_id: str, name: str, char: CharacterState | None
) -> list[str]:
    """What the model reads about her and the speaker: the relation and tone, her appointments
    and notes with them, what the world decided about their proposals lately (and whether she
    went), what is still waiting for the next tick, what she heard about them from others."""
    now = deps.now()
    person = await deps.people.canonical(user_id)
    key = f"person:{person}"
    lines = ["# 你和正在说话的人", relation_line(char, person, name, now)]
    if char is not None:
        social = char.social
        lines += [
            f"和{name}的约定：{a.line(deps.town, now)}"
            for a in social.planned()
            if a.other.key == key
        ]
        lines += [
            f"记着的事：{n.line(deps.town, now)}"
            for n in social.notes
            if n.status == "planned" and n.by.key == key
        ]
        heard = [
            n
            for n in social.news
            if n.about is not None and n.about.key == key and n.source.key != key
        ]
        lines += [f"你听说：{n.text}（{n.told_by_line()}的）" for n in heard[-3:]]
    lines += [f"结果：{line}" for line in await _outcomes(deps, person, now)]
    names = {deps.card.id: "你"}
    for command in await deps.commands.pending():
        by = getattr(command, "by", None)
        if (
            isinstance(by, Party)
            and by.key == key
            and getattr(command, "character_id", "") == deps.card.id
        ):
            line = proposal_line(command, names, deps.town)
            if line:
                lines.append(f"{QUEUED}：{line}")
    return lines


async def _outcomes(deps: ChatDeps, person: str, now: datetime) -> list[str]:
    """What the world recorded lately about this person's proposals: accepted or declined (and
    why), kept or missed, gifts taken or not; newest last."""
    if deps.history is None:
        return []
    repo = EpisodeRepo(deps.history)
    start, end = now - timedelta(days=RESULT_DAYS), now + timedelta(seconds=1)
    try:
        found = await repo.between(deps.card.id, start, end, type_="plan") + [
            e
            for e in await repo.between(
                deps.card.id, start, end, type_="conversation", id_prefix=GIFT_PREFIX
            )
            if (d := e.conversation()) is not None and d.gift is not None
        ]
    except Exception as exc:  # the history store is down: answer without
        log.warning("outcomes for %s unavailable: %s", person, exc)
        return []
    mine = [e for e in found if _asked_by(e) == person]
    mine.sort(key=lambda e: e.time)
    tz = deps.tz
    return [f"{e.time.astimezone(tz):%m-%d %H:%M} {e.summary}" for e in mine[-6:]]


def _asked_by(e: Episode) -> str | None:
    """The person (an id) who asked for what a plan episode or a gift records; None when no
    person did, or when its record does not fit (warned, `Episode.record`)."""
    d = e.record()
    parties: list[object]
    if isinstance(d, PlanData):
        parties = [d.asked_by, (d.appointment or {}).get("asked_by")]
    elif isinstance(d, ConversationData):
        parties = [d.by]
    else:
        return None
    for who in parties:  # nested records stay JSON objects (`memory.episode_data`)
        if isinstance(who, dict) and who.get("kind") == "person":
            return str(who.get("id"))
    return None
