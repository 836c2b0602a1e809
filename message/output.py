"""The output filter: everything between the model's text and what is sent.

One filter serves chat answers and proactive posts. `OutputFilter.review` reads what the model
wrote: reasoning blocks are dropped; JSON and other structured fragments, tool-call markup, and
answers cut off at the token limit are not messages (the caller asks again once, or says a short
line instead); the rest is sanitised (no CQ codes, no @all, none of our prompt's markup), cut at a
sentence end when too long, and withheld when it quotes her prompt. `OutputFilter.lines` splits
what may be sent into natural chat lines. Sticker markers (``[表情包：开心]``, `message.stickers`) are taken
out before anything reads the text: a known one comes back as a line of its own, an unknown one
never reaches a chat.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import html
import itertools
import json
import logging
import re
import string
import unicodedata
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from yuiju.message.model import clean_text
from yuiju.message.stickers import NO_STICKERS, StickerSet, Taken

log = logging.getLogger(__name__)

Problem = Literal["reasoning", "structured", "truncated", "meta"]
"""Why a model answer is not a message."""

FEEDBACK: dict[Problem, str] = {
    "reasoning": "你刚才只写了思考过程，那不是一条聊天消息。请直接写出要对对方说的话，不要输出思考过程或标签。",
    "structured": "你刚才的回答不是一条聊天消息（像是 JSON、代码或工具调用的格式）。请直接用自然的中文口语回复，"
    "一两句话，不要输出 JSON、代码或任何标记。",
    "truncated": "你刚才的回答太长，被截断了，不是一条完整的聊天消息。请用更短的一两句话重新回复。",
    "meta": "你刚才写的是关于模型、格式或指令的话（如「Sure!」「以下是…」「作为AI…」「无法按照格式…」），"
    "不是你会对朋友说的话。请直接用你自己的口吻，用自然的中文口语回一两句。",
}
"""What the model reads when its answer was not a message (Chinese: the model reads it)."""

REFUSAL = "这个不能告诉你哦。"
"""Sent instead of an answer that quotes her system prompt."""
LOST_LINE = "诶，我刚刚想说什么来着……一下子忘了。"
"""Sent when the model fails twice to write a message: short, in character, and true."""

_REASONING_TAG = r"(?:think|thinking|reasoning|reflection|analysis)"
_REASONING = re.compile(rf"<({_REASONING_TAG})\b[^>]*>.*?</\1\s*>", re.S | re.I)
_REASONING_OPEN = re.compile(rf"<{_REASONING_TAG}\b[^>]*>", re.I)
"""Opened and never closed: the answer was cut off inside its reasoning."""
_REASONING_CLOSE = re.compile(rf"</{_REASONING_TAG}\s*>", re.I)
"""Closed and never opened (providers that drop the opening tag): everything before it is reasoning."""
_SPECIAL_TOKEN = re.compile(r"<\|[^|<>\n]{1,40}\|>")
_STRUCTURED = re.compile(
    r"```"  # a code block
    r"""|[{\[]\s*["']\w"""  # an object or list opening with a quoted key or string
    r'|"[A-Za-z_][\w-]*"\s*:'  # "key":
    r'|"\s*,\s*"[A-Za-z_]'  # ", "key (a fragment cut out of an object)
    r'|"\s*[}\]]'  # a string closing an object or list
    r"|</?(?:tool_calls?|function_calls?|invoke|parameter)\b|\[TOOL_CALLS\]",  # tool-call markup
    re.IGNORECASE,
)
"""Marks of structured output: what a chat message in Chinese never contains (Chinese words in
ASCII quotes, "摸鱼", "划水", are prose)."""
_PAIRS = ("“”", "（）", "「」", "『』", "《》", "【】")
_CLOSER = {"}": "{", "]": "["}
_ITEM = re.compile(r"[,，\n]")
_OBJECT_KEY = re.compile(r"""^\s*["']?[^\s:：,，{}\[\]"'()（）]{1,24}["']?\s*[:：=]""")
"""``key:`` at the start of an item inside ASCII braces (any short key: ``{动作: 吃饭}`` too)."""
_LIST_KEY = re.compile(r"""^\s*["']?[A-Za-z_][\w-]*["']?\s*:""")
"""``key:`` at the start of an item inside square brackets: an ASCII key (``[笑]`` is an emoji)."""
_SCALAR = re.compile(
    r"""^\s*(?:-?\d+(?:\.\d+)?|"[^"]*"|'[^']*'|true|false|null|None|[A-Za-z_][\w-]*)\s*$"""
)
_FIELD_LINE = re.compile(r"^\s*(?:-\s+)?([A-Za-z_][\w-]*)\s*:(?:\s|$)", re.MULTILINE)
"""A YAML-ish ``key: value`` line with an ASCII key."""
FIELD_NAMES = frozenset(
    [
        "action",
        "reason",
        "message",
        "text",
        "reply",
        "response",
        "answer",
        "content",
        "thought",
        "thinking",
        "name",
        "arguments",
        "args",
        "confidence",
        "type",
        "role",
        "tool",
        "function",
        "result",
        "output",
        "status",
        "data",
        "intent",
        "mood",
        "emotion",
        "plan",
        "plans",
    ]
)
"""Keys a model writes when it answers with a record instead of a message (our own schemas'
fields and the usual ones); a line ``reason: 饿了`` is a field, ``ps: 明天见`` is chat."""
_CODE_NAME = re.compile(r"^[a-z]+_[a-z]|^[a-z]{2,}[A-Z][a-z]")
"""snake_case or camelCase (``share_intent``, ``shouldSend``): a field name, not a word."""

_META = re.compile(
    r"^\W*(?:sure|certainly|of course|absolutely|here\s+(?:is|are|'s)|i\s+(?:would|will|can|cannot"
    r"|can't|am|'m)|as\s+an?\b|let\s+me|okay,|ok,)\b"
    r"|\b(?:as\s+an?\s+(?:ai|language model|assistant)|language model|what i would do"
    r"|system prompt|instructions?|the format|json)\b"
    r"|作为(?:一个|一名)?(?:AI|人工智能|语言模型|大模型|聊天机器人|助手|AI助手|虚拟角色)"
    r"|我(?:只)?是(?:一个|一名)?(?:AI|人工智能|语言模型|大模型|AI助手)"
    r"|(?:要求|指定|规定|规定好|输出)的格式|按(?:照)?(?:要求|格式|指令|设定)|无法按|格式(?:要求|回答|输出)"
    r"|(?:系统)?提示词|系统指令|(?:上面|以上|你)的指令|角色扮演|扮演(?:悠酱|角色|这个角色)"
    r"|^\W*(?:好的|当然|没问题)[，,。!！]\s*(?:以下|下面|这)是"
    r"|以下是(?:我的|您要的|你要的|.{0,6}的)?(?:回答|回复|答案|内容)",
    re.IGNORECASE | re.MULTILINE,
)
"""Talk about the model, its format or its instructions: never hers (``Sure!``, ``Here is what I
would do``, ``作为AI…``, ``抱歉，我无法按照要求的格式…``, ``以下是悠酱的回复：``)."""
_ABOUT_THE_MODEL = re.compile(
    # who answers: a model, a role played, a speaker's label
    r"(?:大型?|大)?语言模型|(?<![a-z])(?:chat\s*gpt|gpt-?\d|openai|claude|llm)(?![a-z])|由.{0,12}训练|(?:AI|人工智能)生成"
    r"|以.{0,8}的(?:身份|口吻|语气|角色|视角)|用.{0,8}的(?:口吻|语气|身份)|人设|角色设定"
    r"|^\W*(?:assistant|user|system|ai|bot|human)\s*[:：]"
    r"|^\W*(?:思考|分析|回答|回复|答|输出|推理|解释)\s*[:：]"
    r"|^\W*\S{1,8}的(?:回复|回答|答复)\s*[】\]]?\s*[:：]|【[^】]{0,10}(?:回复|回答|答复)】"
    r"|[（(]\s*(?:注|备注|说明)\s*[:：]|以上(?:内容|回答|回复)"
    # what it answers from: its prompt, tools, context, the person as a 'user'
    r"|根据(?:系统|工具|提示|设定|规则|指令|上下文|资料|以上|上面|返回|我的记录|记录)"
    r"|系统提示|工具(?:返回|调用|的结果)|上下文|用户(?:在|想|的问题|问|说)"
    # promises about the rules
    r"|遵守(?:规则|要求|设定|指令|规定)|不(?:会|能|可以)?编造|(?:我)?明白了?[，,。]\s*我会",
    re.IGNORECASE | re.MULTILINE,
)
"""More of the model talking about itself (a held-out rerun's faulty model, 2026-12-07): who is
answering (``我是一个大语言模型``, ``以悠酱的身份回答``, ``assistant:``, ``【悠酱的回复】：``,
``思考：…``), what it answers from (``根据系统提示``, ``根据工具返回的结果``, ``用户在问``) and its
promises about rules (``我会遵守规则，不编造经历``) — none of it words a schoolgirl says in chat
(``根据天气预报`` and ``遵守约定`` are hers)."""
_ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}")
_CJK_CHAR = re.compile(r"[\u4e00-\u9fff]")


def meta_talk(text: str) -> bool:
    """Whether ``text`` talks about the model, its format or instructions, or is English prose
    (she chats in Chinese; a word or two of English is chat)."""
    if _META.search(text) or _ABOUT_THE_MODEL.search(text):
        return True
    english = len(_ENGLISH_WORD.findall(text))
    return english >= 4 and len(_CJK_CHAR.findall(text)) < english * 2


_CQ = re.compile(r"\[CQ:[^\]]*\]?", re.IGNORECASE)
_AT_ALL = re.compile(r"@\s*(全体成员|全体|all|everyone|here)(?![A-Za-z0-9_])", re.IGNORECASE)
_TAGS = re.compile(
    r"</?(msg|system|tool|admin|context|memory|answer|reply|response|final|output)\b[^>]*>",
    re.IGNORECASE,
)
"""Markup of our prompt, and the wrappers some models put around an answer."""
_FORGED = re.compile(r"<msg\b[^>]*>.*?</msg\s*>", re.IGNORECASE | re.DOTALL)
"""A whole message in the context's markup: the model writing someone else's line."""
_MARKDOWN = re.compile(r"\*\*|__|`|^#{1,6}\s+", re.MULTILINE)
"""Emphasis, code and heading marks: QQ shows them as they are."""
_SENTENCE = re.compile(r"(?<=[。！？!?…~～])")
_SENTENCE_END = re.compile(r"[。！？!?…~～]+")
_BLANKS = re.compile(r"\n\s*\n+")


@dataclass(frozen=True)
class Filtered:
    """A model answer after the filter."""

    text: str
    """What may be sent: the cleaned answer, `REFUSAL` for a leak, or "" (nothing)."""
    problem: Problem | None = None
    """Set when the answer is not a message: ask again (`FEEDBACK`) or say `LOST_LINE`."""
    leaked: bool = False
    """The answer quoted her prompt and was replaced by `REFUSAL`."""


class OutputFilter:
    """The one filter for her chat answers and proactive posts."""

    def __init__(
        self,
        *,
        name: str,
        max_chars: int,
        max_lines: int = 3,
        secret: Callable[[], str] | str = "",
        stickers: StickerSet = NO_STICKERS,
    ) -> None:
        self.name = name
        """Her name: a "名字：" prefix the model adds is removed."""
        self.max_chars = max_chars
        self.max_lines = max_lines
        self.secret = secret
        """What she must never quote (her system prompt); a callable is read at each review."""
        self.stickers = stickers
        """The stickers a marker may name; any other marker is dropped."""

    def _take(self, text: str) -> Taken:
        taken = self.stickers.take(text)
        if taken.unknown:
            log.info(
                "sticker marker(s) for %s left out: not among her stickers (%s)",
                "、".join(repr(n) for n in taken.unknown),
                "、".join(self.stickers.names) or "she has none",
            )
        if taken.extra:
            log.info("one sticker per message: %s left out", "、".join(taken.extra))
        return taken

    def review(self, text: str, *, finish_reason: str | None = None) -> Filtered:
        """What of the model's ``text`` may be sent, or why none of it is a message."""
        text = _SPECIAL_TOKEN.sub(
            "", clean_text(text, drop=True)
        )  # a broken emoji is left out, not shown as �
        if not text.strip():
            return Filtered("")
        prose = _REASONING.sub("", text)
        if _REASONING_OPEN.search(prose):
            return Filtered("", "reasoning")
        prose = _REASONING_CLOSE.split(prose)[-1]
        reasoned = prose != text
        taken = self._take(prose)
        prose = taken.text
        if finish_reason == "length" or _unbalanced(prose):
            return Filtered("", "truncated")
        if _STRUCTURED.search(prose) or unquoted_structure(prose):
            return Filtered("", "structured")
        clean = sanitize(prose, max_chars=self.max_chars, name=self.name)
        if not clean and taken.sticker is None:
            return Filtered("", "reasoning" if reasoned else None)
        secret = self.secret() if callable(self.secret) else self.secret
        if secret and clean and leaks(clean, secret):
            return Filtered(REFUSAL, leaked=True)
        if meta_talk(clean):
            return Filtered("", "meta")
        return Filtered(taken.joined(clean))

    def lines(self, text: str) -> list[str]:
        """``text`` (already reviewed, or ours) as chat messages; a sticker is a line of its own
        (its marker), before the words or after them, within ``max_lines``."""
        taken = self._take(clean_text(text, drop=True))
        sticker = taken.sticker
        budget = (
            self.max_lines - 1 if sticker is not None and self.max_lines > 1 else self.max_lines
        )
        lines = split_lines(
            sanitize(taken.text, max_chars=self.max_chars, name=self.name), max_lines=budget
        )
        if sticker is None or len(lines) >= self.max_lines:
            return lines
        return [sticker.marker, *lines] if taken.first else [*lines, sticker.marker]

    def words(self, text: str) -> str:
        """``text`` without its sticker markers: what claims and quotes are checked on."""
        return self.stickers.take(text).text


def _unbalanced(text: str) -> bool:
    """An opened Chinese quote or bracket never closed: the answer stops mid-thought."""
    return any(text.count(pair[0]) > text.count(pair[1]) for pair in _PAIRS)


def unquoted_structure(text: str) -> bool:
    """Whether ``text`` is (or carries) a record rather than a message, by its shape rather than
    by JSON's quotes: ASCII brackets around ``key: value`` items (``{action: eat}``, one opened
    and cut off too) or around a list of plain values (``[1, 2, 3]``), a whole answer that is
    one JSON value or an empty pair of brackets, or YAML-ish ``key: value`` lines (two of them,
    or one whose key is a field name). Chat keeps its colons and brackets: ``时间：下午三点``,
    ``「」``, ``（笑）``, emoticons such as ``(＾▽＾)`` or ``[]~(￣▽￣)~*``, ``[doge]``."""
    text = _CQ.sub("", text).strip()  # CQ codes are removed later, not structure of the answer
    if not text:
        return False
    if text in ("{}", "[]", "null", "true", "false", "None"):
        return True
    if text[0] in "{[" and text[-1] in "}]":
        try:
            json.loads(text)
        except ValueError:
            pass
        else:
            return True
    for opener, inner in _bracket_groups(text):
        items = _ITEM.split(inner)
        if opener == "{" and any(_OBJECT_KEY.match(item) for item in items):
            return True
        if opener == "[" and (
            any(_LIST_KEY.match(item) for item in items)
            or (len(items) >= 2 and all(_SCALAR.match(item) for item in items))
        ):
            return True
    keys = _FIELD_LINE.findall(text)
    return len(keys) >= 2 or any(k in FIELD_NAMES or _CODE_NAME.match(k) for k in keys)


def _bracket_groups(text: str) -> list[tuple[str, str]]:
    """Every ASCII ``{…}`` and ``[…]`` in ``text`` as (opener, what is inside); one opened and
    never closed runs to the end (an answer cut off inside it)."""
    open_: list[tuple[str, int]] = []
    groups: list[tuple[str, str]] = []
    for i, char in enumerate(text):
        if char in "{[":
            open_.append((char, i))
        elif char in _CLOSER and open_ and open_[-1][0] == _CLOSER[char]:
            opener, start = open_.pop()
            groups.append((opener, text[start + 1 : i]))
    groups += [(opener, text[start + 1 :]) for opener, start in open_]
    return groups


def sanitize(text: str, *, max_chars: int, name: str = "") -> str:
    """No CQ codes, no @all, no markup of our prompt, no "名字：" prefix; at most ``max_chars``,
    cut at a sentence end when there is one."""
    previous = None
    while previous != text:  # until nothing changes: removing one code must not assemble another
        previous = text
        text = _FORGED.sub("", text)
        text = _CQ.sub("", text)
        text = _AT_ALL.sub("", text)
        text = _TAGS.sub("", text)
    text = _MARKDOWN.sub("", text.replace("\r", ""))
    if name:  # "悠酱：" or, imitating how her lines read in the context, "悠酱（10:05）："
        text = re.sub(
            rf"^\s*{re.escape(name)}\s*(?:[（(][^）)\n]{{0,20}}[）)])?\s*[:：]\s*", "", text
        )
    text = _BLANKS.sub("\n", text).strip()
    if len(text) > max_chars:
        head = text[:max_chars]
        ends = [m.end() for m in _SENTENCE_END.finditer(head)]
        if ends and ends[-1] >= max_chars // 3:  # a whole sentence reads better than a cut one
            text = head[: ends[-1]].rstrip()
        else:
            text = text[: max_chars - 1].rstrip() + "…"
    return text


def split_lines(text: str, *, max_lines: int, short: int = 24) -> list[str]:
    """Her reply as chat messages: by line breaks, long lines at sentence ends; short replies
    stay whole, fragments under 4 characters join their neighbour, at most ``max_lines``. Parts
    of different lines that end up in one message keep their line break between them."""
    text = text.strip()
    if not text:
        return []
    if len(text) <= short and "\n" not in text:
        return [text]
    parts: list[tuple[int, str]] = []  # (the line it came from, the part)
    for number, line in enumerate(text.split("\n")):
        line = line.strip()
        if not line:
            continue
        if len(line) > 40:
            parts += [(number, p.strip()) for p in _SENTENCE.split(line) if p.strip()]
        else:
            parts.append((number, line))
    merged: list[list[tuple[int, str]]] = []
    for part in parts:
        if merged and (len(part[1]) < 4 or len(_joined(merged[-1])) < 4):
            merged[-1].append(part)
        else:
            merged.append([part])
    if len(merged) > max_lines:
        merged = [*merged[: max_lines - 1], [p for m in merged[max_lines - 1 :] for p in m]]
    return [_joined(m) for m in merged]


def _joined(parts: list[tuple[int, str]]) -> str:
    """Parts as one message: sentences of one line run on, lines keep their break."""
    out = parts[0][1]
    for (before, _), (line, part) in itertools.pairwise(parts):
        out += part if line == before else "\n" + part
    return out


def leaks(text: str, secret: str, *, window: int = 20) -> bool:
    """Whether ``text`` quotes ``secret`` (her hidden prompt): ``window`` consecutive characters
    of it (whitespace ignored), or, whatever their length and however disguised, a line of it
    marked secret, a part of its code, or a token-like string in it (`Secrets`)."""
    if secrets_of(secret).quoted_in(text):
        return True
    squeezed = re.sub(r"\s+", "", text)
    if len(squeezed) < window:
        return False
    haystack = re.sub(r"\s+", "", secret)
    return any(
        squeezed[i : i + window] in haystack for i in range(0, len(squeezed) - window + 1, 4)
    )


SECRET_MARK = re.compile(
    r"秘密|机密|保密|绝密|口令|暗号|暗语|密语|密码|密钥|通行码|验证码"
    r"|pass\s*(?:code|word|phrase)|secret|api[\s_-]?key|token",
    re.IGNORECASE,
)
"""A line of the prompt saying one of these is secret (``暗号：…``, a card's ``secrets``)."""
SECRET_RUN = 5
"""Characters of a secret line's value that, said in a row, quote it (its whole value when
shorter): long enough that a line sharing a word with it is not a quote. A secret line
``暗号：星见丘的月光`` withholds ``星见丘的月光`` and ``见丘的月光``, never 星见丘 (a place of her
town) or 月光 in her chat; its code part is held to `CODE_RUN` instead."""
CODE_RUN = 3
"""Characters in a row of a secret's code part (its run of ASCII letters, digits and symbols:
``k9#Qz`` in ``口令是 k9#Qz``) that disclose part of it when they hold a digit or a symbol:
``k9#``, ``#Qz``. A run of letters alone (an English word) is not a disclosure."""
LONG_CODE = 8
"""A code part longer than this is a key rather than a pass code: held to `SECRET_RUN`
characters in a row like a line's words, since runs of three of it would withhold everyday
numbers (``202`` of ``sk-2026abcd…``)."""
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.、)）])\s*")
_LABEL = re.compile(r"^([^：:]{0,12})[：:]")
_MARKED_VALUE = re.compile(
    rf"(?:{SECRET_MARK.pattern})\s*(?:是|为|叫做?|就是|:|：|=|\s)+\s*(?P<value>\S.*)$",
    re.IGNORECASE,
)
"""A marked line without a colon label (``密码是 k9#Qz``): its value follows the mark."""
_ENCODED = re.compile(r"(?:[0-9A-Fa-f]{2}[\s:-]?){3,}|[A-Za-z0-9+/]{4,}={0,2}")
"""Runs that may be a secret in hex (``6b 39 23``) or base64 (``azkjUXo=``)."""
_BASE32 = re.compile(r"(?<![A-Za-z0-9])[A-Z2-7]{8,}={0,6}(?![A-Za-z0-9])")
"""Runs that may be a secret in base32 (``NM4SGUL2``)."""
_TOKEN_RUN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_+/=.-]*[A-Za-z0-9=])?")

