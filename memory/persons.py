"""Person memory: one profile per person, keyed by platform and user id (never by nickname).

Updated from conversations (the LLM proposes section changes; without one only the nickname,
heat and last interaction move), readable and correctable by hand (`PersonRepo.correct`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from yuiju.llm import ChatModel, JsonSchema, RetryWithFeedback, ask_structured
from yuiju.llm.errors import LLMError
from yuiju.storage.history import CollectionSpec, HistoryStore

log = logging.getLogger(__name__)

PERSONS = CollectionSpec(
    name="persons",
    fields=("character_id", "platform", "user_id", "last_interacted_at"),
    indexes=(("character_id", "platform", "user_id"), ("character_id", "last_interacted_at")),
)

SECTIONS = (
    "称呼",
    "喜好",
    "雷区",
    "最近在忙什么",
    "我对ta的态度",
    "最近一次值得记住的互动",
    "其他补充",
)
"""The sections of a profile, in the order they are shown."""


def person_id(character_id: str, platform: str, user_id: str) -> str:
    return f"person_{character_id}_{platform}_{user_id}"


class PersonProfile(BaseModel):
    model_config = ConfigDict(populate_by_name=True, use_attribute_docstrings=True)

    id: str = Field(alias="_id")
    character_id: str
    platform: str
    """'qq', 'web', ..."""
    user_id: str
    """The platform's user id (a string)."""
    nickname: str = ""
    """The latest display name seen; informative only, never the key."""
    sections: dict[str, str] = Field(default_factory=dict)
    heat: int = 0
    """Interactions counted so far."""
    last_interacted_at: AwareDatetime | None = None
    updated_at: AwareDatetime | None = None
    corrected: dict[str, str] = Field(default_factory=dict)
    """Sections a human set by hand; the LLM does not overwrite them."""

    def document(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)

    def render(self) -> str:
        lines = [f"{self.nickname or self.user_id}（{self.platform}:{self.user_id}）"]
        lines += [f"- {s}：{self.sections.get(s) or '（暂无）'}" for s in SECTIONS]
        return "\n".join(lines)


class Change(BaseModel):
    section: str
    content: str


class PersonChanges(BaseModel):
    person: str
    """The number the prompt gave this person ("1", "2", ...)."""
    changes: list[Change] = Field(default_factory=list)


class Proposal(BaseModel):
    people: list[PersonChanges] = Field(default_factory=list)


PROPOSAL_SCHEMA = JsonSchema(name="person_memory", schema=Proposal.model_json_schema())
"""Built once: pydantic builds a model's JSON schema anew at every call (milliseconds of CPU,
for every conversation window archived)."""

PEOPLE_PER_CALL = 8
"""Profiles updated by one model call: a window of a busy group names many people, and one call
each (the whole transcript sent again for every one) was most of what archiving it cost."""


@dataclass(frozen=True)
class Counterpart:
    """Someone in a conversation: the platform, their id on it and the name they showed."""

    platform: str
    user_id: str
    nickname: str


PROMPT = """你是{name}。根据下面这段对话，更新你对对话里这几个人的记忆档案。
只记录对话里明确出现的、关于这个人自己的信息，不要猜测，不要把别人说的事记到这个人身上；没有新信息的人可以不写。每个 content 是该栏目的完整新内容（100 字以内）。
可用栏目：{sections}

当前档案：
{profiles}

对话：
{transcript}

只输出一个 JSON 对象：{{"people": [{{"person": "编号", "changes": [{{"section": "栏目", "content": "新内容"}}]}}]}}"""


