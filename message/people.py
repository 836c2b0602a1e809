"""One person, several accounts: an admin links ``qq:123`` and ``tg:456`` (``/link``) and her
memory of them is one. The first account of a link is the person (`canonical`): what the linked
accounts say is recorded under it, and recall and profiles read every account (`accounts`),
with the plain ids QQ accounts were stored under before platforms (`model.legacy_forms`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from yuiju.message.model import legacy_forms, qualify, unique
from yuiju.storage.keys import Keys
from yuiju.storage.redis import RedisClient


@dataclass(frozen=True)
class Person:
    """One person as her memory knows them: the first account of a link, and all of them."""

    id: str
    """The person (`People.canonical`): what the linked accounts say is remembered under it."""
    accounts: list[str]
    """Every account, the person first."""

    @property
    def scopes(self) -> list[str]:
        """Every id her memories of this person may be stored under: each account, and each QQ
        account's plain number (written before ids were qualified)."""
        return unique(f for a in self.accounts for f in legacy_forms(a))


class People:
    """The account links, in one Redis hash (account → person)."""

    def __init__(self, redis: RedisClient, keys: Keys) -> None:
        self.redis = redis
        self.key = keys.people_links

    async def canonical(self, person: str) -> str:
        """The person ``person`` belongs to (itself when not linked)."""
        found = await self.redis.hget(self.key, person)
        return _text(found) if found else person

    async def canonical_many(self, accounts: Iterable[str]) -> dict[str, str]:
        """`canonical` of each of ``accounts`` (one read)."""
        wanted = unique(accounts)
        if not wanted:
            return {}
        found = await self.redis.hmget(self.key, wanted)
        return {a: _text(p) if p else a for a, p in zip(wanted, found, strict=True)}

    async def person(self, account: str) -> Person:
        """The person ``account`` belongs to, with every account of theirs (one read)."""
        links = await self._links()
        head = links.get(account, account)
        return Person(head, unique([head, *(a for a, p in links.items() if p == head)]))

    async def accounts(self, person: str) -> list[str]:
        """Every account of the person ``person`` belongs to, the person first (one read)."""
        return (await self.person(person)).accounts

    async def scopes(self, person: str) -> list[str]:
        """`Person.scopes` of the person ``person`` belongs to (one read)."""
        return (await self.person(person)).scopes

    async def link(self, first: str, second: str) -> list[str]:
        """Make ``second`` (and whoever it was linked with) the same person as ``first``; the
        person's accounts. Ids are checked (`model.qualify`): a bad one raises ValueError."""
        first, second = qualify(first), qualify(second)
        if first == second:
            raise ValueError("link two different accounts, e.g. /link qq:123 tg:456")
        head = await self.canonical(first)
        moved = await self.accounts(second)
        await self.redis.hset(self.key, mapping={a: head for a in moved if a != head})
        return await self.accounts(head)

    async def unlink(self, person: str) -> bool:
        """Take ``person`` out of its link (a person others were linked to stays their person)."""
        return bool(await self.redis.hdel(self.key, qualify(person)))

    async def _links(self) -> dict[str, str]:
        raw = await self.redis.hgetall(self.key)
        return {_text(k): _text(v) for k, v in raw.items()}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def describe(accounts: Iterable[str]) -> str:
    return " = ".join(accounts)