# -- one spelling for every form of a character ---------------------------------------------------

_LOOKALIKES = {
    **dict(zip("АВЕКМНОРСТУХЅІЈԚԜҺӀ", "abekmhopctyxsijqwhl", strict=True)),  # Cyrillic
    **dict(zip("авекмнорстухѕіјԁԛԝһӏь", "abekmhopctyxsijdqwhlb", strict=True)),
    **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "abezhikmnoptyx", strict=True)),  # Greek
    **dict(zip("αβγεζηικνορτυχωϲϳ", "abyezniknoptuxwcj", strict=True)),
    **dict(zip("ıȷɡɑ", "ijga", strict=True)),  # Latin letters NFKD leaves alone
}
"""Letters of other scripts that read as Latin ones (``к9#Qz`` with a Cyrillic к)."""
_CHINESE_DIGITS = dict(
    zip("〇零一二三四五六七八九幺壹贰叁肆伍陆柒捌玖", "001234567891123456789", strict=True)
)
"""Chinese digits as digits (``k九#Qz``; 幺 is 1 read aloud in codes and phone numbers)."""
_FOLD = str.maketrans(_LOOKALIKES | _CHINESE_DIGITS)


def _folded(text: str) -> str:
    """``text`` in one spelling: compatibility forms (full-width ``ｋ９＃``, circled digits, math
    letters) and accents decomposed, look-alike letters and Chinese digits as Latin letters and
    digits, casefolded."""
    return unicodedata.normalize("NFKD", text).translate(_FOLD).casefold()


