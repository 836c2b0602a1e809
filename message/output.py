"""What leaves her mouth: sanitising model output and splitting it into natural lines."""

from __future__ import annotations

import re

_CQ = re.compile(r"\[CQ:[^\]]*\]?", re.IGNORECASE)
_AT_ALL = re.compile(r"@\s*(全体成员|全体|all|everyone|here)(?![A-Za-z0-9_])", re.IGNORECASE)
_TAGS = re.compile(r"</?(msg|system|tool|admin|context|memory)[^>]*>", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[。！？!?…~～])")
_BLANKS = re.compile(r"\n\s*\n+")


def sanitize(text: str, *, max_chars: int, name: str = "") -> str:
    """No CQ codes, no @all, no markup of our prompt, no "名字：" prefix; at most ``max_chars``."""
    previous = None
    while previous != text:  # until nothing changes: removing one code must not assemble another
        previous = text
        text = _CQ.sub("", text)
        text = _AT_ALL.sub("", text)
        text = _TAGS.sub("", text)
    text = text.replace("\r", "")
    if name:
        text = re.sub(rf"^\s*{re.escape(name)}\s*[:：]\s*", "", text)
    text = _BLANKS.sub("\n", text).strip()
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return text


def split_lines(text: str, *, max_lines: int, short: int = 24) -> list[str]:
    """Her reply as chat messages: by line breaks, long lines at sentence ends; short replies
    stay whole, fragments under 4 characters join their neighbour, at most ``max_lines``."""
    text = text.strip()
    if not text:
        return []
    if len(text) <= short and "\n" not in text:
        return [text]
    parts: list[str] = []
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        if len(line) > 40:
            parts += [p.strip() for p in _SENTENCE.split(line) if p.strip()]
        else:
            parts.append(line)
    merged: list[str] = []
    for part in parts:
        if merged and (len(part) < 4 or len(merged[-1]) < 4):
            merged[-1] += part
        else:
            merged.append(part)
    if len(merged) > max_lines:
        merged = [*merged[: max_lines - 1], "".join(merged[max_lines - 1:])]
    return merged


def leaks(text: str, secret: str, *, window: int = 20) -> bool:
    """Whether ``text`` quotes ``window`` consecutive characters of ``secret`` (e.g. her system
    prompt's rules), ignoring whitespace."""
    squeezed = re.sub(r"\s+", "", text)
    if len(squeezed) < window:
        return False
    haystack = re.sub(r"\s+", "", secret)
    return any(squeezed[i:i + window] in haystack for i in range(0, len(squeezed) - window + 1, 4))
