"""Her stickers: a folder of named images she may send (the file name is the name: ``开心.png``).

The folder is read once, when the chat side starts (`StickerSet.load`): every usable image becomes a
sticker, and a file that cannot be one (not an image, too big, a name the marker cannot carry) is
left out with one log line saying why and what to do; a missing folder is one line and no stickers.
Nothing here ever raises on a bad folder: she chats without the stickers she cannot send.

The model sees the names in the stable system prompt, sorted, so that prefix stays the same bytes
from turn to turn (providers cache it), and sends one by writing its marker, ``[表情包：开心]`` —
the way stickers read in her chat history, so her own earlier stickers show the model how. The
output filter (`message.output`) takes every marker out of the text: a known one becomes a line of
its own, an unknown one is dropped with a log line; no marker is ever sent as text. A sticker line
goes out as an image (`Sticker.segment`; the platform's sender shows `Sticker.fallback`, ``[开心]``,
where it has no images, as the terminal does) and is recorded in her context and the message log
as its marker. The web chat gets the sticker's name and serves its image by that name
(`web.chat`), never by a path.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from yuiju.message.model import Conversation, Outgoing, OutSegment

log = logging.getLogger(__name__)

SIGNATURES: dict[str, tuple[bytes, ...]] = {
    ".png": (b"\x89PNG\r\n\x1a\n",),
    ".gif": (b"GIF87a", b"GIF89a"),
    ".jpg": (b"\xff\xd8\xff",),
    ".jpeg": (b"\xff\xd8\xff",),
    ".webp": (b"RIFF",),
}
"""The image kinds a sticker may be, by suffix, and how each file begins."""
MEDIA_TYPES = {
    ".png": "image/png",
    ".gif": "image/gif",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
}
"""Each kind's media type, as the web chat serves the image (a system's mimetypes table may not
know WebP)."""
MAX_BYTES = 2 * 1024 * 1024
"""The largest sticker file: platforms refuse or recompress bigger images, and each one is read
and sent whole."""
MAX_STICKERS = 60
"""Stickers offered at most: each name costs prompt tokens on every turn."""
MAX_NAME = 16
_NAME = re.compile(r"^[^\[\]【】\s\x00-\x1f]+(?: [^\[\]【】\s\x00-\x1f]+)*$")
"""A name the marker can carry: no brackets, no line breaks, no leading or trailing spaces."""

MARKER = re.compile(
    r"[\[【]{1,2}\s*(?:表情包|表情|sticker)\s*(?:[:：]\s*([^\[\]【】\n]{0,40}?)\s*)?[\]】]{1,2}",
    re.IGNORECASE,
)
"""A sticker marker as models write it: ``[表情包：开心]``, ``[[sticker:开心]]``, ``【表情包:开心】``;
also a bare ``[表情包]`` (how someone else's sticker reads in her history), which names none."""


def marker(name: str) -> str:
    """The marker of the sticker ``name``: what the model writes and what her context keeps."""
    return f"[表情包：{name}]"


@dataclass(frozen=True)
class Sticker:
    name: str
    path: Path
    media_type: str
    """By the file name's suffix (``path`` is resolved: a link's target may have none)."""

    @property
    def marker(self) -> str:
        return marker(self.name)

    @property
    def fallback(self) -> str:
        """What a platform without images shows instead."""
        return f"[{self.name}]"

    def segment(self) -> OutSegment:
        return OutSegment(
            type="image", text=self.fallback, ref=str(self.path), sticker=True, name=self.name
        )


@dataclass(frozen=True)
class Taken:
    """A text with its sticker markers taken out (`StickerSet.take`)."""

    text: str
    """The text without any marker."""
    sticker: Sticker | None = None
    """The first known sticker it named (one per message: a second is dropped)."""
    first: bool = False
    """The sticker came before any words: it is sent first, otherwise after them."""
    unknown: tuple[str, ...] = ()
    """Names that are no sticker of hers (an empty name for a bare ``[表情包]``)."""
    extra: tuple[str, ...] = ()
    """Known stickers after the first, left out."""

    def joined(self, text: str | None = None) -> str:
        """``text`` (default: the words) with the sticker's marker on its own line where it was."""
        words = self.text if text is None else text
        if self.sticker is None:
            return words
        if not words:
            return self.sticker.marker
        return (
            f"{self.sticker.marker}\n{words}" if self.first else f"{words}\n{self.sticker.marker}"
        )


class StickerSet:
    """Her stickers by name, sorted."""

    def __init__(self, stickers: Iterable[Sticker] = (), *, folder: Path | None = None) -> None:
        self._by_name = {s.name: s for s in sorted(stickers, key=lambda s: s.name)}
        self.folder = folder

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def get(self, name: str) -> Sticker | None:
        return self._by_name.get(name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __bool__(self) -> bool:
        return bool(self._by_name)

    def take(self, text: str) -> Taken:
        """``text`` with every marker taken out (known or not, so none is ever sent as text)."""
        found: list[Sticker] = []
        unknown: list[str] = []
        first = False
        for match in MARKER.finditer(text):
            name = (match.group(1) or "").strip()
            sticker = self._by_name.get(name)
            if sticker is None:
                unknown.append(name)
                continue
            if not found:
                first = not text[: match.start()].strip()
            found.append(sticker)
        if not found and not unknown:
            return Taken(text)
        rest = MARKER.sub("", text)
        rest = re.sub(r"[ \t]+\n", "\n", rest).strip()
        return Taken(
            rest,
            found[0] if found else None,
            first,
            tuple(unknown),
            tuple(s.name for s in found[1:]),
        )

    def line_sticker(self, line: str) -> Sticker | None:
        """The sticker when ``line`` is one sticker's marker (a line `OutputFilter.lines` made)."""
        match = MARKER.fullmatch(line.strip())
        return self._by_name.get((match.group(1) or "").strip()) if match else None

    def outgoing(self, conversation: Conversation, line: str) -> Outgoing:
        """One line as a message: a sticker line as its image, any other as text."""
        sticker = self.line_sticker(line)
        if sticker is None:
            return Outgoing.text(conversation, line)
        return Outgoing(conversation=conversation, segments=(sticker.segment(),))

    @classmethod
    def load(cls, folder: Path, *, configured: bool = True) -> StickerSet:
        """The stickers in ``folder``; each file left out is one log line with the reason and the
        fix. ``configured``: the folder was named in the config, so its absence is a warning (a
        card without a sticker folder is normal)."""
        folder = folder.expanduser()
        if not folder.is_dir():
            if configured:
                what = "is not a folder" if folder.exists() else "does not exist"
                log.warning(
                    "[chat] sticker_folder %s %s: she sends no stickers. Create it with images "
                    "named by what they say (开心.png), or remove sticker_folder to use her "
                    "card's own",
                    folder,
                    what,
                )
            else:
                log.info("no sticker folder at %s: she sends no stickers", folder)
            return cls(folder=folder)
        stickers: dict[str, Sticker] = {}
        for path in sorted(folder.iterdir()):
            if path.name.startswith("."):
                continue  # hidden files (.DS_Store, editors' backups) are no one's stickers
            sticker = _sticker(path)
            if sticker is None:
                continue
            if sticker.name in stickers:
                log.warning(
                    "sticker %s left out: %s already has the name %r; rename one of them",
                    path,
                    stickers[sticker.name].path.name,
                    sticker.name,
                )
                continue
            stickers[sticker.name] = sticker
        if len(stickers) > MAX_STICKERS:
            kept = sorted(stickers)[:MAX_STICKERS]
            log.warning(
                "%s holds %d stickers; she is offered the first %d by name (each name costs "
                "prompt tokens on every turn): move the others out",
                folder,
                len(stickers),
                MAX_STICKERS,
            )
            stickers = {name: stickers[name] for name in kept}
        log.info("%d stickers from %s: %s", len(stickers), folder, "、".join(sorted(stickers)))
        return cls(stickers.values(), folder=folder)


def _sticker(path: Path) -> Sticker | None:
    """``path`` as a sticker, or None after one log line saying why it cannot be one."""
    suffix = path.suffix.lower()
    if not path.is_file():
        log.warning("sticker folder entry %s left out: not a file", path)
        return None
    if suffix not in SIGNATURES:
        log.warning(
            "%s left out: not a sticker (a sticker is a %s file)",
            path,
            "/".join(s.lstrip(".").upper() for s in SIGNATURES if s != ".jpeg"),
        )
        return None
    name = path.name[: -len(suffix)]
    if len(name) > MAX_NAME or not _NAME.match(name):
        log.warning(
            "sticker %s left out: its name %r cannot be offered (at most %d characters, no "
            "brackets or line breaks); rename the file",
            path,
            name,
            MAX_NAME,
        )
        return None
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(16)
    except OSError as exc:
        log.warning("sticker %s left out: cannot be read (%s)", path, exc)
        return None
    if size > MAX_BYTES:
        log.warning(
            "sticker %s left out: %.1f MiB, over the %d MiB a sticker may be; shrink it",
            path,
            size / 1024 / 1024,
            MAX_BYTES // 1024 // 1024,
        )
        return None
    signatures = SIGNATURES[suffix]
    if not head.startswith(signatures) or (suffix == ".webp" and head[8:12] != b"WEBP"):
        log.warning(
            "sticker %s left out: its content is not a %s image (the file begins %r); replace it "
            "with a real image or remove it",
            path,
            suffix.lstrip(".").upper(),
            head[:8],
        )
        return None
    return Sticker(name=name, path=path.resolve(), media_type=MEDIA_TYPES[suffix])


def card_folder(card_id: str) -> Path:
    """Where a character card keeps her own stickers: ``characters/<card>/stickers``."""
    from yuiju.characters import CARDS_DIR, card_of

    return CARDS_DIR / card_of(card_id) / "stickers"


NO_STICKERS = StickerSet()
"""None: no sticker is offered, and every marker the model writes is dropped."""
