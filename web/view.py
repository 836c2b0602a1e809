"""What the observer page shows, read from the stores (never written).

`Observer` holds the read handles (Redis, the history store, the key layout, the town and the
action catalogue); `Observer.snapshot` reads everything for one character into a plain dict the
template renders. Reading a store that is down raises `StoresDown` naming which one, so the page
can say so and try again on the next request.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from redis.exceptions import RedisError

from yuiju.memory.episode_data import BehaviorData, ConversationData
from yuiju.memory.episodes import EPISODES, Episode, EpisodeRepo
from yuiju.memory.ledger import LLM_CALLS, usage_fields, usage_of_day
from yuiju.storage.errors import StorageError, UndeclaredField
from yuiju.storage.history import CollectionSpec, HistoryStore
from yuiju.storage.keys import Keys
from yuiju.storage.redis import RedisClient
from yuiju.web import svg
from yuiju.world.errors import CorruptState
from yuiju.world.loader import Catalogue
from yuiju.world.plans import PlanState
from yuiju.world.social import social_view
from yuiju.world.state import CharacterState, WorldState
from yuiju.world.store import StateStore, latest_saved_time
from yuiju.world.town import Town

log = logging.getLogger(__name__)

CHART_DAYS = 7
STORE_TIMEOUT_S = 5.0
"""A store that does not answer within this is reported as down (MongoDB waits 30 s by default)."""

_OPTIONAL_COLLECTIONS = {
    "diaries": ("yuiju.memory.diary",),
    "outbox": ("yuiju.message.proactive",),
}
"""Collections other packages will add (diary: issue 4, proactive posts: issue 6), looked up
by name in the modules that would declare them; until they exist, the page shows 暂无."""


class StoresDown(Exception):
    """A store could not be read; the message says which one, in Chinese and English."""


@dataclass
class Observer:
    """Read-only handles on the stores, and what the page needs to label things."""

    redis: RedisClient
    history: HistoryStore
    keys: Keys
    town: Town
    tz: ZoneInfo
    character_ids: list[str]
    catalogue: Catalogue | None = None
    now: Callable[[], datetime] | None = None
    """World time (the daemon's clock); None: the world state's own time, else wall time."""
    shown: Callable[[datetime | None], datetime] | None = None
    """The world time to show given the saved one (`RealClock.shown`: never past what is saved
    while world time is ahead, so a restart never steps the page's clock back); None: ``now``."""
    names: dict[str, str] = field(default_factory=dict)
    """Display name per character id (from the cards), e.g. {"yuiju": "悠酱"}."""
    _ensured: dict[str, CollectionSpec] | None = None

    # -- store access -------------------------------------------------------------------------

    async def _ensure(self) -> dict[str, CollectionSpec]:
        if self._ensured is None:
            found: dict[str, CollectionSpec] = {}
            for name, modules in _OPTIONAL_COLLECTIONS.items():
                for module_name in modules:
                    try:
                        module = importlib.import_module(module_name)
                    except ImportError:
                        continue
                    spec = next(
                        (
                            v
                            for v in vars(module).values()
                            if isinstance(v, CollectionSpec) and v.name == name
                        ),
                        None,
                    )
                    if spec is not None:
                        found[name] = spec
                        break
            # Idempotent: the daemon ensures the same specs at start-up.
            await self.history.ensure(EPISODES, LLM_CALLS, *found.values())
            self._ensured = found
        return self._ensured

    async def _guard(self, what: str, coro: Any) -> Any:
        try:
            return await asyncio.wait_for(coro, STORE_TIMEOUT_S)
        except (RedisError, OSError, TimeoutError) as exc:
            raise StoresDown(
                f"{what} 暂时无法读取 / {what} is unavailable: {type(exc).__name__}"
            ) from exc
        except StorageError as exc:
            if isinstance(exc, UndeclaredField):
                raise
            raise StoresDown(f"{what} 暂时无法读取 / {what} is unavailable: {exc}") from exc
        except CorruptState as exc:
            raise StoresDown(f"{what} 中的数据无法解析 / corrupt value in {what}: {exc}") from exc
        except Exception as exc:
            if type(exc).__module__.startswith(("pymongo", "sqlite3")):
                raise StoresDown(
                    f"{what} 暂时无法读取 / {what} is unavailable: {type(exc).__name__}"
                ) from exc
            raise

    async def ping(self) -> dict[str, str]:
        """Both stores answer, or `StoresDown`."""
        await self._guard("Redis", self.redis.ping())
        await self._guard("历史存储 history store", self.history.ping())
        return {"redis": "ok", "history": self.history.backend}

    # -- the page's data ------------------------------------------------------------------------

    def clock_now(self, world: WorldState | None, character: CharacterState | None) -> datetime:
        if self.shown is not None:
            return self.shown(latest_saved_time(world, [character])).astimezone(self.tz)
        if self.now is not None:
            return self.now().astimezone(self.tz)
        if world is not None:
            return world.time.astimezone(self.tz)
        return datetime.now(self.tz)

    async def live(self, character_id: str) -> tuple[WorldState | None, CharacterState | None, Any]:
        store = StateStore(self.redis, self.keys)

        async def read() -> tuple[WorldState | None, CharacterState | None, Any]:
            world, character = await store.load(character_id)
            return world, character, character.plans if character else None

        return await self._guard("Redis", read())

    async def snapshot(self, character_id: str) -> dict[str, Any]:
        world, character, plans = await self.live(character_id)
        now = self.clock_now(world, character)
        day = now.date().isoformat()
        usage = await self._guard(
            "Redis",
            self.redis.hmget(
                self.keys.llm_usage, [f"{day}:tokens", f"{day}:calls", *usage_fields(day)]
            ),
        )
        optional = await self._guard("历史存储 history store", self._ensure())
        episodes = EpisodeRepo(self.history)
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        chart_start = midnight - timedelta(days=CHART_DAYS - 1)
        history_name = "历史存储 history store"
        today = await self._guard(
            history_name, episodes.between(character_id, midnight, midnight + timedelta(days=1))
        )
        week = await self._guard(
            history_name,
            episodes.between(
                character_id, chart_start, now + timedelta(seconds=1), type_="behavior"
            ),
        )
        diary = await self._guard(
            history_name, self._latest("diaries", optional, character_id, limit=1)
        )
        posts = await self._guard(
            history_name, self._latest("outbox", optional, character_id, limit=5)
        )

        social = await self._social(character_id, character, now)

        behavior_today = [e for e in today if e.type == "behavior"]
        fallbacks = sum(
            1
            for e in behavior_today
            if (d := e.behavior()) is not None and d.decided_by.startswith("fallback")
        )
        name = self.names.get(character_id, character_id)
        return {
            "character_id": character_id,
            "name": name,
            "characters": [(cid, self.names.get(cid, cid)) for cid in self.character_ids],
            "now": now,
            "world": self._world_view(world),
            "character": self._character_view(character, now),
            "plans": _plans_view(plans),
            "timeline": [self._episode_view(e) for e in today],
            "diary": diary[0] if diary else None,
            "posts": posts,
            "llm": _llm_view(day, usage, fallbacks, len(behavior_today)),
            "charts": self._charts(week, character, now, chart_start),
            "map": {
                kind: svg.town_map(
                    self.town,
                    character.location if character else None,
                    {pid: p.open for pid, p in (world.places.items() if world else ())},
                    who=name,
                    layout=layout,
                )
                for kind, layout in (("wide", svg.WIDE), ("narrow", svg.NARROW))
            },
            "stores": {"history": self.history.backend},
            "social": social,
        }

    async def _social(
        self, character_id: str, character: CharacterState | None, now: datetime
    ) -> dict[str, Any]:
        """Who is with whom now in her town, and her relations, appointments and news."""
        others = [c for c in self.character_ids if c != character_id]
        states: dict[str, CharacterState | None] = {character_id: character}
        if others:
            store = StateStore(self.redis, self.keys)
            states |= await self._guard("Redis", store.peek_characters(others))
        ordered = {cid: states.get(cid) for cid in self.character_ids if cid in states}
        view = social_view(ordered, now=now, town=self.town, names=self.names)
        return {
            "together": [
                {
                    **m,
                    "line": "和".join(self.names.get(c, c) for c in m["with"])
                    + f"在{m['place']}{m['doing']}（到 "
                    + datetime.fromisoformat(m["until"]).astimezone(self.tz).strftime("%H:%M")
                    + "）",
                    "mine": character_id in m["with"],
                }
                for m in view["together"]
            ],
            "relations": view["relations"].get(character_id, []),
            "appointments": view["appointments"].get(character_id, []),
            "notes": view["notes"].get(character_id, []),
            "news": view["news"].get(character_id, []),
        }

    async def _latest(
        self, name: str, specs: dict[str, CollectionSpec], character_id: str, *, limit: int
    ) -> list[dict[str, Any]]:
        spec = specs.get(name)
        if spec is None:
            return []
        sort = next(
            (f for f in ("time", "date", "created_at", "sent_at") if spec.queryable(f)), None
        )
        eq = {"character_id": character_id} if spec.queryable("character_id") else None
        docs = await self.history.find(name, eq=eq, sort=sort, descending=True, limit=limit)
        out = []
        for doc in docs:
            text = next(
                (
                    doc[k]
                    for k in ("text", "content", "body", "message", "summary")
                    if isinstance(doc.get(k), str)
                ),
                "",
            )
            when = next(
                (
                    doc[k]
                    for k in ("time", "date", "created_at", "sent_at")
                    if doc.get(k) is not None
                ),
                None,
            )
            if isinstance(when, datetime):
                when = when.astimezone(self.tz).strftime("%Y-%m-%d %H:%M")
            out.append(
                {
                    "text": text,
                    "when": str(when or ""),
                    "title": str(doc.get("title") or doc.get("group_id") or ""),
                }
            )
        return out

    # -- shaping ----------------------------------------------------------------------------------

    def _world_view(self, world: WorldState | None) -> dict[str, Any] | None:
        if world is None:
            return None
        cal = world.calendar
        places = []
        for pid, place in self.town.places.items():
            state = world.places.get(pid)
            hours = f"{place.hours[0]}–{place.hours[1]}" if place.hours else "全天"
            places.append(
                {
                    "id": pid,
                    "name": place.name,
                    "open": state.open if state else True,
                    "hours": hours,
                }
            )
        return {
            "time": world.time.astimezone(self.tz),
            "weekday": cal.weekday if cal else "",
            "period": cal.period if cal else "",
            "season": cal.season if cal else "",
            "school_day": cal.school_day if cal else None,
            "holiday": cal.holiday if cal else None,
            "weather": f"{world.weather.type} · {world.weather.temperature}"
            if world.weather
            else "未知",
            "paused": world.paused,
            "places": places,
        }

    def _character_view(self, c: CharacterState | None, now: datetime) -> dict[str, Any] | None:
        if c is None:
            return None
        running = None
        if c.running is not None:
            r = c.running
            total = max(1.0, (r.ends_at - r.started_at).total_seconds())
            done = min(1.0, max(0.0, (now - r.started_at).total_seconds() / total))
            running = {
                "name": r.name,
                "action_id": r.action_id,
                "reason": r.reason,
                "place": self.town.place_name(r.place),
                "started": r.started_at.astimezone(self.tz),
                "ends": r.ends_at.astimezone(self.tz),
                "progress": round(done * 100),
                "left_minutes": max(0, round((r.ends_at - now).total_seconds() / 60)),
                "decided_by": r.decided_by,
                "summary": r.start_summary,
            }
        return {
            "location": self.town.place_name(c.location),
            "location_id": c.location,
            "stamina": round(c.stamina),
            "satiety": round(c.satiety),
            "mood": round(c.mood),
            "money": c.money,
            "inventory": dict(sorted(c.inventory.items())),
            "asleep": c.asleep,
            "running": running,
            "last_event": c.last_event,
            "blocked_reason": c.blocked_reason,
        }

    def _episode_view(self, e: Episode) -> dict[str, Any]:
        """One line of the timeline: from its record, or from its summary alone when the record
        does not fit (warned once, `Episode.record`)."""
        d = e.record()
        b = d if isinstance(d, BehaviorData) else None
        reason = d.reason if d is not None else None
        place = b.place if b else d.place if isinstance(d, ConversationData) else None
        return {
            "id": e.id,
            "type": e.type,
            "start": e.time.astimezone(self.tz),
            "end": e.end_time.astimezone(self.tz) if e.end_time else None,
            "status": e.status,
            "name": (b.name if b else "") or e.summary,
            "reason": reason or "",
            "result": b.result if b else "",
            "summary": e.summary,
            "category": svg.category_of(self._tags(b.action if b else ""))
            if e.type == "behavior"
            else None,
            "place": self.town.place_name(place) if place else "",
        }

    def _tags(self, action_id: str) -> frozenset[str]:
        if self.catalogue is None:
            return frozenset()
        action = self.catalogue.actions.get(action_id)
        return action.tags if action else frozenset()

    def _charts(
        self, week: list[Episode], character: CharacterState | None, now: datetime, start: datetime
    ) -> dict[str, str]:
        points: list[svg.Point] = []
        spans: list[svg.Span] = []
        for e in week:
            d = e.behavior()
            after = d.stats_after if d else None
            if e.status == "completed" and after is not None:
                stats = {k: float(v) for k, v in after.items() if isinstance(v, int | float)}
                points.append(svg.Point((e.end_time or e.time).astimezone(self.tz), stats))
            end = e.end_time or now
            if e.status == "running":
                end = min(end, now)
            spans.append(
                svg.Span(
                    e.time.astimezone(self.tz),
                    end.astimezone(self.tz),
                    svg.category_of(self._tags(d.action if d else "")),
                    d.name if d else e.summary,
                )
            )
        if character is not None:
            points.append(svg.Point(now, character.stats()))
        points.sort(key=lambda p: p.time)
        end = start + timedelta(days=CHART_DAYS)
        days = [start + timedelta(days=n) for n in range(CHART_DAYS)]
        return {
            "needs": svg.line_chart(
                points,
                start,
                end,
                ("stamina", "satiety", "mood"),
                title="最近七天的体力、饱腹、心情",
            ),
            "money": svg.line_chart(
                points,
                start,
                end,
                ("money",),
                low=None,
                high=None,
                height=80,
                title="最近七天的金币",
            ),
            "strip": svg.day_strip(spans, days),
        }


def _plans_view(plans: PlanState | None) -> list[dict[str, Any]]:
    """Her plans for the page: [{"title": 长期计划, "items": [...]}, {"title": 短期计划, ...}]."""
    if plans is None:
        return []
    out = []
    if plans.long_term is not None:
        out.append({"title": "长期计划", "items": [plans.long_term.title]})
    if plans.short_term:
        out.append({"title": "短期计划", "items": [p.title for p in plans.short_term]})
    return out


PURPOSE_LABELS = {
    "decide": "决策",
    "chat": "聊天",
    "summary": "摘要",
    "diary": "日记",
    "distill": "记忆提炼",
    "proactive": "主动分享",
    "converse": "角色间对话",
}
"""How the page names the purposes of LLM calls (`llm.PURPOSES`)."""


def _llm_view(day: str, usage: list[str | None], fallbacks: int, decisions: int) -> dict[str, Any]:
    """Today's LLM use: totals, by purpose, and calls per decision (``usage``: the HMGET of the
    day's tokens, calls and `usage_fields`)."""
    by_purpose = usage_of_day(day, usage[2:])
    decide = by_purpose.get("decide")
    return {
        "tokens": int(usage[0] or 0),
        "calls": int(usage[1] or 0),
        "fallbacks": fallbacks,
        "failed_calls": sum(u.failed for u in by_purpose.values()),
        "calls_per_decision": round(decide.calls / decisions, 2) if decide and decisions else None,
        "by_purpose": [
            {"purpose": p, "label": PURPOSE_LABELS.get(p, p), **vars(u)}
            for p, u in by_purpose.items()
        ],
    }
