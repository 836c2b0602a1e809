"""The JSON schema of a decision: a union over this moment's candidates, or one for the whole
catalogue that never changes.

Each candidate belongs to one branch keyed by ``action``: actions without a choice share one
branch, actions that ask a duration share another, and an action with parameters has its own
branch whose ``params`` are the parameter model's schema narrowed by the action's `choices`
(what she owns, what the shop sells that she can afford, right now). A model that follows the
schema can therefore only answer with something possible; `validate_decision` still checks the
answer against the moment.

Two forms come out (`llm.JsonSchema`): ``schema``, self-contained branches that every grammar
engine compiles (the provider enforces it in ``json_schema`` mode), and ``prompt``, the same
choices in a compact form for ``json_object`` mode, shown whole after the moment's description:
a few hundred characters (`PROMPT_BASE` says what it leaves to the prose rules).

The moment's union changes at almost every decision, and some providers put the schema in the
prompt: OpenAI makes the structured-output schema the prefix of the system message, so a schema
that changes leaves nothing of the prompt to its cache. `stable_decision_schema` is the other
choice: a decision's shape only, the same bytes at every decision; the moment's options and
each offered action's narrowed params are then said in the prompt (`moment_params`) and checked
after, as always. `[llm]
decision_schema` chooses (`LlmConfig.resolved_decision_schema`; bench/llm_bench.py measures both).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from yuiju.llm import JsonSchema
from yuiju.world.action import Action, ActionContext

REASON = {"type": "string", "minLength": 1, "maxLength": 400}
"""Why she chose it, first person (matches `RawDecision.reason`)."""

PLAN_CHANGES = {
    "anyOf": [
        {"type": "null"},
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "scope": {"enum": ["longTerm", "shortTerm"]},
                    "changeType": {"enum": ["created", "updated", "completed", "abandoned"]},
                    "currentPlan": {"type": ["string", "null"]},
                    "nextPlan": {"type": ["string", "null"]},
                    "reason": {"type": "string"},
                },
                "required": ["scope", "changeType", "currentPlan", "nextPlan", "reason"],
                "additionalProperties": False,
            },
        },
    ]
}
"""`world.plans.PlanChange` as the model writes it (null: no change)."""

SHARE_INTENT = {
    "type": ["object", "null"],
    "properties": {"shouldShare": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["shouldShare"],
    "additionalProperties": False,
}
"""`world.state.ShareIntent` (null: nothing worth sharing)."""

SHARED = {"reason": REASON, "planChanges": PLAN_CHANGES, "share": SHARE_INTENT}
"""Definitions every branch refers to (the provider form)."""

NULL = {"type": "null"}


def _decision(
    reason: dict[str, Any], plan_changes: dict[str, Any], share: dict[str, Any], **closed: Any
) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "action": {"type": "string"},
            "reason": reason,
            "durationMinute": {"type": ["integer", "null"]},
            "params": {"type": ["object", "null"]},
            "planChanges": plan_changes,
            "proactiveShareIntent": share,
        },
        "required": ["action", "reason"],
        **closed,
    }


DECISION = _decision(
    {"$ref": "#/$defs/reason"},
    {"$ref": "#/$defs/planChanges"},
    {"$ref": "#/$defs/share"},
    additionalProperties=False,
)
"""Any decision; the moment's union narrows ``action``, ``durationMinute`` and ``params``."""

PROMPT_BASE = {"properties": {"reason": {"type": "string"}}, "required": ["action", "reason"]}
"""What the prompt form says of every decision beyond the moment's branches. Much shorter than
`DECISION`: the branches name ``durationMinute`` and ``params`` where an action takes them, and
the rules in the system prompt spell out the rest (plan changes and their five keys, the share
intent and its two); validation checks them either way."""


def decision_schema(candidates: Sequence[Action], ctx: ActionContext | None = None) -> JsonSchema:
    """The decision schema for ``candidates`` at ``ctx`` (without ``ctx``, params are only
    constrained by their models)."""
    plain: list[str] = []
    timed: list[str] = []
    tiers: set[int] = set()
    with_params: list[dict[str, Any]] = []
    for action in candidates:
        if action.params is not None:
            params = params_schema(action, ctx)
            if params is not None:
                with_params.append(_branch({"const": action.offered_as}, NULL, params, "params"))
        elif action.asks_duration:
            if action.offered_as not in timed:  # moves from different places share a label
                timed.append(action.offered_as)
            tiers.update(action.duration.tiers)  # type: ignore[union-attr]
        elif action.offered_as not in plain:
            plain.append(action.offered_as)
    # One branch for every action that asks a duration, offering every tier any of them has:
    # an answer between an action's tiers is snapped up to the next one (`choose_minutes`), and
    # the catalogue tells each action's own tiers. One branch per tier set would be exact but
    # cost a few hundred characters more in every json_object prompt.
    branches = [
        *([_branch({"enum": plain}, NULL, NULL)] if plain else []),
        *(
            [_branch({"enum": timed}, {"enum": sorted(tiers)}, NULL, "durationMinute")]
            if timed
            else []
        ),
        *with_params,
    ]
    prompt = {**PROMPT_BASE, "anyOf": [_lean(b) for b in branches]}
    return JsonSchema(name="decision", schema=_self_contained(branches), prompt=prompt)


STABLE_PROMPT = {
    "properties": {
        "action": {"type": "string"},
        "reason": {"type": "string"},
        "durationMinute": {"type": ["integer", "null"]},
        "params": {"type": ["object", "null"]},
    },
    "required": ["action", "reason"],
}
"""The stable schema as the prompt shows it: the shape of every decision; which actions, which
durations and which params are possible now, the moment says (options, `moment_params`), the
catalogue says each action's durations, and the rules the rest."""


