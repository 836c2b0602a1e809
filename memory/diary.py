"""The diary: written when she goes to sleep, from the day's episodes, grounded in them.

With an LLM: a draft in which every sentence names the episode ids it draws on; a review
rejects sentences that cite no episode of the day, that the claim check (`DiaryClaimCheck`, the
closed-world check over her world's vocabulary, issue 30) cannot back by her record, or that the
reviewer finds unsupported, and the draft is revised with those reasons, at most
``review_rounds`` times; sentences still rejected after the last round are cut. Without an LLM,
or when it fails, or when nothing survives the review: a plain factual summary of the day.

Weekly summaries are written on Sundays (Monday–Sunday, from the dailies) and monthly ones on
the last day of a month. Entries go to the history store (``diaries``) and, in paragraph chunks,
into semantic memory (kind ``diary``, public scope).
"""

from __future__ import annotations

import calendar
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, Protocol

import jinja2
from pydantic import BaseModel, Field

from yuiju.llm import ChatModel, JsonSchema, RetryWithFeedback, ask_structured
from yuiju.llm.errors import LLMError
from yuiju.memory.episodes import Episode, EpisodeRepo
from yuiju.memory.semantic import NewMemory, SemanticMemory
from yuiju.storage.history import CollectionSpec, HistoryStore

log = logging.getLogger(__name__)

DIARIES = CollectionSpec(
    name="diaries",
    fields=("character_id", "period", "date"),
    indexes=(("character_id", "period", "date"),),
)
Period = Literal["day", "week", "month"]

_SENTENCES = re.compile(r"[^。！？!?\n]+[。！？!?\n]*")
"""A summary's sentences, each with its closing punctuation (joined again, they are the text)."""

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "prompts"),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=False,
)


def diary_date(sleep_at: datetime) -> date | None:
    """The day a bedtime ends: evening (from 18:00) → that day; before 06:00 → the day before;
    daytime sleep is a nap and ends no day (None)."""
    if sleep_at.hour >= 18:
        return sleep_at.date()
    if sleep_at.hour < 6:
        return sleep_at.date() - timedelta(days=1)
    return None


def diary_id(character_id: str, period: Period, day: date) -> str:
    return f"diary_{character_id}_{period}_{day.isoformat()}"


class Sentence(BaseModel):
    text: str = Field(min_length=1)
    episode_ids: list[str] = Field(default_factory=list)
    """The episodes this sentence draws on."""


class Draft(BaseModel):
    paragraphs: list[list[Sentence]] = Field(min_length=1)


class DiaryClaimCheck(Protocol):
    """What her diary may say, checked against her record without a model: the closed-world
    check over her world's vocabulary (doings, places, food, purchases, people) that the chat
    side runs on her answers. It lives above memory (`message.diary_grounding`), which owns
    that vocabulary; the composition roots pass it to the `DiaryWriter`."""

    def unbacked(
        self,
        *,
        character_id: str,
        start: date,
        end: date,
        episodes: Sequence[Episode],
        sentences: Sequence[str],
    ) -> dict[int, str]:
        """The sentences (by index in ``sentences``) that her ``episodes`` of ``start`` to
        ``end`` (the diary's day, or a summary's period) cannot back, each with the reason in
        Chinese for the model (the claim it names and why). Nothing of the period is still
        ahead: it is checked as of its end."""
        ...


class _CheckFailed(Exception):
    """The claim check raised: nothing unchecked goes into her diary (the factual one does)."""


class Unsupported(BaseModel):
    index: int
    reason: str = ""


class Review(BaseModel):
    unsupported: list[Unsupported] = Field(default_factory=list)


class SummaryText(BaseModel):
    text: str = Field(min_length=1)


class Diary(BaseModel):
    """One diary entry as stored."""

    id: str = Field(alias="_id")
    character_id: str
    period: Period
    date: str
    """First day of the period, ISO (the day itself for a daily entry)."""
    end_date: str
    """Last day of the period, ISO."""
    text: str
    episode_ids: list[str] = Field(default_factory=list)
    """Episodes the entry draws on (for a summary: the source diaries' ids)."""
    source: Literal["llm", "factual"]
    rejected: list[dict[str, Any]] = Field(default_factory=list)
    """Sentences the review cut, with the reason (for the observer and for debugging)."""
    rounds: int = 0
    written_at: datetime

    model_config = {"populate_by_name": True}

    def document(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)


