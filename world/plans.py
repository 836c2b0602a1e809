"""Her plans: one long-term plan and ordered short-term plans, changed by her decisions.

A decision may carry ``planChanges``; the whole batch is checked on a copy with Yuiju's rules and
applied only if every change is valid. An invalid batch is rejected with its reason (shown to her
next decision) while the chosen action still runs. Plans live inside the character state in
Redis, so an action and its plan changes are saved in the same atomic write.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

Scope = Literal["longTerm", "shortTerm"]
ChangeType = Literal["created", "updated", "completed", "abandoned"]

MAX_SHORT_TERM = 5
"""Short-term plans are a short to-do list, not a diary."""


class PlanError(Exception):
    """A batch of plan changes breaks a rule; the message (Chinese) says which and why."""


PlanSource = Literal["llm", "system", "user"]


class PlanItem(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    id: str
    """Stable: a hash of scope and title."""
    title: str = Field(min_length=1, max_length=60)
    scope: Scope
    reason: str = ""
    source: PlanSource = "llm"
    created_at: AwareDatetime
    updated_at: AwareDatetime


class PlanState(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    long_term: PlanItem | None = None
    short_term: list[PlanItem] = Field(default_factory=list, max_length=MAX_SHORT_TERM)
    """Ordered: the first is the next thing to do."""

    def lines(self) -> list[str]:
        """Chinese lines for prompts and status."""
        out = [f"长期计划：{self.long_term.title}" if self.long_term else "长期计划：无"]
        if self.short_term:
            out += [f"短期计划{n}：{p.title}" for n, p in enumerate(self.short_term, 1)]
        else:
            out.append("短期计划：无")
        return out


class PlanChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: Scope
    changeType: ChangeType
    currentPlan: str | None = None
    nextPlan: str | None = None
    reason: str = ""


def plan_id(scope: str, title: str) -> str:
    return "plan_" + hashlib.sha1(f"{scope}|{title}".encode()).hexdigest()[:12]


def apply_plan_changes(
    state: PlanState,
    raw_changes: list[dict[str, object]],
    now: datetime,
    source: PlanSource = "llm",
) -> tuple[PlanState, list[PlanChange]]:
    """Apply a batch on a copy; `PlanError` if any change is invalid (nothing is applied then)."""
    try:
        changes = [PlanChange.model_validate(c) for c in raw_changes]
    except ValidationError as exc:
        problems = "；".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        raise PlanError(f"planChanges 格式不对：{problems}") from None
    new = state.model_copy(deep=True)
    for n, change in enumerate(changes, 1):
        where = f"第{n}条计划变更（{change.scope}/{change.changeType}）"
        current, nxt = (change.currentPlan or "").strip(), (change.nextPlan or "").strip()
        if change.changeType == "created":
            _create(new, change, nxt, current, where, now, source)
        elif change.changeType == "updated":
            _update(new, change, nxt, current, where, now)
        else:  # completed | abandoned
            if not current or nxt:
                raise PlanError(f"{where}：{change.changeType} 只填 currentPlan")
            _find(new, change.scope, current, where)
            if change.scope == "longTerm":
                new.long_term = None
            else:
                new.short_term = [p for p in new.short_term if p.title != current]
    return new, changes


def _create(
    new: PlanState,
    change: PlanChange,
    nxt: str,
    current: str,
    where: str,
    now: datetime,
    source: PlanSource,
) -> None:
    if current or not nxt:
        raise PlanError(f"{where}：created 只填 nextPlan，不填 currentPlan")
    item = PlanItem(
        id=plan_id(change.scope, nxt),
        title=nxt,
        scope=change.scope,
        reason=change.reason,
        source=source,
        created_at=now,
        updated_at=now,
    )
    if change.scope == "longTerm":
        if new.long_term is not None:
            raise PlanError(
                f"{where}：已经有长期计划「{new.long_term.title}」，请用 updated 或先 completed/abandoned"
            )
        new.long_term = item
        return
    if any(p.title == nxt for p in new.short_term):
        raise PlanError(f"{where}：短期计划「{nxt}」已经存在")
    if len(new.short_term) >= MAX_SHORT_TERM:
        raise PlanError(f"{where}：短期计划最多 {MAX_SHORT_TERM} 条，先完成或放弃一些")
    new.short_term.append(item)


def _update(
    new: PlanState, change: PlanChange, nxt: str, current: str, where: str, now: datetime
) -> None:
    if not current or not nxt or current == nxt:
        raise PlanError(f"{where}：updated 要同时填 currentPlan 和不同的 nextPlan")
    _find(new, change.scope, current, where)
    renamed = {
        "title": nxt,
        "id": plan_id(change.scope, nxt),
        "updated_at": now,
        "reason": change.reason,
    }
    if change.scope == "longTerm":
        assert new.long_term is not None
        new.long_term = new.long_term.model_copy(update=renamed)
        return
    if any(p.title == nxt for p in new.short_term):
        raise PlanError(f"{where}：短期计划「{nxt}」已经存在")
    new.short_term = [
        p.model_copy(update=renamed) if p.title == current else p for p in new.short_term
    ]


def _find(state: PlanState, scope: str, title: str, where: str) -> None:
    if scope == "longTerm":
        if state.long_term is None or state.long_term.title != title:
            have = state.long_term.title if state.long_term else "无"
            raise PlanError(f"{where}：没有长期计划「{title}」（现在是：{have}）")
    elif not any(p.title == title for p in state.short_term):
        have = "、".join(p.title for p in state.short_term) or "无"
        raise PlanError(f"{where}：没有短期计划「{title}」（现有：{have}）")