class PersonRepo:
    def __init__(self, history: HistoryStore, character_id: str) -> None:
        self.history = history
        self.character_id = character_id

    async def ensure(self) -> None:
        await self.history.ensure(PERSONS)

    async def get(self, platform: str, user_id: str) -> PersonProfile | None:
        doc = await self.history.get(PERSONS.name, person_id(self.character_id, platform, user_id))
        return PersonProfile.model_validate(doc) if doc else None

    async def list(self, limit: int = 50) -> list[PersonProfile]:
        """Most recently met first."""
        docs = await self.history.find(
            PERSONS.name,
            eq={"character_id": self.character_id},
            ranges={"last_interacted_at": (None, None)},
            sort="last_interacted_at",
            descending=True,
            limit=limit,
        )
        return [PersonProfile.model_validate(d) for d in docs]

    async def _load_or_new(self, platform: str, user_id: str) -> PersonProfile:
        return await self.get(platform, user_id) or PersonProfile.model_validate(
            {
                "_id": person_id(self.character_id, platform, user_id),
                "character_id": self.character_id,
                "platform": platform,
                "user_id": user_id,
            }
        )

    async def correct(
        self, platform: str, user_id: str, section: str, content: str, now: datetime
    ) -> PersonProfile:
        """A human's correction: set a section and protect it from automatic updates."""
        if section not in SECTIONS:
            raise ValueError(f"unknown section {section!r}; sections are {SECTIONS}")
        profile = await self._load_or_new(platform, user_id)
        profile.sections[section] = content
        profile.corrected[section] = content
        profile.updated_at = now
        await self.history.put(PERSONS.name, profile.document())
        return profile

    async def update_from_conversation(
        self,
        platform: str,
        user_id: str,
        nickname: str,
        messages: Sequence[tuple[str, str]],
        now: datetime,
        *,
        model: ChatModel | None,
        name: str = "悠酱",
    ) -> PersonProfile:
        """``messages`` are (speaker, text) pairs of one conversation with this person."""
        (profile,) = await self.update_from_window(
            [Counterpart(platform, user_id, nickname)], messages, now, model=model, name=name
        )
        return profile

    async def update_from_window(
        self,
        people: Sequence[Counterpart],
        messages: Sequence[tuple[str, str]],
        now: datetime,
        *,
        model: ChatModel | None,
        name: str = "悠酱",
    ) -> Sequence[PersonProfile]:
        """Every person of one conversation (``messages``: (speaker, text) pairs) updated from
        it: the model proposes section changes for up to `PEOPLE_PER_CALL` of them a call; a
        failed call leaves those people's sections as they were (nickname, heat and the last
        interaction still move)."""
        heat = sum(1 for speaker, _ in messages if speaker != name) or 1
        profiles = [await self._load_or_new(p.platform, p.user_id) for p in people]
        for person, profile in zip(people, profiles, strict=True):
            profile.nickname = person.nickname or profile.nickname
            profile.heat += heat
            profile.last_interacted_at = now
        if model is not None and messages:
            transcript = "\n".join(f"{s}：{t}" for s, t in messages)
            for i in range(0, len(profiles), PEOPLE_PER_CALL):
                await self._propose(profiles[i : i + PEOPLE_PER_CALL], transcript, model, name)
        for profile in profiles:
            profile.updated_at = now
            await self.history.put(PERSONS.name, profile.document())
        return profiles

    async def _propose(
        self, profiles: Sequence[PersonProfile], transcript: str, model: ChatModel, name: str
    ) -> None:
        """One model call proposing changes to ``profiles`` (numbered 1..n in the prompt)."""
        numbered = {str(n): p for n, p in enumerate(profiles, 1)}
        prompt = PROMPT.format(
            name=name,
            sections="、".join(SECTIONS),
            profiles="\n\n".join(f"[{n}] {p.render()}" for n, p in numbered.items()),
            transcript=transcript,
        )

        def parse(raw: str) -> Proposal:
            proposal = Proposal.model_validate_json(raw)
            problems = []
            unknown = [c.section for p in proposal.people for c in p.changes]
            unknown = [s for s in unknown if s not in SECTIONS]
            if unknown:
                problems.append(f"栏目 {unknown} 不存在，只能用：{'、'.join(SECTIONS)}")
            strangers = [p.person for p in proposal.people if p.person not in numbered]
            if strangers:
                problems.append(f"编号 {strangers} 不存在，只能用：{'、'.join(numbered)}")
            if problems:
                raise RetryWithFeedback("；".join(problems))
            return proposal

        try:
            proposal = (
                await ask_structured(
                    model,
                    [{"role": "user", "content": prompt}],
                    parse,
                    max_attempts=2,
                    json_schema=PROPOSAL_SCHEMA,
                    purpose="summary",
                )
            ).value
        except LLMError as exc:
            who = ", ".join(f"{p.platform}:{p.user_id}" for p in profiles)
            log.warning("person memory of %s not updated by the LLM: %s", who, exc)
            return
        for proposed in proposal.people:
            profile = numbered[proposed.person]
            for change in proposed.changes:
                if change.section not in profile.corrected:
                    profile.sections[change.section] = change.content.strip()