@dataclass(frozen=True, kw_only=True)
class DiaryVoice:
    """Who writes: from her character card."""

    name: str
    persona: str
    speaking_style: str = ""

    @classmethod
    def of(cls, character_id: str) -> DiaryVoice:
        """Her voice from her card (her name, never her id, in every prompt); her id only when
        the card cannot be loaded (with a warning)."""
        from yuiju.characters import CardError, load_card

        try:
            card = load_card(character_id)
        except CardError as exc:
            log.warning("voice of %s: card not loaded (%s)", character_id, exc)
            return cls(name=character_id, persona="")
        return cls(name=card.name, persona=card.persona, speaking_style=card.speaking_style)


def _told_in_public(episode: Episode) -> bool:
    """Whether ``episode`` may go into her diary: anything but a private chat (or a chat window
    without a summary)."""
    if episode.type != "conversation":
        return True
    record = episode.conversation()
    if record is None:  # a document that does not fit (warned once): it may be private, keep it out
        return False
    session = record.session_id or ""
    return bool(episode.summary) and not str(session).startswith("private")


def factual_summary(day: date, episodes: Sequence[Episode], tz: Any) -> str:
    """The plain record of a day, no LLM."""
    if not episodes:
        return f"{day.isoformat()}：今天没有记下什么。"
    lines = [f"{day.isoformat()} 的记录："]
    for e in episodes:
        lines.append(f"{e.time.astimezone(tz):%H:%M} {e.summary}")
    return "\n".join(lines)