_NOT_PLAIN = re.compile(r"[\W_]+")


def _plain(text: str) -> str:
    """Letters and digits only, folded (`_folded`): case, width, look-alikes, spacing, dashes and
    punctuation do not hide a quote."""
    return _NOT_PLAIN.sub("", _folded(text))


CODE_SYMBOLS = "!#$%&*+=?@^~"
"""Symbols that are part of a code (``k9#Qz``, ``Zx7!p``) when a secret holds them; dashes, dots,
colons and slashes only separate, and are ignored like spaces."""
_NAMES = {
    "#": "井号 井字号 #号 hash hashtag pound sharp octothorpe",
    "!": "感叹号 惊叹号 叹号 exclamation bang",
    "@": "艾特 圈a 小老鼠 at",
    "$": "美元符号 美元号 美金符号 dollar",
    "%": "百分号 percent",
    "&": "和号 与号 ampersand",
    "*": "星号 米字号 asterisk star",
    "+": "加号 plus",
    "=": "等号 等于号 equals equal",
    "?": "问号 question",
    "~": "波浪号 波浪线 tilde",
    "^": "脱字符 尖号 caret",
    "x": "xray",
    "9": "niner",
}
_NATO = (
    "alfa alpha bravo charlie delta echo foxtrot golf hotel india juliet juliett kilo lima mike "
    "november oscar papa quebec romeo sierra tango uniform victor whiskey whisky yankee zulu"
)
_NUMBERS = "zero one two three four five six seven eight nine"
_SPELLED = {
    **{name: char for char, names in _NAMES.items() for name in names.split()},
    **{word: word[0] for word in _NATO.split()},
    **{word: str(digit) for digit, word in enumerate(_NUMBERS.split())},
}
"""Names of symbols, letters and digits as what they name: a secret spelled out is the secret
(``exclamation mark``, ``x-ray``: the second word is one of `_LEADING`)."""
_LEADS = (
    "小写 大写 字母 数字 符号 字符 的 是 接着 然后 再 最后 之后 后面 跟着 接下来 开头 结尾 还有 以及 "
    "加上 capital uppercase lowercase upper lower case small big letter digit number character "
    "sign mark point symbol ray then and followed by next comes is the as in"
)
_LEADING = frozenset(_LEADS.split())
"""Words that only lead to the next character of a spelling (``第一位小写k``, ``then capital Q``):
left out, so the characters they lead to are read in a row."""
_SPELLING = re.compile(
    r"an?\s+(?=[a-z]{2})"  # an article
    r"|[a-z]+"  # an English word
    r"|第\d+[个位]?|1[个位]"  # 第一位, 一个: counting, not a digit
    + "".join(
        "|" + re.escape(w)
        for w in sorted((w for w in [*_SPELLED, *_LEADING] if not w.isascii()), key=len)[::-1]
    )
)


