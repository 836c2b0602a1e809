"""The LLM policy: render the decision prompt, ask for the decision JSON, validate, retry.

The JSON schema's ``action`` is an enum of the candidates' names, so a provider with
json_schema support cannot even answer with something else; for ``json_object`` providers the
same schema goes into the prompt and `validate_decision` checks it here. Every mistake goes back
to the model with the reason (``ask_structured``). After the last attempt, or when the daily
token budget is spent, it raises `PolicyFailed` and the engine falls back to the utility policy.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from jinja2 import Environment, PackageLoader, StrictUndefined

from characters import CharacterCard
from llm import ChatModel, JsonSchema, RetryWithFeedback, StructuredOutputFailed, ask_structured
from llm.structured import Attempt
from world.action import ActionContext
from world.errors import InvalidDecision
from world.policy import (
    Decision,
    DecisionRequest,
    PolicyFailed,
    RawDecision,
    decision_schema,
    validate_decision,
)

log = logging.getLogger(__name__)

PROMPTS = Environment(
    loader=PackageLoader("world", "prompts"),
    undefined=StrictUndefined,
    autoescape=False,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)

UsageSink = Callable[[datetime, list[Attempt]], Awaitable[None]]
"""Records every attempt's tokens and latency (the ledger)."""
BudgetCheck = Callable[[datetime], Awaitable[bool]]
"""True while today's token budget allows another call."""


DEFAULT_CARD = CharacterCard(id="someone", name="她", persona="一个生活在羽浦町的人。")
"""Used when a request carries no card (tests, tools)."""


def _place_line(ctx: ActionContext) -> str:
    place = ctx.town.places.get(ctx.character.location)
    if place is None or place.area == place.name:
        return ctx.place_name
    return f"{place.area}-{place.name}"


def render_decision_prompt(request: DecisionRequest) -> str:
    ctx = request.ctx
    weather = ctx.world.weather
    return PROMPTS.get_template("decide.md.j2").render(
        card=request.card or DEFAULT_CARD,
        last_event=ctx.character.last_event,
        now=ctx.now,
        calendar=ctx.world.calendar,
        weather=f"{weather.type} / {weather.temperature}" if weather else "未知",
        place=_place_line(ctx),
        character=ctx.character,
        recent=list(request.recent),
        candidates=list(request.candidates),
    )


class LLMPolicy:
    name = "llm"

    def __init__(
        self,
        model: ChatModel,
        *,
        max_attempts: int = 3,
        temperature: float | None = None,
        record_usage: UsageSink | None = None,
        budget_allows: BudgetCheck | None = None,
    ) -> None:
        self.model = model
        self.max_attempts = max_attempts
        self.temperature = temperature
        self.record_usage = record_usage
        self.budget_allows = budget_allows
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.invalid = 0
        """Attempts whose answer was rejected (bad JSON, unknown action, bad params)."""

    async def _account(self, now: datetime, attempts: list[Attempt]) -> None:
        self.calls += len(attempts)
        for attempt in attempts:
            if attempt.result is not None:
                self.prompt_tokens += attempt.result.prompt_tokens
                self.completion_tokens += attempt.result.completion_tokens
            if attempt.error is not None and attempt.raw is not None:
                self.invalid += 1
        if self.record_usage is not None:
            await self.record_usage(now, attempts)

    async def decide(self, request: DecisionRequest) -> Decision:
        now = request.ctx.now
        if self.budget_allows is not None and not await self.budget_allows(now):
            raise PolicyFailed("today's LLM token budget is spent")
        candidates = request.candidates
        messages = [
            {"role": "system", "content": "你是一个生活在羽浦町的角色，只输出 JSON。"},
            {"role": "user", "content": render_decision_prompt(request)},
        ]

        def parse(text: str) -> Decision:
            raw = RawDecision.model_validate_json(text)
            try:
                return validate_decision(raw, candidates, self.name, request.ctx)
            except InvalidDecision as exc:
                raise RetryWithFeedback(str(exc)) from None

        try:
            outcome = await ask_structured(
                self.model,
                messages,
                parse,
                json_schema=JsonSchema(name="decision", schema=decision_schema(candidates)),
                max_attempts=self.max_attempts,
                temperature=self.temperature,
            )
        except StructuredOutputFailed as exc:
            await self._account(now, exc.attempts)
            raise PolicyFailed(str(exc)) from exc
        await self._account(now, outcome.attempts)
        return outcome.value