class DiaryWriter:
    def __init__(
        self,
        history: HistoryStore,
        episodes: EpisodeRepo,
        *,
        model: ChatModel | None,
        voice: DiaryVoice,
        tz: Any,
        semantic: SemanticMemory | None = None,
        review_rounds: int = 3,
        max_attempts: int = 2,
        max_episodes: int = 200,
        claim_check: DiaryClaimCheck | None = None,
    ) -> None:
        self.history = history
        self.episodes = episodes
        self.model = model
        self.voice = voice
        self.tz = tz
        self.semantic = semantic
        self.review_rounds = review_rounds
        self.max_attempts = max_attempts
        self.max_episodes = max_episodes
        self.claim_check = claim_check
        """Her sentences' claims against her record (None: only the citations and the model's
        review check them)."""

    async def ensure(self) -> None:
        await self.history.ensure(DIARIES)

    async def get(self, character_id: str, period: Period, day: date) -> Diary | None:
        doc = await self.history.get(DIARIES.name, diary_id(character_id, period, day))
        return Diary.model_validate(doc) if doc else None

    async def find(
        self,
        character_id: str,
        *,
        period: Period = "day",
        start: date | None = None,
        end: date | None = None,
        limit: int | None = None,
        newest_first: bool = True,
    ) -> list[Diary]:
        """Entries with ``start <= date < end`` (ISO dates compare as strings)."""
        docs = await self.history.find(
            DIARIES.name,
            eq={"character_id": character_id, "period": period},
            ranges={
                "date": (start.isoformat() if start else None, end.isoformat() if end else None)
            },
            sort="date",
            descending=newest_first,
            limit=limit,
        )
        return [Diary.model_validate(d) for d in docs]

    # -- the daily entry --------------------------------------------------------------------------

    async def write_day(
        self, character_id: str, day: date, now: datetime, *, overwrite: bool = False
    ) -> Diary:
        """Write (or return the existing) diary of ``day``; then the week/month summaries it closes."""
        if not overwrite and (existing := await self.get(character_id, "day", day)) is not None:
            return existing
        found = await self._record(character_id, day, day)
        diary = await self._compose(character_id, day, found, now)
        await self._save(diary)
        await self.write_summaries(character_id, day, now)
        return diary

    async def _record(self, character_id: str, first: date, last: date) -> list[Episode]:
        """Her episodes of ``first`` to ``last`` (whole days) that her diary may draw on: private
        chats stay private, since the diary is indexed as a public memory."""
        start = datetime(first.year, first.month, first.day, tzinfo=self.tz)
        days = (last - first).days + 1
        found = await self.episodes.between(
            character_id, start, start + timedelta(days=days), limit=self.max_episodes * days
        )
        return [e for e in found if _told_in_public(e)]

    async def _compose(
        self, character_id: str, day: date, found: list[Episode], now: datetime
    ) -> Diary:
        base = {
            "_id": diary_id(character_id, "day", day),
            "character_id": character_id,
            "period": "day",
            "date": day.isoformat(),
            "end_date": day.isoformat(),
            "written_at": now,
        }
        factual = Diary.model_validate(
            {
                **base,
                "text": factual_summary(day, found, self.tz),
                "episode_ids": [e.id for e in found],
                "source": "factual",
            }
        )
        if self.model is None or not found:
            return factual
        try:
            sentences, rejected, rounds = await self._grounded_draft(character_id, day, found)
        except LLMError as exc:
            log.warning("diary for %s: the LLM failed (%s); writing the factual summary", day, exc)
            return factual
        except _CheckFailed as exc:
            log.warning(
                "diary for %s: the claim check failed (%s); writing the factual summary", day, exc
            )
            return factual
        if not sentences:
            log.warning(
                "diary for %s: no sentence survived the review; writing the factual summary", day
            )
            return factual.model_copy(update={"rejected": rejected, "rounds": rounds})
        text = "\n\n".join("".join(s.text for s in para) for para in sentences if para)
        cited = sorted({i for para in sentences for s in para for i in s.episode_ids})
        return Diary.model_validate(
            {
                **base,
                "text": text,
                "episode_ids": cited,
                "source": "llm",
                "rejected": rejected,
                "rounds": rounds,
            }
        )

    def _episode_view(self, found: Sequence[Episode]) -> list[dict[str, str]]:
        return [
            {"id": e.id, "time": f"{e.time.astimezone(self.tz):%H:%M}", "summary": e.summary}
            for e in found
        ]

    async def _grounded_draft(
        self, character_id: str, day: date, found: list[Episode]
    ) -> tuple[list[list[Sentence]], list[dict[str, Any]], int]:
        assert self.model is not None
        known = {e.id for e in found}
        view = self._episode_view(found)
        prompt = _ENV.get_template("diary.md.j2").render(
            persona=self.voice.persona,
            name=self.voice.name,
            speaking_style=self.voice.speaking_style,
            date=day.isoformat(),
            episodes=view,
        )
        messages = [{"role": "user", "content": prompt}]
        rejected_log: list[dict[str, Any]] = []
        rounds = 0
        while True:
            draft = (
                await ask_structured(
                    self.model,
                    messages,
                    Draft.model_validate_json,
                    max_attempts=self.max_attempts,
                    json_schema=JsonSchema(name="diary", schema=Draft.model_json_schema()),
                    purpose="diary",
                )
            ).value
            flat = [s for para in draft.paragraphs for s in para]
            bad = self._uncited(flat, known)
            bad.update(
                self._unbacked(
                    character_id, (day, day), found, [s.text for s in flat], skip=set(bad)
                )
            )
            bad.update(await self._review(view, flat, skip=set(bad)))
            if not bad:
                return draft.paragraphs, rejected_log, rounds
            if rounds >= self.review_rounds:
                log.warning(
                    "diary for %s: %d sentence(s) still unsupported after %d revision(s), cut: %s",
                    day,
                    len(bad),
                    rounds,
                    "; ".join(f"{flat[i].text!r} ({r})" for i, r in sorted(bad.items())),
                )
                rejected_log += [
                    {"text": flat[i].text, "reason": r, "round": rounds}
                    for i, r in sorted(bad.items())
                ]
                kept: list[list[Sentence]] = []
                n = 0
                for para in draft.paragraphs:
                    keep = []
                    for s in para:
                        if n not in bad:
                            keep.append(s)
                        n += 1
                    if keep:
                        kept.append(keep)
                return kept, rejected_log, rounds
            rounds += 1
            rejected_log += [
                {"text": flat[i].text, "reason": r, "round": rounds} for i, r in sorted(bad.items())
            ]
            feedback = "\n".join(f"- 「{flat[i].text}」：{r}" for i, r in sorted(bad.items()))
            messages = [
                *messages[:1],
                {"role": "assistant", "content": draft.model_dump_json()},
                {
                    "role": "user",
                    "content": f"审核没有通过，下面的句子没有当天经历的支持：\n{feedback}\n"
                    "请删掉或改写这些句子，只写列出的经历，重新输出完整的 JSON。",
                },
            ]

    @staticmethod
    def _uncited(flat: Sequence[Sentence], known: set[str]) -> dict[int, str]:
        bad: dict[int, str] = {}
        for i, s in enumerate(flat):
            if not s.episode_ids:
                bad[i] = "没有引用任何经历"
            elif unknown := [x for x in s.episode_ids if x not in known]:
                bad[i] = f"引用了不存在的经历编号 {unknown}"
        return bad

    def _unbacked(
        self,
        character_id: str,
        period: tuple[date, date],
        found: Sequence[Episode],
        texts: Sequence[str],
        skip: set[int],
    ) -> dict[int, str]:
        """The claim check's verdict on ``texts`` (those not in ``skip``), by index in ``texts``;
        raises `_CheckFailed` when the check itself fails."""
        if self.claim_check is None:
            return {}
        index_map = [i for i in range(len(texts)) if i not in skip]
        if not index_map:
            return {}
        try:
            verdict = self.claim_check.unbacked(
                character_id=character_id,
                start=period[0],
                end=period[1],
                episodes=found,
                sentences=[texts[i] for i in index_map],
            )
        except Exception as exc:
            raise _CheckFailed(f"{type(exc).__name__}: {exc}") from exc
        bad = {index_map[i]: r for i, r in verdict.items() if 0 <= i < len(index_map)}
        if bad:
            log.info(
                "diary of %s for %s: %d sentence(s) her record does not back: %s",
                character_id,
                period[0] if period[0] == period[1] else f"{period[0]}..{period[1]}",
                len(bad),
                "; ".join(f"{texts[i]!r} ({r})" for i, r in sorted(bad.items())),
            )
        return bad

    async def _review(
        self, view: list[dict[str, str]], flat: Sequence[Sentence], skip: set[int]
    ) -> dict[int, str]:
        assert self.model is not None
        to_check = [s for i, s in enumerate(flat) if i not in skip]
        if not to_check:
            return {}
        index_map = [i for i in range(len(flat)) if i not in skip]
        prompt = _ENV.get_template("diary_review.md.j2").render(
            episodes=view, sentences=[s.model_dump() for s in to_check]
        )

        def parse(raw: str) -> Review:
            review = Review.model_validate_json(raw)
            wrong = [u.index for u in review.unsupported if not 0 <= u.index < len(to_check)]
            if wrong:
                raise RetryWithFeedback(
                    f"句子编号 {wrong} 不存在，编号范围是 0 到 {len(to_check) - 1}"
                )
            return review

        review = (
            await ask_structured(
                self.model,
                [{"role": "user", "content": prompt}],
                parse,
                max_attempts=self.max_attempts,
                json_schema=JsonSchema(name="diary_review", schema=Review.model_json_schema()),
                temperature=0,
                purpose="diary",
            )
        ).value
        return {index_map[u.index]: u.reason or "审核认为没有经历支持" for u in review.unsupported}

    # -- weekly and monthly summaries -------------------------------------------------------------

    async def write_summaries(self, character_id: str, day: date, now: datetime) -> list[Diary]:
        """The week's summary on a Sunday, the month's on its last day (existing ones are kept)."""
        out = []
        if day.weekday() == 6:
            out.append(
                await self.write_summary(character_id, "week", day - timedelta(days=6), day, now)
            )
        if day.day == calendar.monthrange(day.year, day.month)[1]:
            out.append(
                await self.write_summary(character_id, "month", day.replace(day=1), day, now)
            )
        return out

    async def write_summary(
        self,
        character_id: str,
        period: Literal["week", "month"],
        start: date,
        end: date,
        now: datetime,
    ) -> Diary:
        if (existing := await self.get(character_id, period, start)) is not None:
            return existing
        dailies = await self.find(
            character_id, start=start, end=end + timedelta(days=1), newest_first=False
        )
        text = (
            "\n".join(d.text.replace("\n\n", " ").replace("\n", "；")[:160] for d in dailies)
            or "这段时间没有日记。"
        )
        source: Literal["llm", "factual"] = "factual"
        rejected: list[dict[str, Any]] = []
        rounds = 0
        if self.model is not None and dailies:
            prompt = _ENV.get_template("summary.md.j2").render(
                persona=self.voice.persona,
                name=self.voice.name,
                start=start.isoformat(),
                end=end.isoformat(),
                period_name="一周" if period == "week" else "一个月",
                diaries=[{"date": d.date, "text": d.text} for d in dailies],
            )
            try:
                written, rejected, rounds = await self._checked_summary(
                    character_id, start, end, prompt
                )
                if written:
                    text, source = written, "llm"
                else:
                    log.warning(
                        "%s summary from %s: no sentence her record backs; writing the factual one",
                        period,
                        start,
                    )
            except (LLMError, _CheckFailed) as exc:
                log.warning(
                    "%s summary from %s: %s (%s); writing the factual one",
                    period,
                    start,
                    "the LLM failed" if isinstance(exc, LLMError) else "the claim check failed",
                    exc,
                )
        diary = Diary.model_validate(
            {
                "_id": diary_id(character_id, period, start),
                "character_id": character_id,
                "period": period,
                "date": start.isoformat(),
                "end_date": end.isoformat(),
                "text": text,
                "episode_ids": [d.id for d in dailies],
                "source": source,
                "rejected": rejected,
                "rounds": rounds,
                "written_at": now,
            }
        )
        await self._save(diary)
        return diary

    async def _checked_summary(
        self, character_id: str, start: date, end: date, prompt: str
    ) -> tuple[str, list[dict[str, Any]], int]:
        """A summary whose sentences her record of ``start`` to ``end`` backs (the claim check,
        when there is one): unbacked sentences go back to the model with the reasons, at most
        ``review_rounds`` times, and are cut after the last round ('' when nothing is left)."""
        assert self.model is not None
        record = await self._record(character_id, start, end) if self.claim_check else []
        messages = [{"role": "user", "content": prompt}]
        rejected: list[dict[str, Any]] = []
        rounds = 0
        while True:
            text = (
                await ask_structured(
                    self.model,
                    messages,
                    SummaryText.model_validate_json,
                    max_attempts=self.max_attempts,
                    json_schema=JsonSchema(
                        name="diary_summary", schema=SummaryText.model_json_schema()
                    ),
                    purpose="diary",
                )
            ).value.text
            sentences = _SENTENCES.findall(text)
            bad = self._unbacked(character_id, (start, end), record, sentences, skip=set())
            if not bad:
                return text, rejected, rounds
            last = rounds >= self.review_rounds
            rounds += 0 if last else 1
            rejected += [
                {"text": sentences[i].strip(), "reason": r, "round": rounds}
                for i, r in sorted(bad.items())
            ]
            if last:
                kept = "".join(x for i, x in enumerate(sentences) if i not in bad).strip()
                log.warning(
                    "summary %s..%s: %d sentence(s) still unbacked after %d revision(s), cut",
                    start,
                    end,
                    len(bad),
                    rounds,
                )
                return kept, rejected, rounds
            feedback = "\n".join(
                f"- 「{sentences[i].strip()}」：{r}" for i, r in sorted(bad.items())
            )
            messages = [
                *messages[:1],
                {"role": "assistant", "content": SummaryText(text=text).model_dump_json()},
                {
                    "role": "user",
                    "content": f"下面的句子和这段时间的生活记录对不上：\n{feedback}\n"
                    "请删掉或改写这些句子，只写日记里写过、记录里有的事，重新输出完整的 JSON。",
                },
            ]

    # -- storing and indexing ---------------------------------------------------------------------

    async def _save(self, diary: Diary) -> None:
        await self.history.put(DIARIES.name, diary.document())
        await self.index(diary)

    async def index(self, diary: Diary) -> None:
        """Chunks (paragraphs) into semantic memory; stale chunks of an older version go first.
        Failures are logged: the diary is in history and `reindex` can repeat this."""
        if self.semantic is None:
            return
        chunks = [c.strip() for c in diary.text.split("\n\n") if c.strip()]
        end = date.fromisoformat(diary.end_date)
        when = datetime(end.year, end.month, end.day, 21, tzinfo=self.tz)
        try:
            await self.semantic.forget(ref=diary.id, kind="diary")
            await self.semantic.remember(
                [
                    NewMemory(
                        kind="diary",
                        character_id=diary.character_id,
                        text=chunk,
                        time=when,
                        key=f"{diary.id}:{n}",
                        ref=diary.id,
                        importance=0.7 if diary.period == "day" else 0.8,
                        embed_text=f"{diary.date}\n{chunk}",
                        extra={"period": diary.period, "date": diary.date},
                    )
                    for n, chunk in enumerate(chunks)
                ]
            )
        except Exception as exc:
            log.warning("diary %s is saved but not indexed for recall: %s", diary.id, exc)
