"""The observer web page: a read-only view of her life, served by the daemon (FastAPI + Jinja2).

`create_app` builds the app on an `Observer` (read handles on the stores); `ObserverServer` runs
it with uvicorn inside the daemon's event loop. `observer_for_runtime` wires both from a running
world. Nothing here writes world state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from yuiju.web.app import ObserverServer, create_app
from yuiju.web.view import Observer, StoresDown

if TYPE_CHECKING:
    from yuiju.world.clock import Clock
    from yuiju.world.runtime import Runtime

__all__ = ["Observer", "ObserverServer", "StoresDown", "create_app", "observer_for_runtime"]


def observer_for_runtime(runtime: Runtime, clock: Clock | None = None) -> Observer:
    """An `Observer` on a running world's stores, labelled from its cards and catalogue."""
    from yuiju.world.clock import RealClock
    from yuiju.world.town import HAURA

    cfg = runtime.cfg
    return Observer(
        redis=runtime.redis.client,
        history=runtime.history,
        keys=runtime.keys,
        town=HAURA,
        tz=cfg.app.tz,
        character_ids=list(cfg.world.characters),  # the default town's (the page's keys)
        catalogue=runtime.catalogue,
        now=clock.now if clock is not None else None,
        shown=clock.shown if isinstance(clock, RealClock) else None,
        names={cid: getattr(card, "name", cid) for cid, card in runtime.cards.items()},
    )
