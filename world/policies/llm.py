"""The LLM policy: render the decision prompt, ask for the decision JSON, validate, retry.

The prompt is laid out for providers' prompt caches, which reuse the longest unchanged prefix:
the system message (who she is, the town, the whole action catalogue and the rules) is
byte-stable for a character, and the user message describes the moment, ordered from what
changes least (plans, the day, today's landmarks) to what changes at every decision (the last
steps, the time, her stats, the options).

Every word of it is paid for at every decision, 30–80 times a day, cached or not: the catalogue
gives each action's effects and durations and at most a price range, a price list is shown only
where its action is offered (`Action.menu`), a move is offered by where it goes (`Action.label`),
and her day is told by its landmarks and last two steps (`world.day_record`).

The JSON schema (`world.decision_schema`) is either a union over this moment's candidates, so a
model that follows it can only answer with something possible, or (``schema="stable"``) one
schema for the whole catalogue, the same bytes at every decision for providers that cache the
schema with the prompt, with the moment's options and narrowed params said in the prompt.
Either way `validate_decision` checks the answer, and every mistake goes back to the model with
the reason (``ask_structured``). After the last attempt, or when the daily token budget is
spent, it raises `PolicyFailed` and the engine falls back to the utility policy.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Literal

from jinja2 import Environment, PackageLoader, StrictUndefined

from yuiju.characters import CharacterCard
from yuiju.llm import (
    ChatMessage,
    ChatModel,
    RetryWithFeedback,
    StructuredOutputFailed,
    ask_structured,
)
from yuiju.llm.structured import Attempt
from yuiju.world.action import Action, ActionContext
from yuiju.world.decision_schema import (
    decision_schema,
    moment_params,
    offered,
    stable_decision_schema,
)
from yuiju.world.errors import InvalidDecision
from yuiju.world.policy import (
    Decision,
    DecisionRequest,
    PolicyFailed,
    RawDecision,
    validate_decision,
)
from yuiju.world.social import company_line
from yuiju.world.town import Town

log = logging.getLogger(__name__)

PROMPTS = Environment(
    loader=PackageLoader("yuiju.world", "prompts"),
    undefined=StrictUndefined,
    autoescape=False,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)

BudgetCheck = Callable[[datetime], Awaitable[bool]]
"""True while today's token budget allows another call."""

PURPOSE = "decide"
"""The purpose of every call this policy makes (usage accounting and ``max_tokens`` bounds)."""

DEFAULT_CARD = CharacterCard(id="someone", name="她", persona="一个生活在羽浦町的人。")
"""Used when a request carries no card (tests, tools)."""


def _place_line(ctx: ActionContext) -> str:
    place = ctx.town.places.get(ctx.character.location)
    if place is None or place.area == place.name:
        return ctx.place_name
    return f"{place.area}-{place.name}"


def catalogue_sections(actions: Sequence[Action], town: Town) -> list[tuple[str, list[Action]]]:
    """The catalogue by place, for the system prompt: actions possible anywhere first, then each
    place in town order, with its opening hours. Movements along the town's links are left out:
    the route line in the prompt describes them, and each one's name says where it goes."""
    by_place: dict[str | None, list[Action]] = {}
    for action in actions:
        if (
            action.moves_to is not None
            and action.at is not None
            and town.link(action.at, action.moves_to)
        ):
            continue
        by_place.setdefault(action.at, []).append(action)
    order = [
        None,
        *town.places,
        *sorted(p for p in by_place if p is not None and p not in town.places),
    ]
    return [
        ("随处" if at is None else _place_with_hours(town, at), by_place[at])
        for at in order
        if at in by_place
    ]


def _place_with_hours(town: Town, place_id: str) -> str:
    place = town.places.get(place_id)
    hours = f"（{place.hours[0]}–{place.hours[1]}）" if place is not None and place.hours else ""
    return f"{town.place_name(place_id)}{hours}"


def routes_line(town: Town) -> str:
    """How she gets around, in one line: the moves' names say where they go, so only the range
    of walking times and the fares are spelled out."""
    walks = [link.minutes for link in town.links if not link.fare]
    fares = [
        f"{town.place_name(link.a)}和{town.place_name(link.b)}之间坐电车{link.minutes}分钟、车费{link.fare}"
        for link in town.links
        if link.fare
    ]
    line = f"相邻地点之间走路{min(walks)}–{max(walks)}分钟，消耗少量体力和饱腹" if walks else ""
    return "；".join([line, *fares]) + "。"


def render_system_prompt(card: CharacterCard, actions: Sequence[Action], town: Town) -> str:
    """The stable part: the same bytes for every decision of this character."""
    # Likes the persona already names would be said twice in every prompt.
    likes = [like for like in card.likes if like not in card.persona]
    return PROMPTS.get_template("decide_system.md.j2").render(
        card=card,
        likes=likes,
        town=town,
        catalogue=catalogue_sections(actions, town),
        routes=routes_line(town),
    )


def menus(request: DecisionRequest) -> list[tuple[str, str]]:
    """What the candidates offer right now with prices (`Action.menu`), by action name; a menu
    that fails is left out (the action can still be chosen: its params are in the schema)."""
    out = []
    for action in request.candidates:
        if action.menu is None:
            continue
        try:
            text = action.menu(request.ctx)
        except Exception as exc:  # an author's bug: `yuiju actions check` finds it before this
            log.warning(
                "action %r: its menu failed (%s: %s); the prompt goes without it",
                action.id,
                type(exc).__name__,
                exc,
            )
            continue
        if text:
            out.append((action.offered_as, text))
    return out


