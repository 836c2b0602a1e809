"""Building the chat side from the config: its typed dependencies (`message.deps.ChatDeps`) once,
then the `ChatService` over them. Platform-free: the caller brings the sender (the NoneBot plugin's
`nonebot_plugin_yuiju.app` for `yuiju bot` / `yuiju run` and inside a host app; a fake in tests)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from yuiju.config import ChatConfig, YuijuConfig
from yuiju.llm import ToolChatModel
from yuiju.message.channel import GroupManager, Sender
from yuiju.message.deps import WorldView
from yuiju.message.service import ChatService
from yuiju.storage.redis import RedisClient
from yuiju.world.clock import Clock

if TYPE_CHECKING:
    from yuiju.memory.service import MemoryService
    from yuiju.message.stickers import StickerSet
    from yuiju.storage.history import HistoryStore
    from yuiju.world.store import StateStore

log = logging.getLogger(__name__)

Closer = Callable[[], Awaitable[None]]
"""Run at shutdown, last-first (stores close after the archiving that writes to them)."""


async def build_service(
    cfg: YuijuConfig,
    *,
    sender: Sender,
    on_stop: list[Closer],
    groups: GroupManager | None = None,
    redis: RedisClient | None = None,
    history: HistoryStore | None = None,
    memory: MemoryService | None = None,
    world: WorldView | None = None,
    model: ToolChatModel | None = None,
    clock: Clock | None = None,
) -> ChatService:
    """The chat service from the config, its dependencies (`ChatDeps`) built once here: pass
    already-open objects to share them (``yuiju run``), otherwise stores, memory and model are
    opened here, and their closers appended to ``on_stop`` (run last-first at shutdown). With
    shared stores the caller owns memory too: ``memory=None`` then means none (the embedded
    vector store is opened once per process, by the caller). ``sender`` (and ``groups``) are the
    platform side: the NoneBot plugin's, a test's fake, the web chat's."""
    from yuiju.characters import CardError, load_card
    from yuiju.message.debug import AdminDebugSink
    from yuiju.message.deps import ChatDeps
    from yuiju.message.grounding import ClaimLexicon
    from yuiju.message.pacing import Pacing
    from yuiju.message.people import People
    from yuiju.message.session import SessionStore
    from yuiju.storage.keys import Keys
    from yuiju.world.loader import load_actions
    from yuiju.world.runtime import configured_model, open_stores, world_clock
    from yuiju.world.store import StateStore
    from yuiju.world.town import HAURA

    cid = cfg.chat.character_id or cfg.world.characters[0]
    keys = Keys(cfg.redis.prefix)
    shared = redis is not None
    if redis is None:
        handle, history = await open_stores(cfg)
        redis = handle.client
        on_stop.append(handle.aclose)
        on_stop.append(history.close)
        # closers run last-first: the last flush comes after every part that queues entries
        await _start_outbox_flusher(StateStore(redis, keys), history, on_stop)
    clock = clock or await world_clock(cfg, StateStore(redis, keys))
    if model is None:
        model = configured_model(cfg, redis=redis, keys=keys, clock=clock)
    if memory is None and cfg.memory.enabled and not shared and history is not None:
        try:
            from yuiju.memory.service import build_memory, open_semantic

            semantic = await open_semantic(cfg)
            # with the model: /distill and the memory_distill tool distil through it
            memory = await build_memory(cfg, history, semantic, character_id=cid, chat_model=model)
            on_stop.append(semantic.store.close)
        except Exception as exc:  # e.g. a Qdrant server that is down
            log.warning("chat runs without memory (%s)", exc)
    catalogue = load_actions("yuiju.actions", cfg.world.action_dirs)
    lexicon = ClaimLexicon.build(catalogue)
    card = load_card(cid)
    # whom she knows: her town's characters, and those her card names (`[relations]`) even when
    # they do not live in this town (she has met none of them then)
    neighbours = {}
    for other in dict.fromkeys([*cfg.world.characters, *card.relations]):
        if other != cid:
            with contextlib.suppress(CardError):  # a missing card stops the world, not the chat
                theirs = load_card(other)
                neighbours[other] = (theirs.name, *theirs.nicknames)
    deps = ChatDeps(
        cfg=cfg.chat,
        card=card,
        stickers=load_stickers(cfg.chat, cid),
        pacing=Pacing.from_config(cfg.chat, seed=f"{cfg.world.seed}:{cid}"),
        clock=clock,
        redis=redis,
        keys=keys,
        sessions=SessionStore(redis, keys, cid),
        people=People(redis, keys),
        sender=sender,
        groups=groups,
        world=world or StateStore(redis, keys),
        memory=memory,
        history=history,
        model=model,
        neighbours=neighbours,
        place_words=HAURA.place_words((a.at, a.name) for a in catalogue),
    )
    service = ChatService(
        deps,
        lexicon=lexicon,
        sink=AdminDebugSink(cfg.chat.admins, sender) if cfg.chat.debug_to_admins else None,
        proactive=cfg.proactive,
    )
    await service.ensure()
    _start_proactive(service, on_stop)
    on_stop.append(service.drain)  # closers run last-first: archiving ends before stores close
    return service


def load_stickers(cfg: ChatConfig, character_id: str) -> StickerSet:
    """Her stickers per ``[chat]``: the configured folder, else her card's own; none when
    ``stickers = false``. A folder that cannot be read is a log line, never a failed start."""
    from yuiju.message.stickers import NO_STICKERS, StickerSet, card_folder

    if not cfg.stickers:
        return NO_STICKERS
    if cfg.sticker_folder is not None:
        return StickerSet.load(cfg.sticker_folder, configured=True)
    return StickerSet.load(card_folder(character_id), configured=False)


async def _start_outbox_flusher(
    store: StateStore, history: HistoryStore, on_stop: list[Closer]
) -> None:
    """Write the episode outbox to history from this process (`yuiju bot`, the plugin in a host
    app): the ledger of her chat's model calls is queued there, and without a world engine on these
    stores nobody else would write it. The town's flush lock is shared with any engine, so two
    processes never write the same entries; the stop flushes once more."""
    import asyncio

    from yuiju.memory.episodes import EpisodeRepo
    from yuiju.memory.ledger import LLM_CALLS
    from yuiju.world.outbox import OutboxFlusher

    # an entry for a collection the store does not know yet would be dead-lettered
    await EpisodeRepo(history).ensure()
    await history.ensure(LLM_CALLS)
    flusher = OutboxFlusher(store, history)
    task = asyncio.create_task(flusher.run(), name="outbox-flush")

    async def halt() -> None:
        from yuiju.tasks import finish

        flusher.stop()
        await finish(task, grace=0.25, what="outbox flush")
        try:
            await flusher.flush_once()
        except Exception as exc:  # the entries stay queued for the next flusher
            log.warning("outbox not flushed at stop (%s); its entries stay queued", exc)

    on_stop.append(halt)


def _start_proactive(service: ChatService, on_stop: list[Closer]) -> None:
    import asyncio

    proactive = service.proactive
    if proactive is None:
        return
    stop = asyncio.Event()
    task = asyncio.create_task(proactive.run(stop))

    async def halt() -> None:
        from yuiju.tasks import finish

        stop.set()
        await finish(task, grace=0.25, what="proactive posts")

    on_stop.append(halt)
