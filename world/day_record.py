"""Her day so far as the decision prompt tells it: what matters for deciding, in few words.

Two parts, from her behavior episodes of the last 24 hours:

- ``today``: the day's landmarks before the last steps (waking, meals, school, homework, work,
  shopping), each with its time, a stretch of an hour or more as a span. It only grows through
  the day, at its end, so a provider's prompt cache keeps it in the shared prefix; leisure, rest
  and moves are left out (her stats and the last steps carry them), so it stays a line or two.
- ``recent``: the last few steps as they happened, moves in a row as one route, the last with
  why she chose it: what she is in the middle of.

Every decision prompt carries both, so each word here is paid for at every decision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from yuiju.memory.episodes import Episode
from yuiju.world.action import Action
from yuiju.world.town import Town

LANDMARK_TAGS = frozenset({"wake", "meal", "school", "study", "work", "shopping"})
"""Kinds of action that shape her day: whether she has eaten, been to school, worked..."""
NOT_LANDMARKS = frozenset({"rest", "move"})
"""...unless it is also one of these (waiting in the classroom is a rest, not school)."""
RECENT_STEPS = 2
"""Steps told as they happened (a run of moves counts as one): what she is in the middle of.
The landmarks carry the rest of the day, and a third step costs about 10 tokens in every
decision prompt."""
REASON_CHARS = 40
"""The last step's reason is cut to this many characters (a model may write a long one)."""
SPAN_MINUTES = 60
"""A landmark lasting this long is told with its end time (08:00–12:00 在学校上课)."""


@dataclass(frozen=True)
class DayRecord:
    today: tuple[str, ...] = ()
    """Today's landmarks before the last steps, oldest first."""
    recent: tuple[str, ...] = ()
    """The last steps, oldest first; the last one with its reason."""


@dataclass
class _Step:
    start: datetime
    end: datetime
    episodes: list[Episode]
    action: Action | None
    route: list[str] | None = None
    """Place names along a run of moves (from the first origin to the last destination)."""


def day_record(
    episodes: Sequence[Episode],
    now: datetime,
    *,
    action_of: Callable[[str], Action | None],
    town: Town,
) -> DayRecord:
    """Her day from ``episodes`` (behavior episodes, oldest first) at ``now``; ``action_of``
    finds an action by id (an action no longer loaded is told by its recorded name)."""
    steps: list[_Step] = []
    for episode in episodes:
        record = episode.behavior()
        action = action_of(record.action) if record is not None else None
        end = episode.end_time or episode.time
        route = None
        if action is not None and action.moves_to is not None:
            destination = town.place_name(action.moves_to)
            last = steps[-1] if steps else None
            if last is not None and last.route is not None:  # still on her way: the route goes on
                last.route.append(destination)
                last.episodes.append(episode)
                last.end = end
                continue
            route = [town.place_name(action.at or ""), destination]
        steps.append(
            _Step(start=episode.time, end=end, episodes=[episode], action=action, route=route)
        )
    tail, earlier = steps[-RECENT_STEPS:], steps[:-RECENT_STEPS]
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    landmarks: list[_Step] = []
    for step in earlier:
        if step.start.astimezone(now.tzinfo) < day_start or not _is_landmark(step.action):
            continue
        if landmarks and landmarks[-1].action is step.action:  # the same again: one stretch
            landmarks[-1].end = step.end
        else:
            landmarks.append(
                _Step(start=step.start, end=step.end, episodes=step.episodes, action=step.action)
            )
    return DayRecord(
        today=tuple(_landmark_line(step, now) for step in landmarks),
        recent=tuple(
            _step_line(step, now, with_reason=n == len(tail) - 1) for n, step in enumerate(tail)
        ),
    )


def _is_landmark(action: Action | None) -> bool:
    return (
        action is not None and bool(action.tags & LANDMARK_TAGS) and not action.tags & NOT_LANDMARKS
    )


def _name(step: _Step) -> str:
    """The action's name; of an action no longer loaded, the recorded name; of a record that
    does not fit (warned, `Episode.record`), the episode's summary."""
    if step.action is not None:
        return step.action.name
    first = step.episodes[0]
    record = first.behavior()
    return record.name if record is not None else first.summary


def _landmark_line(step: _Step, now: datetime) -> str:
    start, end = step.start.astimezone(now.tzinfo), step.end.astimezone(now.tzinfo)
    when = (
        f"{start:%H:%M}–{end:%H:%M}"
        if end - start >= timedelta(minutes=SPAN_MINUTES)
        else f"{start:%H:%M}"
    )
    return f"{when} {_name(step)}"


def _step_line(step: _Step, now: datetime, *, with_reason: bool) -> str:
    start = step.start.astimezone(now.tzinfo)
    when = f"{start:%H:%M}" if start.date() == now.date() else f"昨天{start:%H:%M}"
    what = f"路线：{'→'.join(step.route)}" if step.route and len(step.episodes) > 1 else _name(step)
    line = f"{when} {what}"
    record = step.episodes[-1].behavior() if with_reason else None
    reason = record.reason.strip() if record is not None else ""
    if reason:
        line += f"（{reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS] + '…'}）"
    return line