def _spelled_word(match: re.Match[str]) -> str:
    word = match.group(0)
    if word in _SPELLED:
        return _SPELLED[word]
    return word if word.isalpha() and word.isascii() and word not in _LEADING else ""


def _spelled_out(folded: str) -> str:
    """``folded`` (`_folded`) with names of characters as the characters and the words between
    them left out: ``第一位小写k、数字九、井号`` reads ``k、9、#``, ``kilo nine hash`` ``k 9 #``."""
    return _SPELLING.sub(_spelled_word, folded)


_SENTENCE_MARKS = str.maketrans({"!": "\ue021", "?": "\ue03f", "~": "\ue07e"})
"""Punctuation that ends a sentence, set aside while a text is spelled out (`Secrets._chained`
reads it as a gap: it is part of a spelling only when named, 感叹号, exclamation)."""
_SENTENCE_MARKS_BACK = str.maketrans({v: k for k, v in _SENTENCE_MARKS.items()})


def _unmarked(run: str) -> bool:
    """Whether ``run`` holds none of the marks that end a sentence (``!``, ``?``, ``~``)."""
    return not any(chr(c) in run for c in _SENTENCE_MARKS)


CHAIN_GAP = 6
"""Characters (after the words of a spelling are left out) that may lie between two characters
of a secret spelled one at a time (``开头是k，后面跟着9``)."""
CHAIN_PIECE = 3
"""The longest piece of letters, digits and symbols chained that way: longer ones are words."""


