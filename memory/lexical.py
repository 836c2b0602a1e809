"""The lexical side of hybrid recall: text -> a sparse BM25 term vector, for Chinese and English.

Qdrant scores a sparse query against sparse documents by the dot product; with the collection's
``IDF`` modifier it multiplies each term by its inverse document frequency, computed by Qdrant
over the stored points. So a document vector holds each term's BM25 term-frequency part,
``tf * (k + 1) / (tf + k * (1 - b + b * len / avg_len))``, and a query vector holds 1.0 per
distinct term: the dot product with IDF applied is BM25.

The tokenizer is Qdrant's own (the ``Bm25`` model of qdrant-edge-py, Rust, the same recipe the
Qdrant server uses for its BM25 inference): its ``multilingual`` tokenizer segments Chinese into
words with a jieba-style dictionary (``南风公园`` -> ``南风 / 公园``) and splits other scripts on
word boundaries; English words are lowercased, Snowball-stemmed (``adoption`` and ``adopted``
meet at ``adopt``), and English and Chinese stop words are dropped. Terms are hashed into 31-bit
indices by the model. bench/README.md compares it with jieba + a Snowball stemmer: Qdrant's scored
better alone (recall@5 0.635 against 0.596), loads no dictionary at start (jieba: 1.1 s) and is
one dependency we already have; about 0.3 ms per text, nothing next to the embedding.

``avg_len`` is set for chat turns (about a dozen terms), not the web pages of the usual 256.

A chat turn is indexed with the words of the turn it answers, at a lower weight
(``context_weight``, 0.3): a reply such as "Yes! It was so powerful." carries "support group"
from "Did you go to the support group?", so a question about the group finds the reply, while a
turn that says the words itself still scores higher (bench/README.md).

Names are not search words. A question about a person names them ("What did Hannah paint?",
"小林上周去哪了？"), and in a chat the other speaker's lines name them too ("Hey Hannah, ..."), so the
name's term fills the word-matched candidates with lines the other person said *to* them
(`KnownNames`). The names known are the speakers' own (``speaker`` in the payload) and those
people are greeted by (`addressed_names`: "Hey Han!", "That's awesome, Han!"); `memory.semantic`
leaves them out of the question's dense vector too, and its speaker bonus still reads them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SparseVector:
    """Term indices and weights, as Qdrant stores them."""

    indices: list[int]
    values: list[float]

    def __bool__(self) -> bool:
        return bool(self.indices)


class LexicalEncoder:
    """BM25 term vectors for documents and queries (see the module docstring)."""

    name = "bm25-multilingual-v1"
    """Stored with the collection: a store indexed with another recipe is re-indexed, not mixed."""

    def __init__(self, *, k: float = 1.2, b: float = 0.75, avg_len: float = 12.0) -> None:
        import qdrant_edge as q

        self._model: Any = q.Bm25(
            q.Bm25Config(
                k=k,
                b=b,
                avg_len=avg_len,
                tokenizer=q.TokenizerType.Multilingual,
                language="english",
                stopwords=q.StopwordsSet(languages={q.Language.English, q.Language.Chinese}),
            )
        )

    def document(
        self, text: str, context: str = "", *, context_weight: float = 0.3
    ) -> SparseVector:
        """The text's term vector, plus ``context_weight`` times the terms of ``context``."""
        v = self._model.embed_document(text)
        if not context:
            return SparseVector(list(v.indices), list(v.values))
        weights = dict(zip(v.indices, v.values, strict=True))
        c = self._model.embed_document(context)
        for index, value in zip(c.indices, c.values, strict=True):
            weights[index] = weights.get(index, 0.0) + context_weight * value
        return SparseVector(list(weights), list(weights.values()))

    def documents(self, texts: Sequence[str]) -> list[SparseVector]:
        return [self.document(t) for t in texts]

    def query(self, text: str) -> SparseVector:
        v = self._model.embed_query(text)
        return SparseVector(list(v.indices), list(v.values))


_GREETING = (
    r"(?:hey|hi|hello|hiya|heya|yo|dear|morning|evening|night|bye|thanks|thank you|congrats|"
    r"congratulations|welcome back|happy birthday|good (?:morning|afternoon|evening|night|luck))"
)
_NAME = r"([A-Z][a-z]+)"
_GREETED = re.compile(rf"(?:^|[.!?]\s+)(?i:{_GREETING}),?\s+{_NAME}\b(?!\s+[a-z])")
"""A greeting and a name, opening a sentence: "Hey Hannah, ...", "Good night Han!"."""
_CALLED = re.compile(rf"(\S+),\s+{_NAME}\s*(?:[!.?]|$)")
"""A name after a comma ending a sentence: "That's awesome, Han!", "So proud of you, Hannah."."""
_NOT_NAMES = frozenset(
    [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
        "Everyone",
        "Everybody",
        "Guys",
        "Folks",
        "Man",
        "Dude",
        "Babe",
        "Honey",
        "Sweetie",
        "Buddy",
        "Friend",
        "Again",
        "Too",
        "Though",
        "Already",
        "Anyway",
        "Lol",
        "Haha",
    ]
)


def addressed_names(text: str) -> list[str]:
    """The names ``text`` addresses someone by, in English greetings and endings (see the module
    docstring); Chinese names are known as speakers' names."""
    found = [m[1] for m in _GREETED.finditer(text)]
    for m in _CALLED.finditer(text):
        before = m[1].strip("\"'()")
        if before[:1].isupper() and before.isalpha():  # "Austin, Texas." is a place
            continue
        found.append(m[2])
    return [n for n in dict.fromkeys(found) if n not in _NOT_NAMES]


_WORD = re.compile(r"[A-Za-z0-9_]+")


@functools.lru_cache(maxsize=1024)
def _whole_word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", re.IGNORECASE)


class KnownNames:
    """People's names, to take out of what a question searches (see the module docstring):
    Latin names as whole words ("Ann" in "What did Ann say?", not in "Anna"), others anywhere
    (小林 in 小林去哪了). Names shorter than two characters are kept as words (too many words
    would go with them). Looking a question up costs about the same for ten names or ten
    thousand (a QQ group's nicknames): by its words and its substrings, not name by name."""

    LONGEST = 24
    """Longer non-Latin names are not looked for (nicknames are short)."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._latin: dict[str, set[str]] = {}
        self._other: set[str] = set()
        self._first: set[str] = set()
        self._lengths: set[int] = set()
        self.add(names)

    def add(self, names: Iterable[str]) -> None:
        for name in names:
            name = name.strip()
            if len(name) < 2:
                continue
            if name.isascii():
                if first := _WORD.match(name):
                    self._latin.setdefault(first[0].lower(), set()).add(name)
            elif len(name) <= self.LONGEST:
                self._other.add(name)
                self._first.add(name[0])
                self._lengths.add(len(name))

    def __len__(self) -> int:
        return sum(len(v) for v in self._latin.values()) + len(self._other)

    def strip(self, text: str) -> str:
        """``text`` without the known names it says."""
        found: list[tuple[str, bool]] = [
            (name, True)
            for word in {w.lower() for w in _WORD.findall(text)}
            for name in self._latin.get(word, ())
        ]
        if self._other:
            found += [
                (text[i : i + n], False)
                for i, c in enumerate(text)
                if c in self._first
                for n in self._lengths
                if text[i : i + n] in self._other
            ]
        if not found:
            return text
        for name, latin in sorted(found, key=lambda f: -len(f[0])):  # 小林同学 before 小林
            text = _whole_word(name).sub(" ", text) if latin else text.replace(name, " ")
        return re.sub(r"\s+", " ", text).strip()