def stable_decision_schema() -> JsonSchema:
    """One decision schema for every moment, the same bytes at every decision (``stable``): the
    shape of a decision (`DECISION`), nothing of the moment. Which actions are possible now, and
    their params narrowed to now, go into the prompt instead (the options line and
    `moment_params`); the catalogue in the system prompt gives each action's durations; the
    answer is validated against the moment either way. Every token of it is in every prompt
    where the provider counts the schema (cached, but the daily budget counts it in full), so it
    holds no enumeration of the catalogue: a union over all of it was several times the tokens
    and told nothing the prompt does not."""
    return JsonSchema(
        name="decision", schema={"$defs": SHARED, **DECISION}, prompt=STABLE_PROMPT, stable=True
    )


def offered(candidates: Sequence[Action], ctx: ActionContext | None) -> list[Action]:
    """The candidates an answer can name: without those whose params have no possible value
    now (nothing to eat in the bag, nothing affordable), which no schema of the moment offers."""
    return [a for a in candidates if a.params is None or params_schema(a, ctx) is not None]


def moment_params(candidates: Sequence[Action], ctx: ActionContext) -> list[tuple[str, str]]:
    """For a stable schema, what the moment's schema would have said of params: each offered
    action's params narrowed to this moment (what she owns, what she can afford), as compact
    JSON Schema, by the name the prompt offers it under."""
    out = []
    for action in candidates:
        if action.params is None:
            continue
        params = params_schema(action, ctx)
        if params is not None:
            out.append(
                (action.offered_as, json.dumps(params, ensure_ascii=False, separators=(",", ":")))
            )
    return out


def _branch(
    action: dict[str, Any], duration: dict[str, Any], params: dict[str, Any], *required: str
) -> dict[str, Any]:
    """What one branch says beyond `DECISION`: which actions, and their duration and params."""
    branch: dict[str, Any] = {
        "properties": {"action": action, "durationMinute": duration, "params": params}
    }
    if required:
        branch["required"] = list(required)
    return branch


def _lean(branch: dict[str, Any]) -> dict[str, Any]:
    """A branch as the prompt shows it, every character of which is in each json_object prompt:
    without the nulls (the rules say "用不到的填 null", and a stray duration or empty params on an
    action without them is harmless: validation ignores it) and without ``"type": "object"``
    beside ``properties``, which says it already."""
    properties = {}
    for key, value in branch["properties"].items():
        if value == NULL:
            continue
        if "properties" in value and value.get("type") == "object":
            value = {k: v for k, v in value.items() if k != "type"}
        properties[key] = value
    return {**branch, "properties": properties}


def _self_contained(branches: list[dict[str, Any]]) -> dict[str, Any]:
    """Each branch a whole object schema with `DECISION` merged in: no ``$ref`` next to other
    keywords and no union beside properties, which several grammar engines (llama.cpp's among
    them) ignore."""
    expanded = []
    for branch in branches:
        properties = dict(DECISION["properties"])
        properties.update(branch["properties"])  # each narrows what DECISION allows there
        expanded.append(
            {
                **DECISION,
                "properties": properties,
                "required": [*DECISION["required"], *branch.get("required", [])],
            }
        )
    return {"$defs": SHARED, "anyOf": expanded}


# Keywords that bound from above or below: narrowing keeps the tighter one.
_UPPER = ("maximum", "maxItems", "maxLength")
_LOWER = ("minimum", "minItems", "minLength")


def params_schema(action: Action, ctx: ActionContext | None) -> dict[str, Any] | None:
    """The parameter model's schema narrowed by the action's choices at ``ctx``, without titles,
    descriptions and defaults (what the field names and choices say is enough, and every
    character of it is in each json_object prompt); None when no choice is possible now."""
    assert action.params is not None
    schema: dict[str, Any] = _bare(action.params.model_json_schema())
    if ctx is None or action.choices is None:
        return schema
    for field, keywords in action.choices(ctx).items():
        prop = schema["properties"].get(field)
        if prop is None:
            raise ValueError(
                f"action {action.id!r}: choices name {field!r}, which is not a field of "
                f"{action.params.__name__}; use one of {sorted(schema['properties'])}"
            )
        schema["properties"][field] = _narrow(prop, keywords)
    for prop in schema["properties"].values():
        if prop.get("enum") == [] or (
            prop.get("items", {}).get("enum") == [] and prop.get("minItems", 0) > 0
        ):
            return None
        if prop.get("minItems", 0) > prop.get("maxItems", prop.get("minItems", 0)):
            return None
    return schema


def _narrow(prop: dict[str, Any], keywords: dict[str, Any]) -> dict[str, Any]:
    out = dict(prop)
    for key, value in keywords.items():
        if key in _UPPER and key in out:
            out[key] = min(out[key], value)
        elif key in _LOWER and key in out:
            out[key] = max(out[key], value)
        elif key == "items" and isinstance(out.get("items"), dict):
            out["items"] = _narrow(out["items"], value)
        else:
            out[key] = value
    if "enum" in out or "const" in out:  # the values say it all
        out.pop("type", None)
    return out


def _bare(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """``schema`` without annotations, nested models (``$defs``) inlined."""
    if isinstance(schema, list):
        return [_bare(v, defs) for v in schema]
    if not isinstance(schema, dict):
        return schema
    defs = {**(defs or {}), **schema.get("$defs", {})}
    if "$ref" in schema:
        return _bare(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    out = {}
    for key, value in schema.items():
        if key in ("title", "description", "default", "$defs"):
            continue
        if key == "properties":  # field names, not keywords: keep them all
            out[key] = {name: _bare(prop, defs) for name, prop in value.items()}
        else:
            out[key] = _bare(value, defs)
    return out