def _shifted(text: str) -> list[str]:
    """``text`` with its letters shifted 1–25 places (ROT13 and every other Caesar shift)."""
    return [text.translate(table) for table in _SHIFTS]


_SHIFTS = [
    str.maketrans(string.ascii_lowercase, string.ascii_lowercase[k:] + string.ascii_lowercase[:k])
    for k in range(1, 26)
]


def _token(run: str) -> str | None:
    """``run`` in plain form when it looks like a code or a key (``CANARY-7f3a9c``, ``sk-…``):
    letters and digits mixed back and forth, or long; ``base64`` and ``utf8`` are words."""
    plain = _plain(run)
    if len(plain) < 6 or plain.isalpha() or plain.isdigit():
        return None
    switches = sum(a.isdigit() != b.isdigit() for a, b in itertools.pairwise(plain))
    return plain if switches >= 2 or len(plain) >= 12 else None


def _code_parts(value: str, symbols: str) -> list[str]:
    """The runs of ASCII letters, digits and ``symbols`` of a folded ``value`` that hold a digit
    or a symbol (``k9#qz`` of ``口令是k9#qz``), separators left out."""
    kept = re.sub(rf"[^\w{re.escape(symbols)}]+|_+", "", value)
    runs = re.findall(rf"[a-z0-9{re.escape(symbols)}]+", kept)
    return [r for r in runs if not r.isalpha()]


