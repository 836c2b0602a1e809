"""What her state keeps about a person or a group, and the same state without it: pure functions
over `SocialState` for the ``forget_person`` world command and for an export.

A person is known by their ids (every linked account, `memory.governance.Subject.ids`) and the
names they went by: her relation to them, the news they told her, news about them (whoever passed
it on, and news whose words name them), appointments with them, notes they gave her, their gifts
and greetings of today. A group: what was arranged in it (appointments and notes made there).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any, Literal

from yuiju.world.relations import NewsItem, Party, SocialState
from yuiju.world.state import CharacterState

SubjectKind = Literal["user", "group"]


def _party_of(party: Party | None, ids: Collection[str]) -> bool:
    return party is not None and party.kind == "person" and party.id in ids


def _names(text: str, names: Sequence[str]) -> bool:
    return any(n and n in text for n in names)


def _news_of(item: NewsItem, ids: Collection[str], names: Sequence[str]) -> bool:
    return (
        _party_of(item.origin, ids)
        or _party_of(item.source, ids)
        or _party_of(item.about, ids)
        or _names(item.text, names)
    )


def kept_about(
    social: SocialState, kind: SubjectKind, ids: Collection[str], names: Sequence[str] = ()
) -> dict[str, list[Any]]:
    """What ``social`` keeps of them, by part (for an export), as JSON-ready data."""
    keys = {f"person:{i}" for i in ids}
    vias = {f"group:{i}" for i in ids}
    if kind == "group":
        return {
            "appointments": [
                a.model_dump(mode="json") for a in social.appointments if a.via in vias
            ],
            "notes": [n.model_dump(mode="json") for n in social.notes if n.via in vias],
        }
    return {
        "relations": [r.model_dump(mode="json") for k, r in social.relations.items() if k in keys],
        "news": [n.model_dump(mode="json") for n in social.news if _news_of(n, ids, names)],
        "appointments": [
            a.model_dump(mode="json")
            for a in social.appointments
            if _party_of(a.other, ids) or _party_of(a.asked_by, ids)
        ],
        "notes": [n.model_dump(mode="json") for n in social.notes if _party_of(n.by, ids)],
        "today": [k for k in [*social.met_today, *social.gifts_today] if k in keys],
    }


def forget_in(
    social: SocialState, kind: SubjectKind, ids: Collection[str], names: Sequence[str] = ()
) -> Counter[str]:
    """Take them out of ``social`` in place; how many of each part went."""
    gone: Counter[str] = Counter()
    keys = {f"person:{i}" for i in ids}
    vias = {f"group:{i}" for i in ids}
    if kind == "group":
        appointments = [a for a in social.appointments if a.via not in vias]
        notes = [n for n in social.notes if n.via not in vias]
    else:
        relations = {k: r for k, r in social.relations.items() if k not in keys}
        gone["relations"] = len(social.relations) - len(relations)
        social.relations = relations
        news = [n for n in social.news if not _news_of(n, ids, names)]
        gone["news"] = len(social.news) - len(news)
        social.news = news
        appointments = [
            a
            for a in social.appointments
            if not (_party_of(a.other, ids) or _party_of(a.asked_by, ids))
        ]
        notes = [n for n in social.notes if not _party_of(n.by, ids)]
        met = [k for k in social.met_today if k not in keys]
        gifts = [k for k in social.gifts_today if k not in keys]
        gone["today"] = len(social.met_today) - len(met) + len(social.gifts_today) - len(gifts)
        social.met_today, social.gifts_today = met, gifts
    gone["appointments"] = len(social.appointments) - len(appointments)
    gone["notes"] = len(social.notes) - len(notes)
    social.appointments, social.notes = appointments, notes
    return +gone


def forget_in_character(
    character: CharacterState, kind: SubjectKind, ids: Collection[str], names: Sequence[str] = ()
) -> Counter[str]:
    """`forget_in` her social state, and for a person also her plans and notes to herself that
    name them (a plan "和小明去海边", the last event, why a plan was refused, the reason of what
    she is doing now): taken out, not rewritten (they are hers to make again)."""
    gone = forget_in(character.social, kind, ids, names)
    if kind != "user":
        return gone
    wanted = [*names, *ids]
    plans = character.plans
    short = [p for p in plans.short_term if not _names(f"{p.title} {p.reason}", wanted)]
    long = plans.long_term
    if long is not None and _names(f"{long.title} {long.reason}", wanted):
        long = None
    gone["plans"] = len(plans.short_term) - len(short) + (plans.long_term is not long)
    if gone["plans"]:
        character.plans = plans.model_copy(update={"short_term": short, "long_term": long})
    for field in ("last_event", "plan_feedback"):
        if _names(getattr(character, field) or "", wanted):
            setattr(character, field, None)
            gone["notes_to_herself"] += 1
    if character.running is not None and _names(character.running.reason, wanted):
        character.running = character.running.model_copy(update={"reason": ""})
        gone["notes_to_herself"] += 1
    return +gone
