"""The history store seam: a small document store with a MongoDB and a SQLite backend.

History (episodes, diaries, chat messages, outbox, LLM ledger...) is written and read through
`HistoryStore`. Production uses MongoDB (`storage.mongo_history`); with no URL configured the
embedded default is SQLite under the data dir (`storage.sqlite_history`). One contract test
suite runs against both.

Every query is indexed in both backends: a query may only filter or sort on the fields its
`CollectionSpec` declares (``_id`` is always allowed), every declared field is part of a declared
index, and `HistoryStore.ensure` creates those indexes.

Documents are JSON-like: dicts with ``str`` keys (not starting with ``$``), lists, ``str``,
``int`` (64-bit), ``float``, ``bool``, ``None`` and timezone-aware ``datetime`` anywhere.
Datetimes come back in UTC, cut to the millisecond (BSON's precision) by both backends. Declared
fields hold scalars only.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from yuiju.storage.errors import InvalidDocument, UndeclaredField

__all__ = [
    "CollectionSpec",
    "Eq",
    "HistoryStore",
    "Query",
    "Ranges",
    "open_history",
]

Eq = Mapping[str, Any]
"""Field -> value; a list or tuple value means "one of" (MongoDB's ``$in``)."""
Ranges = Mapping[str, tuple[Any | None, Any | None]]
"""Field -> (low bound inclusive or None, high bound exclusive or None)."""

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_INT64 = (-(2**63), 2**63 - 1)
Scalar = str | int | float | bool | datetime | None
_SCALARS = (str, int, float, bool, datetime, type(None))


@dataclass(frozen=True, kw_only=True)
class CollectionSpec:
    """What a collection holds that queries may use. Declared at module top by its repository."""

    name: str
    """Collection (MongoDB) or table (SQLite) name: letters, digits and ``_``."""
    fields: tuple[str, ...] = ()
    """Top-level fields that queries may filter or sort on (``_id`` always may)."""
    indexes: tuple[tuple[str, ...], ...] = ()
    """Compound ascending indexes, fields in order, e.g. ``(("character_id", "time"),)``."""

    def __post_init__(self) -> None:
        where = f"CollectionSpec {self.name!r}"
        if not _NAME.match(self.name):
            raise ValueError(f"{where}: the name must match {_NAME.pattern}")
        for field in self.fields:
            if not _NAME.match(field):
                raise ValueError(
                    f"{where}: field {field!r} must match {_NAME.pattern} "
                    "(top-level, no leading underscore: _id is implicit)"
                )
        if len(set(self.fields)) != len(self.fields):
            raise ValueError(f"{where}: fields {self.fields!r} repeat a name")
        declared = {*self.fields, "_id"}
        for index in self.indexes:
            if not index or any(field not in declared for field in index):
                raise ValueError(
                    f"{where}: index {index!r} uses a field not in fields={self.fields!r}; "
                    "declare the field first"
                )
        indexed = {field for index in self.indexes for field in index}
        unindexed = [field for field in self.fields if field not in indexed]
        if unindexed:
            raise ValueError(
                f"{where}: fields {unindexed!r} are in no index, so queries on them would scan "
                "the collection; add an index that contains them or remove them from fields"
            )

    def queryable(self, field: str) -> bool:
        """Whether queries may filter or sort on ``field``."""
        return field == "_id" or field in self.fields


@dataclass(frozen=True, slots=True)
class Query:
    """A validated find/count query: values normalised (datetimes in UTC, to the millisecond)."""

    eq: dict[str, Scalar | tuple[Scalar, ...]]
    ranges: dict[str, tuple[Scalar, Scalar]]
    sort: str | None = None
    descending: bool = False
    limit: int | None = None


class HistoryStore(Protocol):
    """A small document store; see the module docstring for what documents may hold."""

    @property
    def backend(self) -> Literal["mongo", "sqlite"]:
        """Which implementation this is, for logs and the observer."""
        ...

    async def ensure(self, *specs: CollectionSpec) -> None:
        """Create the collections and their indexes; idempotent. Call at start-up."""
        ...

    async def put(self, collection: str, doc: Mapping[str, Any]) -> None:
        """Insert or replace the whole document with ``doc["_id"]`` (a ``str``)."""
        ...

    async def put_many(self, collection: str, docs: Sequence[Mapping[str, Any]]) -> None:
        """`put` for several documents, in order, as one batch (one transaction in SQLite)."""
        ...

    async def insert_new(self, collection: str, doc: Mapping[str, Any]) -> bool:
        """Insert ``doc``; False, changing nothing, when its ``_id`` already exists."""
        ...

    async def get(self, collection: str, doc_id: str) -> dict[str, Any] | None:
        """The document with this id, or None."""
        ...

    async def find(
        self,
        collection: str,
        *,
        eq: Eq | None = None,
        ranges: Ranges | None = None,
        sort: str | None = None,
        descending: bool = False,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Documents matching every condition; ties in ``sort`` come in no defined order."""
        ...

    async def count(
        self, collection: str, *, eq: Eq | None = None, ranges: Ranges | None = None
    ) -> int:
        """How many documents match."""
        ...

    async def delete(self, collection: str, doc_id: str) -> bool:
        """Delete by id; False when there was no such document."""
        ...

    async def ping(self) -> None:
        """Raise `StoreUnavailable` when the store cannot be used."""
        ...

    async def compact(self) -> None:
        """Give the space of deleted documents back, so no file of the store still holds their
        bytes (after a forget): SQLite rewrites its file and empties its WAL; a MongoDB server
        manages its own files (nothing to do here)."""
        ...

    async def close(self) -> None:
        """Release the connection; the store cannot be used afterwards."""
        ...


async def open_history(url: str | None, database: str, data_dir: Path) -> HistoryStore:
    """MongoDB database ``database`` at ``url``, or SQLite at ``data_dir/history.sqlite3``.

    Raises `StoreUnavailable` when the store cannot be reached or opened.
    """
    if url is None:
        from yuiju.storage.sqlite_history import SqliteHistory

        return await asyncio.to_thread(
            SqliteHistory.open, data_dir / "history.sqlite3"
        )  # may meet a lock
    from yuiju.storage.mongo_history import MongoHistory

    return await MongoHistory.connect(url, database)


# -- shared by both backends ------------------------------------------------------------------


class SpecRegistry:
    """The specs a store has ensured, by collection name."""

    def __init__(self) -> None:
        self._specs: dict[str, CollectionSpec] = {}

    def add(self, spec: CollectionSpec) -> None:
        self._specs[spec.name] = spec

    def __getitem__(self, collection: str) -> CollectionSpec:
        try:
            return self._specs[collection]
        except KeyError:
            raise UndeclaredField(
                f"collection {collection!r} was not ensured; declare a CollectionSpec for it "
                "and pass it to HistoryStore.ensure() at start-up"
            ) from None


def utc_ms(value: datetime, where: str) -> datetime:
    """``value`` in UTC, cut to the millisecond; a naive datetime is an `InvalidDocument`."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidDocument(
            f"{where}: naive datetime {value!r}; history stores only timezone-aware datetimes, "
            "take it from the injected Clock or add tzinfo"
        )
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def normalize_value(value: Any, where: str) -> Any:
    """A copy of ``value`` with datetimes in UTC and tuples as lists; rejects unstorable types."""
    if isinstance(value, datetime):
        return utc_ms(value, where)
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidDocument(f"{where}: {value!r} does not fit in 64 bits; store it as a str")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str) or key.startswith("$"):
                raise InvalidDocument(
                    f"{where}: key {key!r} is not allowed; keys are str and do not start with '$'"
                )
            out[key] = normalize_value(item, f"{where}.{key}")
        return out
    if isinstance(value, list | tuple):
        return [normalize_value(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise InvalidDocument(
        f"{where}: {type(value).__name__} {value!r} cannot be stored; use str, int, float, bool, "
        "None, an aware datetime, a list or a dict (convert dates, sets, Decimals and bytes first)"
    )


def normalize_doc(spec: CollectionSpec, doc: Mapping[str, Any]) -> dict[str, Any]:
    """A storable copy of ``doc``: checked ``_id``, scalars in declared fields."""
    doc_id = doc.get("_id")
    if not isinstance(doc_id, str) or not doc_id:
        raise InvalidDocument(
            f"{spec.name}: document _id must be a non-empty str, got {doc_id!r}; "
            "give every document a deterministic string id"
        )
    out: dict[str, Any] = normalize_value(doc, f"{spec.name}[{doc_id!r}]")
    for field in spec.fields:
        if not isinstance(out.get(field), _SCALARS):
            raise InvalidDocument(
                f"{spec.name}[{doc_id!r}].{field}: a declared (indexed) field must hold a scalar "
                f"(str, number, bool, None, datetime), got {type(out[field]).__name__}"
            )
    return out


def prepare_query(
    spec: CollectionSpec,
    eq: Eq | None,
    ranges: Ranges | None,
    sort: str | None = None,
    descending: bool = False,
    limit: int | None = None,
) -> Query:
    """Check every field is declared and normalise the values."""

    def declared(field: str) -> str:
        if not spec.queryable(field):
            raise UndeclaredField(
                f"collection {spec.name!r} has no declared field {field!r} "
                f"(declared: {spec.fields!r}); declare it in the CollectionSpec, "
                "with an index that contains it"
            )
        return field

    def scalar(value: Any, where: str) -> Scalar:
        if not isinstance(value, _SCALARS):
            raise InvalidDocument(
                f"{where}: query values are scalars (or a list of scalars for one-of), "
                f"got {type(value).__name__}"
            )
        return normalize_value(value, where)  # type: ignore[no-any-return]

    norm_eq: dict[str, Scalar | tuple[Scalar, ...]] = {}
    for field, value in (eq or {}).items():
        where = f"{spec.name} query eq[{field!r}]"
        if isinstance(value, list | tuple):
            norm_eq[declared(field)] = tuple(scalar(v, where) for v in value)
        else:
            norm_eq[declared(field)] = scalar(value, where)
    norm_ranges: dict[str, tuple[Scalar, Scalar]] = {}
    for field, (low, high) in (ranges or {}).items():
        where = f"{spec.name} query ranges[{field!r}]"
        norm_ranges[declared(field)] = (scalar(low, where), scalar(high, where))
    if sort is not None:
        declared(sort)
    if limit is not None and (isinstance(limit, bool) or limit < 0):
        raise ValueError(f"{spec.name} query: limit must be None or >= 0, got {limit!r}")
    return Query(norm_eq, norm_ranges, sort, descending, limit)
