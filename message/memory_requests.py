"""A person's or a group's memories as governance sees them (`memory.governance.Subject`): every
linked account, and the forget request that goes through the world (`ForgetPerson`), shared by
`yuiju memory forget` and the chat's ``/memory`` command."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Literal

from yuiju.memory.governance import Subject
from yuiju.message.model import legacy_forms, qualify, unique
from yuiju.message.people import People
from yuiju.world.commands import ForgetPerson


async def subject_of(people: People, kind: Literal["user", "group"], raw_id: str) -> Subject:
    """The subject ``raw_id`` names: a person with every account linked to theirs (and the plain
    QQ numbers stored before ids were qualified), or a group. A bad id raises ValueError."""
    if kind == "group":
        group = qualify(raw_id)
        return Subject(kind="group", id=group, ids=tuple(legacy_forms(group)))
    person = await people.person(qualify(raw_id))
    return Subject(kind="user", id=person.id, ids=tuple(unique([person.id, *person.scopes])))


def forget_command(subject: Subject, names: Sequence[str], requested_by: str) -> ForgetPerson:
    """The world command that forgets ``subject``; its ``request_id`` names the audit entry."""
    return ForgetPerson(
        subject=subject.kind,
        id=subject.id,
        ids=list(subject.ids),
        names=list(names)[:50],
        requested_by=requested_by,
        request_id=f"forget_{uuid.uuid4().hex[:16]}",
    )