@dataclass(frozen=True)
class Secrets:
    """What of a hidden prompt is never said, however short and in whatever form: the value of
    every line marked secret (after its ``暗号：`` label, or the whole line), any run of
    `CODE_RUN` characters of its code part, and every token-like string."""

    values: tuple[str, ...] = ()
    """Plain form (`_plain`) of each marked line's value."""
    tokens: tuple[str, ...] = ()
    """Plain form of each token-like string."""
    codes: tuple[str, ...] = ()
    """Folded code parts of the values (`_code_parts`), their symbols kept: ``k9#qz``."""
    symbols: str = ""
    """The `CODE_SYMBOLS` the values hold: kept in every form a text is read in."""

    @classmethod
    def of(cls, prompt: str) -> Secrets:
        values: list[str] = []
        for line in prompt.splitlines():
            line = _BULLET.sub("", line.strip())
            if line.startswith("#") or not SECRET_MARK.search(line):  # a heading names, not holds
                continue
            label = _LABEL.match(line)
            value = line[label.end() :] if label and SECRET_MARK.search(label.group(1)) else line
            found = [value]
            if (marked := _MARKED_VALUE.search(value)) is not None:
                found.append(marked["value"])
            values += found
        plains = [plain for v in values if len(plain := _plain(v)) >= 2]
        folded = [_folded(v) for v in values]
        symbols = "".join(c for c in CODE_SYMBOLS if any(c in f for f in folded))
        codes = [part for f in folded for part in _code_parts(f, symbols)]
        tokens = {t for m in _TOKEN_RUN.finditer(prompt) if (t := _token(m.group(0)))}
        return cls(
            tuple(dict.fromkeys(plains)),
            tuple(sorted(tokens)),
            tuple(dict.fromkeys(codes)),
            symbols,
        )

    @functools.cached_property
    def _plain_needles(self) -> tuple[str, ...]:
        """What, found in a text's plain form, says a secret: `SECRET_RUN` characters of a value
        in a row (the whole value when shorter), a token, either reversed, a token shifted."""
        runs = [
            value[i : i + run]
            for value in self.values
            for run in [min(len(value), SECRET_RUN)]
            for i in range(len(value) - run + 1)
        ]
        found = [*runs, *self.tokens]
        return tuple(
            dict.fromkeys(
                [*found, *(n[::-1] for n in found), *(s for t in self.tokens for s in _shifted(t))]
            )
        )

    @functools.cached_property
    def _code_needles(self) -> tuple[str, ...]:
        """What, found in a text's form with its symbols, discloses a code part: a run of
        `CODE_RUN` of a short one that holds a digit or a symbol, also backwards unless it holds
        a sentence mark (``p!7`` of ``Zx7!p`` would withhold ``Help!7点…``), and the whole part
        reversed or under a Caesar shift."""
        needles: list[str] = []
        for code in self.codes:
            if len(code) <= LONG_CODE:
                runs = [code[i : i + CODE_RUN] for i in range(len(code) - CODE_RUN + 1)]
                needles += [run for run in runs if not run.isalpha()]
                needles += [run[::-1] for run in runs if not run.isalpha() and _unmarked(run)]
            if len(code) >= CODE_RUN:
                needles.append(code[::-1])
            if len(code) > CODE_RUN and sum(c.isalpha() for c in code) >= 2:
                needles += _shifted(code)
        return tuple(dict.fromkeys(needles))

    @functools.cached_property
    def _keep(self) -> re.Pattern[str]:
        """What a form with symbols leaves out: all but letters, digits and the secrets' symbols."""
        return re.compile(rf"[^\w{re.escape(self.symbols)}]+|_+")

    @functools.cached_property
    def _unsymbol(self) -> dict[int, int | None]:
        return str.maketrans("", "", self.symbols)

    @functools.cached_property
    def _piece(self) -> re.Pattern[str]:
        return re.compile(rf"[a-z0-9{re.escape(self.symbols)}]+")

    def quoted_in(self, text: str) -> bool:
        """Whether ``text`` says a secret in any form: case, width, spacing and separators aside;
        with look-alike letters, Chinese digits or spelled out (``井号``, ``kilo``); reversed or
        Caesar-shifted; in base64, base32, hex, character codes, HTML entities or URL-encoded;
        or in part, `CODE_RUN` characters of its code."""
        if not (self.values or self.tokens):
            return False
        return any(self._said(t) for t in (text, *_decoded(text)))

    def _said(self, text: str) -> bool:
        folded = _folded(text)
        spelled = _spelled_out(folded.translate(_SENTENCE_MARKS))
        forms = (
            self._keep.sub("", folded),  # as written
            self._keep.sub("", spelled.translate(_SENTENCE_MARKS_BACK)),  # spelled out, in a row
            self._chained(spelled),  # spelled out one character at a time
        )
        codes, plains = self._code_needles, self._plain_needles
        for form in forms:
            if any(n in form for n in codes):
                return True
            plain = form.translate(self._unsymbol) if self.symbols else form
            if any(n in plain for n in plains):
                return True
        return False

    def _chained(self, spelled: str) -> str:
        """The short pieces of letters, digits and symbols of ``spelled`` in a row, when at most
        `CHAIN_GAP` characters lie between them (``k，9，#，q，z`` → ``k9#qz``); longer pieces
        (words, numbers) stand alone."""
        out: list[str] = []
        end: int | None = None
        for m in self._piece.finditer(spelled):
            piece = m.group(0)
            if len(piece) > CHAIN_PIECE:
                out += ["\0", piece, "\0"]
                end = None
                continue
            if end is not None and m.start() - end > CHAIN_GAP:
                out.append("\0")
            out.append(piece)
            end = m.end()
        return "".join(out)


