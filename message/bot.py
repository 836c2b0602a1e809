"""Starting the QQ bot: `yuiju bot` (its own process) and `yuiju run` (inside the daemon's loop).

NapCat/Lagrange connect to the reverse WebSocket ``ws://HOST:PORT/onebot/v11/ws``.
"""

from __future__ import annotations

import logging
from typing import Any

from message.runtime import RUNTIME

log = logging.getLogger(__name__)


def init_nonebot(cfg: Any) -> None:
    """``nonebot.init`` with the [onebot] section, the OneBot v11 adapter and this plugin."""
    import nonebot
    from nonebot.adapters.onebot.v11 import Adapter

    from characters import load_card

    card = load_card(cfg.chat.character_id or cfg.world.characters[0])
    token = cfg.onebot.access_token.get_secret_value() if cfg.onebot.access_token else None
    kwargs: dict[str, Any] = {"driver": "~fastapi", "host": cfg.onebot.host, "port": cfg.onebot.port,
                              "nickname": [card.name, *card.nicknames], "command_start": ["/"]}
    if token:
        kwargs["onebot_access_token"] = token
    nonebot.init(**kwargs)
    nonebot.get_driver().register_adapter(Adapter)
    nonebot.load_plugin("message")


async def build_service(cfg: Any, *, redis: Any = None, history: Any = None, memory: Any = None,
                        world: Any = None, model: Any = None) -> Any:
    """The chat service from the config; pass already-open objects to share them (``yuiju run``),
    otherwise stores, memory and model are opened here and closed at shutdown."""
    from characters import load_card
    from message.service import ChatService
    from storage.keys import Keys
    from world.clock import RealClock
    from world.loader import load_actions
    from world.runtime import make_chat_model, open_stores
    from world.store import StateStore

    cid = cfg.chat.character_id or cfg.world.characters[0]
    keys = Keys(cfg.redis.prefix)
    if redis is None:
        handle, history = await open_stores(cfg)
        redis = handle.client
        RUNTIME.on_stop.append(handle.aclose)
        RUNTIME.on_stop.append(history.close)
    if memory is None and cfg.memory.enabled:
        try:
            from memory.service import build_memory, open_semantic

            semantic = await open_semantic(cfg)
            memory = await build_memory(cfg, history, semantic, character_id=cid)
            RUNTIME.on_stop.append(semantic.store.close)
        except Exception as exc:  # e.g. the embedded Qdrant is held by `yuiju run`
            log.warning("chat runs without memory (%s); give [qdrant].url to share memory with the daemon", exc)
    if model is None and cfg.llm.configured:
        model = make_chat_model(cfg)
    names = [a.name for a in load_actions("actions", cfg.world.action_dirs)]
    service = ChatService(cfg=cfg.chat, card=load_card(cid), redis=redis, keys=keys,
                          clock=RealClock(cfg.app.tz), model=model, history=history, memory=memory,
                          world=world or StateStore(redis, keys), activity_names=names)
    await service.ensure()
    await _start_proactive(cfg, service)
    return service


async def _start_proactive(cfg: Any, service: Any) -> None:
    import asyncio
    import importlib.util

    section = getattr(cfg, "proactive", None)
    if section is None or not getattr(section, "enabled", False) or not getattr(section, "groups", None):
        return
    if importlib.util.find_spec("message.proactive") is None:
        return
    from message.channel import OneBotSender, ServiceGroupContext
    from message.matchers import current_bot
    from message.proactive import ProactiveService

    proactive = ProactiveService(cfg=section, redis=service.redis, history=service.history, clock=service.clock,
                                 chat_model=service.model, memory=service.memory,
                                 sender=OneBotSender(current_bot, service=service),
                                 group_context=ServiceGroupContext(service))
    service.proactive = proactive
    stop = asyncio.Event()
    task = asyncio.create_task(proactive.run(stop))

    async def halt() -> None:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)

    RUNTIME.on_stop.append(halt)


def run_bot(cfg: Any) -> None:
    """`yuiju bot`: the nonebot app in this process until interrupted."""
    import nonebot

    init_nonebot(cfg)
    RUNTIME.factory = lambda: build_service(cfg)
    nonebot.run()


async def serve_bot(cfg: Any, **shared: Any) -> Any:
    """Inside `yuiju run`: the nonebot ASGI app on uvicorn in the running loop, sharing the
    daemon's open stores and memory. Returns the `uvicorn.Server` (``should_exit`` stops it)."""
    import asyncio

    import nonebot
    import uvicorn

    init_nonebot(cfg)

    async def factory() -> Any:
        return await build_service(cfg, **shared)

    RUNTIME.factory = factory
    server = uvicorn.Server(uvicorn.Config(nonebot.get_asgi(), host=cfg.onebot.host, port=cfg.onebot.port,
                                           log_config=None, access_log=False))
    task = asyncio.create_task(server.serve())
    RUNTIME.extras["server_task"] = task
    return server
