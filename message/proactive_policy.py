"""The anti-spam policy of proactive posts: a pure function of one group's situation.

It runs before any LLM call, so a post that may not go out costs nothing. Every rule is a hard
guarantee, checked in this order (the first that blocks names the skip):

1. ``disabled``      the group is switched off (config, or an admin's switch in Redis);
2. ``unreachable``   the last post to it could not be sent and nobody has spoken there since;
3. ``asleep``        she is asleep: a sleeping girl does not post;
4. ``stale``         the event is older than ``max_event_age`` (e.g. handled after downtime);
5. ``quiet_hours``   local time is inside the group's quiet hours;
6. ``daily_cap``     she already posted ``daily_cap`` times there today;
7. ``unanswered``    no human has spoken since her last post: never a second post into silence;
8. ``backoff``       after ignored posts in a row (no human message within the reply window),
                     the minimum interval grows by ``backoff_factor`` per ignored post;
   ``min_interval``  otherwise the plain minimum interval since her last post;
9. ``active_conversation``  several people are talking right now: she does not cut in.

A forced post (an admin's command) skips the anti-spam rules (1, 2, 4-9), never rule 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from yuiju.config import ProactiveGroup
from yuiju.world.clock import in_window


@dataclass(frozen=True, kw_only=True)
class GroupSituation:
    """Everything the policy needs about one group at one moment."""

    now: datetime
    """World time of the decision (aware, in the town's zone)."""
    enabled: bool
    unreachable: bool = False
    """A send failed and no human spoke there since."""
    asleep: bool = False
    event_age: timedelta = timedelta(0)
    posts_today: int = 0
    """Her posts in this group since local midnight (sent, forced, or in flight)."""
    last_post_at: datetime | None = None
    last_post_answered: bool = True
    """A human spoke in the group after her last post (True when there was no post)."""
    ignored_streak: int = 0
    """Her latest answered posts in a row whose first human reply came after the reply window."""
    recent_human_times: tuple[datetime, ...] = field(default_factory=tuple)
    """Times of the group's latest human messages."""


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    code: str
    """'ok' or the rule that blocked (see the module docstring)."""
    reason: str
    """Chinese, for the outbox record and the admin."""


OK = Verdict(True, "ok", "可以发")


def effective_interval(settings: ProactiveGroup, ignored_streak: int) -> timedelta:
    """The minimum gap after her last post: backed off by the ignored posts in a row."""
    base = timedelta(minutes=settings.min_interval_minutes)
    if ignored_streak <= 0:
        return base
    backed = base * settings.backoff_factor**ignored_streak
    return max(base, min(backed, timedelta(hours=settings.max_backoff_hours)))


def in_quiet_hours(settings: ProactiveGroup, now: datetime) -> bool:
    if not settings.quiet_hours:
        return False
    start, _, end = settings.quiet_hours.partition("-")
    return start != end and in_window(now, start, end)


def check_policy(
    s: GroupSituation, settings: ProactiveGroup, *, max_event_age: timedelta, forced: bool = False
) -> Verdict:
    """Whether she may post into this group now; the first rule that blocks, else `OK`."""
    if s.asleep:
        return Verdict(False, "asleep", "她在睡觉")
    if forced:
        return OK
    if not s.enabled:
        return Verdict(False, "disabled", "这个群关闭了主动分享")
    if s.unreachable:
        return Verdict(False, "unreachable", "上次发不进这个群，之后还没有人在群里说话")
    if s.event_age > max_event_age:
        minutes = int(s.event_age.total_seconds() // 60)
        return Verdict(False, "stale", f"这件事已经过去 {minutes} 分钟，不再分享")
    if in_quiet_hours(settings, s.now):
        return Verdict(False, "quiet_hours", f"免打扰时段 {settings.quiet_hours}")
    if s.posts_today >= settings.daily_cap:
        return Verdict(
            False,
            "daily_cap",
            f"今天已经在这个群主动说了 {s.posts_today} 次（上限 {settings.daily_cap}）",
        )
    if s.last_post_at is not None:
        if not s.last_post_answered:
            return Verdict(False, "unanswered", "上一条主动消息还没有人回应")
        gap = s.now - s.last_post_at
        wait = effective_interval(settings, s.ignored_streak)
        if gap < wait:
            left = int((wait - gap).total_seconds() // 60) + 1
            if s.ignored_streak > 0:
                return Verdict(
                    False,
                    "backoff",
                    f"最近 {s.ignored_streak} 条主动消息没人及时回应，"
                    f"间隔放宽到 {wait}，还要等 {left} 分钟",
                )
            return Verdict(
                False, "min_interval", f"离上一条主动消息不到 {wait}，还要等 {left} 分钟"
            )
    window_start = s.now - timedelta(minutes=settings.active_window_minutes)
    active = sum(1 for t in s.recent_human_times if t >= window_start)
    if active >= settings.active_messages:
        return Verdict(
            False,
            "active_conversation",
            f"群里最近 {settings.active_window_minutes} 分钟有 {active} 条消息，正在聊天，不插话",
        )
    return OK
