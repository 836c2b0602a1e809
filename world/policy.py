"""Deciding what she does next: the decision shape, its validation, and the policy seam.

Every policy (llm, utility, scripted) returns a `Decision` built by `validate_decision`, so the
same rules hold whoever decides: the action must be one of the candidates, its parameters must
validate against its parameter model, and the duration must be sensible. A violation raises
`InvalidDecision` with a Chinese message that the LLM policy shows to the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from yuiju.characters import CharacterCard
from yuiju.world.action import Action, ActionContext
from yuiju.world.errors import InvalidDecision
from yuiju.world.randomness import UNSEEDED, Randomness
from yuiju.world.state import ShareIntent


class RawDecision(BaseModel):
    """The JSON a policy produces (the seed's shape, plus ``params`` for parameterised actions)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    action: str = Field(description="从可选行为中选择一个，填写它的名称")
    reason: str = Field(description="用第一人称简短说明为什么这样选", min_length=1, max_length=400)
    durationMinute: int | None = Field(None, description="仅对需要给出耗时的行为填写，单位分钟")
    params: dict[str, Any] | None = Field(None, description="仅对带参数的行为填写")
    planChanges: list[dict[str, Any]] | None = Field(None, description="计划变化，没有则为 null")
    proactiveShareIntent: ShareIntent | None = Field(
        None, description="这件事是否值得主动分享到群里；普通移动或发呆填 null"
    )


@dataclass(frozen=True, kw_only=True)
class Decision:
    action: Action
    reason: str
    params: BaseModel | None = None
    duration_minute: int | None = None
    plan_changes: list[dict[str, Any]] | None = None
    share_intent: ShareIntent | None = None
    decided_by: str = "unknown"


@dataclass(kw_only=True)
class DecisionRequest:
    ctx: ActionContext
    """A read-only view of the moment (do not mutate)."""
    candidates: Sequence[Action]
    today: Sequence[str] = ()
    """Today's landmarks before the last steps (meals, school, work...), one Chinese line each,
    oldest first (`world.day_record`)."""
    recent: Sequence[str] = ()
    """Her last steps, one Chinese line each, oldest first; the last with its reason."""
    card: CharacterCard | None = None
    """Who is deciding: prompts render from the card."""
    sociable: bool = False
    """Others live in her town: the prompt's catalogue lists the joint actions (never offered to
    a character who lives alone, so left out of her prompt)."""
    randomness: Randomness = UNSEEDED
    """Her town's randomness, as the engine hands it to her step: a policy draws from it
    (``randomness.derive(her id)`` for her own draws), never from a seed of its own."""
    extra: dict[str, Any] = field(default_factory=dict)


class Policy(Protocol):
    """Decides for one character."""

    name: str
    instant: bool
    """True: it decides in the engine's own time, with no I/O (the offline utility policy), so
    the engine steps characters due together in one batch (`StateStore.batched`). False (an LLM):
    each is stepped alone, nothing held while it thinks."""
    wants_recent: bool
    """Whether the request should carry her day so far and her last steps (`DecisionRequest.today`,
    ``recent``); False spares reading them from the history store (a policy that ignores them)."""

    async def decide(self, request: DecisionRequest) -> Decision:
        """Choose among ``request.candidates``; raise `PolicyFailed` if no usable decision."""
        ...


class PolicyFailed(Exception):
    """The policy could not produce a decision (after its own retries)."""


def find_candidate(candidates: Sequence[Action], key: str) -> Action | None:
    key = key.strip()
    return next((a for a in candidates if key in (a.name, a.id, a.label)), None)


def validate_decision(
    raw: RawDecision,
    candidates: Sequence[Action],
    decided_by: str,
    ctx: ActionContext | None = None,
) -> Decision:
    """Check a raw decision against the candidates; `InvalidDecision` says what to fix.

    Parameter models are validated with ``context={"ctx": ctx}``, so their validators can check
    the moment (is the item in her bag, can she afford it) and send a mistake back to the model.
    """
    action = find_candidate(candidates, raw.action)
    if action is None:
        names = "、".join(a.offered_as for a in candidates)
        raise InvalidDecision(f"「{raw.action}」不在可选行为里。只能从这些里选一个：{names}")
    params: BaseModel | None = None
    if action.params is not None:
        try:
            params = action.params.model_validate(raw.params or {}, context={"ctx": ctx})
        except ValidationError as exc:
            problems = "；".join(
                f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            raise InvalidDecision(f"「{action.name}」的 params 不正确：{problems}") from None
    if action.params is None and raw.params:
        raise InvalidDecision(f"「{action.name}」不需要 params，请填 null")
    duration = raw.durationMinute
    if duration is not None and not (1 <= duration <= 24 * 60):
        raise InvalidDecision(f"durationMinute 必须在 1 到 1440 之间，收到 {duration}")
    return Decision(
        action=action,
        reason=raw.reason.strip(),
        params=params,
        duration_minute=duration,
        plan_changes=raw.planChanges,
        share_intent=raw.proactiveShareIntent,
        decided_by=decided_by,
    )


def revalidate(
    decision: Decision, view: ActionContext, candidates: Sequence[Action]
) -> tuple[Decision, str | None]:
    """A decision made earlier, checked against the moment ``view`` (a decision off the step
    comes back seconds or world minutes after it was asked): the same decision with its action
    and params as they are now, and None; or why it no longer holds (in Chinese, for her log
    and her next prompt), when its action is no longer a candidate or its params no longer
    validate."""
    action = next((a for a in candidates if a.id == decision.action.id), None)
    if action is None:
        try:
            why = decision.action.why_not(view)
        except Exception:  # the action's own bug: candidates() reported it already
            why = None
        return decision, why or f"「{decision.action.name}」现在不在可选行为里"
    params = decision.params
    if action.params is not None and params is not None:
        try:
            params = action.params.model_validate(params.model_dump(), context={"ctx": view})
        except ValidationError as exc:
            problems = "；".join(e["msg"] for e in exc.errors(include_url=False))
            return decision, f"「{action.name}」的参数现在不成立：{problems}"
    return replace(decision, action=action, params=params), None