_CHAR_CODES = re.compile(
    r"(?:(?:0x|\\x|\\u\{?|u\+|\\)[0-9a-f]{1,8}\}?[\s,，、;；]*){3,}"  # 0x6b \x6b \u006b U+006B \153
    r"|(?<![0-9a-z.])[0-9]{1,8}(?:[\s,，、;；/]+[0-9]{1,8}){2,}(?![0-9a-z])",  # 107 57 35
    re.IGNORECASE,
)
"""Runs of three or more character codes: hex or octal with their prefixes, or bare numbers."""
_CHAR_CODE = re.compile(r"(0x|\\x|\\u\{?|u\+|\\)?([0-9a-f]+)", re.IGNORECASE)
_HEX_PREFIXES = frozenset(["0x", "\\x", "\\u", "\\u{", "u+"])


def _characters(run: str) -> list[str]:
    """What a run of character codes reads as: hex when prefixed so, octal after backslashes,
    and bare numbers as decimal, octal and binary alike."""
    codes = _CHAR_CODE.findall(run)
    prefixes = {prefix.lower() for prefix, _ in codes}
    bases = (16,) if prefixes & _HEX_PREFIXES else (8,) if prefixes == {"\\"} else (10, 8, 2)
    out: list[str] = []
    for base in bases:
        with contextlib.suppress(ValueError, OverflowError):
            out.append("".join(chr(int(digits, base)) for _, digits in codes))
    return out