def render_moment_prompt(
    request: DecisionRequest, *, list_options: bool = True, state_params: bool = False
) -> str:
    """The moment; ``list_options=False`` leaves out the candidates' names when the schema in
    the prompt lists them anyway (``json_object`` mode with the moment's schema);
    ``state_params`` says what params each offered action takes now (with a stable schema,
    which does not)."""
    ctx = request.ctx
    weather = ctx.world.weather
    return PROMPTS.get_template("decide_moment.md.j2").render(
        last_event=ctx.character.last_event,
        now=ctx.now,
        calendar=ctx.world.calendar,
        weather=f"{weather.type}，{weather.temperature}" if weather else "未知",
        place=_place_line(ctx),
        character=ctx.character,
        today=list(request.today),
        recent=list(request.recent),
        options=[a.offered_as for a in offered(request.candidates, ctx)] if list_options else [],
        params=moment_params(request.candidates, ctx) if state_params else [],
        menus=menus(request),
        company=company_line(ctx.company),
        appointments=[a.line(ctx.town, ctx.now) for a in ctx.character.social.planned()],
        notes=[n.line(ctx.town, ctx.now) for n in ctx.character.social.notes_now(ctx.now)],
    )


class LLMPolicy:
    name = "llm"
    instant = False
    """A model call takes seconds: the engine steps each character alone (`world.policy.Policy`)."""
    wants_recent = True
    """The prompt shows her day so far and her last steps."""

    def __init__(
        self,
        model: ChatModel,
        *,
        actions: Sequence[Action] | None = None,
        schema_in_prompt: bool = False,
        schema: Literal["moment", "stable"] = "moment",
        max_attempts: int = 3,
        temperature: float | None = None,
        budget_allows: BudgetCheck | None = None,
    ) -> None:
        self.model = model
        if actions is None:
            from yuiju.world.loader import load_actions

            actions = list(load_actions())
        self.actions = list(actions)
        """The whole catalogue, described once in the stable system prompt."""
        self.schema_in_prompt = schema_in_prompt
        """The model shows the schema in the prompt (``llm.output_mode = "json_object"``), so the
        moment need not list the candidates' names a second time (with the moment's schema)."""
        self.schema = schema
        """'moment': a union over this moment's candidates; 'stable': one for the whole
        catalogue, the same bytes at every decision (``[llm] decision_schema``)."""
        self._stable = stable_decision_schema() if schema == "stable" else None
        self.max_attempts = max_attempts
        self.temperature = temperature
        self.budget_allows = budget_allows
        self._system: dict[tuple[str, str, bool], str] = {}
        self.decisions = 0
        """Decisions for which a request was sent."""
        self.first_attempt_ok = 0
        """Decisions accepted at the first attempt."""
        self.calls = 0
        """Requests sent (attempts)."""
        self.invalid = 0
        """Decisions with at least one rejected answer (bad JSON, unknown action, bad params),
        whether a later attempt put it right or not."""
        self.invalid_answers = 0
        """Answers rejected, over all decisions (each went back to the model with the reason)."""
        self.failed = 0
        """Decisions that ended in `PolicyFailed` (then the utility policy decided)."""

    def messages(self, request: DecisionRequest) -> list[ChatMessage]:
        """The decision prompt: the stable system message, then the moment."""
        card = request.card or DEFAULT_CARD
        key = (card.id, request.ctx.town.name, request.sociable)
        if key not in self._system:
            actions = [a for a in self.actions if request.sociable or a.joint is None]
            self._system[key] = render_system_prompt(card, actions, request.ctx.town)
        return [
            {"role": "system", "content": self._system[key]},
            {
                "role": "user",
                "content": render_moment_prompt(
                    request,
                    list_options=self._stable is not None or not self.schema_in_prompt,
                    state_params=self._stable is not None,
                ),
            },
        ]

    def _account(self, attempts: Sequence[Attempt]) -> None:
        self.calls += len(attempts)
        rejected = sum(1 for a in attempts if a.error is not None and a.raw is not None)
        self.invalid_answers += rejected
        self.invalid += rejected > 0
        if attempts:
            self.decisions += 1
            self.first_attempt_ok += attempts[0].error is None

    async def decide(self, request: DecisionRequest) -> Decision:
        now = request.ctx.now
        if self.budget_allows is not None and not await self.budget_allows(now):
            raise PolicyFailed("today's LLM token budget is spent")
        candidates = request.candidates

        def parse(text: str) -> Decision:
            raw = RawDecision.model_validate_json(text)
            try:
                return validate_decision(raw, candidates, self.name, request.ctx)
            except InvalidDecision as exc:
                raise RetryWithFeedback(str(exc)) from None

        try:
            outcome = await ask_structured(
                self.model,
                self.messages(request),
                parse,
                json_schema=self._stable or decision_schema(candidates, request.ctx),
                max_attempts=self.max_attempts,
                temperature=self.temperature,
                purpose=PURPOSE,
            )
        except StructuredOutputFailed as exc:
            self._account(exc.attempts)
            self.failed += 1
            raise PolicyFailed(str(exc)) from exc
        self._account(outcome.attempts)
        return outcome.value
