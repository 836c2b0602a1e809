"""Leases and fair sharing: which characters and towns this engine drives, and when to look again.

Every engine is a worker: it registers in the worker registry (`StateStore.heartbeat`, kept in the
default town's keys) and the live workers share the characters of every town in the config out
evenly. Each takes at most its fair share, ``ceil(characters / live workers)``, and at most
``ceil(towns / live workers)`` town leases (the town lease holder runs that town's world tick).

- **A worker joins**: those above their share give the extra characters up at a safe point, between
  two steps (`Leases.give_up_extras`; never in the middle of a step), and the newcomer takes them
  as they come free. Nobody ever takes a lease another engine holds.
- **A worker stops cleanly**: it releases its leases and leaves the registry; the others take its
  characters at their next check.
- **A worker dies** (kill -9, a lost machine): its heartbeat and leases run out after the lease TTL.
  Each check reads how long every other worker's heartbeat has left, and how long each lease held
  by another engine has, so the survivors wake right when one runs out, not at their next poll,
  and take the characters over: a takeover takes at most the TTL and a wake-up.

Every check is one script per town (`StateStore.sync_leases`: renew ours, take free ones up to the
budget, report the rest) plus one heartbeat, whatever the number of characters; a lease is written
only when a third of its TTL has gone. Leases expire in wall time, so every wait here is in wall
time whatever the world clock's speed.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from yuiju.world.store import LEASE_MINE, StateStore

POLL_SECONDS = 2.0
"""Wall time between two checks at most: how soon a worker notices a newcomer (and gives up its
extras), and a waiting engine asks again for a lease that may have been released."""
WAKE_MARGIN_SECONDS = 0.02
"""Wake this long after a heartbeat or lease is due to run out, so it has."""
LATEST = datetime.max.replace(tzinfo=UTC)


@dataclass(eq=False)
class TownLeases:
    """What this engine holds in one town."""

    store: StateStore
    characters: list[str]
    """Every character of the town, in the order this worker tries free ones (its own shuffle, so
    workers taking at the same moment mostly go for different characters)."""
    held: set[str] = field(default_factory=set)
    holds_town: bool = False

    @property
    def prefix(self) -> str:
        return self.store.keys.prefix


@dataclass
class LeaseChange:
    """What one check changed."""

    taken: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    """Held before, and another engine's (or nobody's) now: this engine must stop driving them."""
    towns_taken: list[str] = field(default_factory=list)
    towns_lost: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    """Characters this engine has room for but another engine drives (it waits for them)."""


class Leases:
    """This engine's leases in every town of the config, and the fair share it may hold."""

    def __init__(
        self,
        towns: Sequence[tuple[StateStore, Sequence[str]]],
        *,
        token: str,
        ttl_ms: int,
        info: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        rng = random.Random(token)
        self.towns: list[TownLeases] = []
        for store, characters in towns:
            order = list(characters)
            rng.shuffle(order)
            self.towns.append(TownLeases(store=store, characters=order))
        rng.shuffle(self.towns)  # and its own order of towns, for the same reason
        self._by_prefix = {t.prefix: t for t in self.towns}
        self.registry = towns[0][0]
        """The default town's store, which keeps the worker registry."""
        self.token = token
        self.ttl_ms = ttl_ms
        self.info = info
        self.total = sum(len(t.characters) for t in self.towns)
        self.live: dict[str, int] = {}
        """The live workers at the last check (token -> ms its heartbeat had left), this one included."""
        self.next_check = 0.0
        """`time.monotonic()` of the next check."""
        self._info_written, self._info_written_at = "", 0.0

    # -- what this engine holds ---------------------------------------------------------------

    @property
    def poll_seconds(self) -> float:
        return min(POLL_SECONDS, self.ttl_ms / 3000)

    @property
    def share(self) -> int:
        """Characters this worker may hold: an even share among the live workers."""
        return math.ceil(self.total / max(1, len(self.live)))

    @property
    def town_share(self) -> int:
        return math.ceil(len(self.towns) / max(1, len(self.live)))

    def held(self) -> list[str]:
        return [cid for town in self.towns for cid in town.held]

    @property
    def held_count(self) -> int:
        return sum(len(town.held) for town in self.towns)

    def holds(self, character_id: str) -> bool:
        return any(character_id in town.held for town in self.towns)

    def holds_town(self, prefix: str) -> bool:
        return self._by_prefix[prefix].holds_town

    def towns_held(self) -> list[str]:
        return [t.prefix for t in self.towns if t.holds_town]

    @property
    def over_share(self) -> bool:
        return self.held_count > self.share or len(self.towns_held()) > self.town_share

    def drop(self, character_id: str) -> None:
        """Forget a lease this engine found it no longer holds (a fenced write said so)."""
        for town in self.towns:
            town.held.discard(character_id)

    def drop_town(self, prefix: str) -> None:
        self._by_prefix[prefix].holds_town = False

    # -- the check ----------------------------------------------------------------------------

    async def refresh(self) -> LeaseChange:
        """Heartbeat, then per town: renew what is ours, take free leases up to the fair share,
        notice what was lost; schedule the next check (`next_check`)."""
        renew_below = self.ttl_ms * 2 // 3
        info = self._info_if_changed()
        self.live = await self.registry.heartbeat(
            self.token, self.ttl_ms, info, renew_below_ms=renew_below
        )
        soonest = [self.poll_seconds]
        # another worker's heartbeat running out changes the shares: look again right then
        soonest += [
            left / 1000 + WAKE_MARGIN_SECONDS
            for tok, left in self.live.items()
            if tok != self.token
        ]
        budget = self.share - self.held_count
        town_budget = self.town_share - len(self.towns_held())
        change = LeaseChange()
        for town in self.towns:
            wants = budget > 0
            wants_town = not town.holds_town and town_budget > 0
            if not (wants or wants_town or town.held or town.holds_town):
                continue
            # with no room for more, only our own leases need a look
            asked = town.characters if wants else [c for c in town.characters if c in town.held]
            view = await town.store.sync_leases(
                self.token,
                self.ttl_ms,
                characters=asked,
                take=max(0, budget),
                take_town=wants_town,
                renew_below_ms=renew_below,
            )
            if view.town == LEASE_MINE:
                if not town.holds_town:
                    town.holds_town = True
                    town_budget -= 1
                    change.towns_taken.append(town.prefix)
            else:
                if town.holds_town:
                    town.holds_town = False
                    change.towns_lost.append(town.prefix)
                if wants_town and view.town > 0:
                    soonest.append(view.town / 1000 + WAKE_MARGIN_SECONDS)
            for cid, status in view.characters.items():
                if status == LEASE_MINE:
                    if cid not in town.held:
                        town.held.add(cid)
                        budget -= 1
                        change.taken.append(cid)
                    continue
                if cid in town.held:
                    town.held.discard(cid)
                    change.lost.append(cid)
                if wants and status > 0:
                    change.waiting.append(cid)
                    soonest.append(status / 1000 + WAKE_MARGIN_SECONDS)
        self.next_check = time.monotonic() + min(soonest)
        changed = change.taken or change.lost or change.towns_taken or change.towns_lost
        if changed and (
            info := self._info_if_changed()
        ):  # what `yuiju status` shows: now, not next time
            await self.registry.heartbeat(self.token, self.ttl_ms, info, renew_below_ms=renew_below)
        return change

    def _info_if_changed(self) -> str:
        """This worker's info JSON for the registry, or '' when it is what was written last (it is
        written again every third of the TTL anyway, in case the registry forgot this worker)."""
        if self.info is None:
            return ""
        info = json.dumps(dict(self.info()), default=str)
        if (
            info == self._info_written
            and time.monotonic() - self._info_written_at < self.ttl_ms / 3000
        ):
            return ""
        self._info_written, self._info_written_at = info, time.monotonic()
        return info

    async def give_up_extras(self, due: Mapping[str, datetime]) -> tuple[list[str], list[str]]:
        """Release what is above the fair share (call it between steps only); the characters and
        towns given up. Those this engine has not stepped yet go first (a fleet starting together
        shares the first steps out), then those whose next step is furthest away, so the worker
        taking them over has the most time before it must act."""
        extra = self.held_count - self.share
        given: list[str] = []
        if extra > 0:
            given = sorted(self.held(), key=lambda cid: due.get(cid, LATEST), reverse=True)[:extra]
        towns = self.towns_held()[: max(0, len(self.towns_held()) - self.town_share)]
        for town in self.towns:
            mine = [cid for cid in given if cid in town.held]
            let_town_go = town.prefix in towns
            if not (mine or let_town_go):
                continue
            town.held.difference_update(mine)  # forgotten first: the engine never steps them again
            if let_town_go:
                town.holds_town = False
            await town.store.release_leases(self.token, mine, town=let_town_go)
        return given, towns

    async def release_all(self) -> None:
        """Give every lease up and leave the registry (a clean stop). Forgets them first, so even
        a failed release leaves this engine driving nothing (the leases then just run out)."""
        held = [(town, list(town.held), town.holds_town) for town in self.towns]
        for town in self.towns:
            town.held.clear()
            town.holds_town = False
        for town, characters, holds_town in held:
            if characters or holds_town:
                await town.store.release_leases(self.token, characters, town=holds_town)
        await self.registry.leave_registry(self.token)
        self._info_written = ""