def _decoded(text: str) -> list[str]:
    """What ``text`` may say under an encoding: HTML entities and URL-encoding undone, and its
    hex, base64 and base32 runs (as UTF-8, unreadable bytes left out) and character codes
    decoded."""
    out: list[str] = []
    if "&" in text or "%" in text:
        unescaped = urllib.parse.unquote(html.unescape(text))
        if unescaped != text:
            out.append(unescaped)
            text = unescaped
    for m in _ENCODED.finditer(text):
        run = m.group(0)
        hexed = re.sub(r"[\s:-]", "", run)
        if len(hexed) % 2 == 0 and re.fullmatch(r"[0-9A-Fa-f]+", hexed):
            out.append(bytes.fromhex(hexed).decode("utf-8", "ignore"))
        if re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", run):
            padded = run + "=" * (-len(run) % 4)
            with contextlib.suppress(ValueError):
                out.append(base64.b64decode(padded, validate=True).decode("utf-8", "ignore"))
    for m in _BASE32.finditer(text):
        run = m.group(0).rstrip("=")
        with contextlib.suppress(ValueError):
            out.append(base64.b32decode(run + "=" * (-len(run) % 8)).decode("utf-8", "ignore"))
    for m in _CHAR_CODES.finditer(text):
        out += _characters(m.group(0))
    return out


@functools.lru_cache(maxsize=16)
def secrets_of(prompt: str) -> Secrets:
    """`Secrets.of`, once per prompt text (the prompt changes only with mode and tools)."""
    return Secrets.of(prompt)
