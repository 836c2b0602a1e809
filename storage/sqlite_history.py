"""The embedded history backend: one SQLite file, one table per collection, real indexes.

A table is ``_id TEXT PRIMARY KEY``, one column per declared field (what queries and indexes
use) and ``_doc``, the whole document as JSON with datetimes as ``{"$date": "<UTC ISO>"}``.
Declared datetime fields are stored as fixed-width UTC ISO strings
(``2026-11-30T04:00:00.123+00:00``), so they sort and compare as instants whatever zone the
caller used. The ``sqlite3`` calls are synchronous on purpose: they take microseconds, far less
than a thread hop.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from storage.errors import CorruptValue, StoreUnavailable
from storage.history import (
    CollectionSpec,
    Eq,
    Query,
    Ranges,
    Scalar,
    SpecRegistry,
    normalize_doc,
    prepare_query,
)

__all__ = ["SqliteHistory"]

_META = "_yuiju_collections"
"""Table remembering each collection's declared fields, to backfill columns when they change."""


class SqliteHistory:
    """`HistoryStore` on a SQLite file (WAL, ``synchronous=NORMAL``, every write committed)."""

    backend: Literal["sqlite"] = "sqlite"

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._db = connection
        self.path = path
        """The database file."""
        self._specs = SpecRegistry()

    @classmethod
    def open(cls, path: Path) -> SqliteHistory:
        """Open (creating if needed) the database at ``path``."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: autocommit, each write is its own committed transaction.
            db = sqlite3.connect(path, timeout=5.0, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(f"CREATE TABLE IF NOT EXISTS {_META} (name TEXT PRIMARY KEY, fields TEXT)")
        except sqlite3.DatabaseError as exc:
            raise StoreUnavailable(
                f"cannot open the history database {path} ({exc}); check [app].data_dir is "
                "writable, or move a damaged file away and restart"
            ) from exc
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot create {path.parent} ({exc}); fix [app].data_dir or its permissions"
            ) from exc
        return cls(db, path)

    async def ensure(self, *specs: CollectionSpec) -> None:
        with self._guard():
            for spec in specs:
                self._ensure(spec)
                self._specs.add(spec)

    def _ensure(self, spec: CollectionSpec) -> None:
        table = _q(spec.name)
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (_id TEXT PRIMARY KEY, _doc TEXT NOT NULL)"
            )
            columns = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            for field in spec.fields:
                if field not in columns:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {_q(field)}")
            row = self._db.execute(
                f"SELECT fields FROM {_META} WHERE name = ?", (spec.name,)
            ).fetchone()
            if row is None or json.loads(row[0]) != list(spec.fields):
                self._backfill(spec)
                self._db.execute(
                    f"INSERT INTO {_META} (name, fields) VALUES (?, ?) "
                    "ON CONFLICT(name) DO UPDATE SET fields = excluded.fields",
                    (spec.name, json.dumps(list(spec.fields))),
                )
            for index in spec.indexes:
                name = _q("ix_" + spec.name + "__" + "__".join(index))
                cols = ", ".join(_q(f) for f in index)
                self._db.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({cols})")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _backfill(self, spec: CollectionSpec) -> None:
        """Recompute the field columns from the stored documents (the declared fields changed)."""
        if not spec.fields:
            return
        rows = self._db.execute(f"SELECT _id, _doc FROM {_q(spec.name)}").fetchall()
        assignments = ", ".join(f"{_q(f)} = ?" for f in spec.fields)
        for doc_id, raw in rows:
            doc = _decode(raw, spec.name, doc_id)
            self._db.execute(
                f"UPDATE {_q(spec.name)} SET {assignments} WHERE _id = ?",
                (*_columns(spec, doc), doc_id),
            )

    async def put(self, collection: str, doc: Mapping[str, Any]) -> None:
        spec = self._specs[collection]
        norm = normalize_doc(spec, doc)
        with self._guard():
            self._db.execute(_upsert_sql(spec), (norm["_id"], *_columns(spec, norm), _encode(norm)))

    async def put_many(self, collection: str, docs: Sequence[Mapping[str, Any]]) -> None:
        spec = self._specs[collection]
        rows = [(n["_id"], *_columns(spec, n), _encode(n)) for n in (normalize_doc(spec, d) for d in docs)]
        if not rows:
            return
        with self._guard():
            self._db.execute("BEGIN IMMEDIATE")  # one transaction (and one fsync) for the batch
            try:
                self._db.executemany(_upsert_sql(spec), rows)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    async def insert_new(self, collection: str, doc: Mapping[str, Any]) -> bool:
        spec = self._specs[collection]
        norm = normalize_doc(spec, doc)
        with self._guard():
            cursor = self._db.execute(
                _insert_sql(spec), (norm["_id"], *_columns(spec, norm), _encode(norm))
            )
        return cursor.rowcount == 1

    async def get(self, collection: str, doc_id: str) -> dict[str, Any] | None:
        self._specs[collection]
        with self._guard():
            row = self._db.execute(
                f"SELECT _doc FROM {_q(collection)} WHERE _id = ?", (doc_id,)
            ).fetchone()
        return None if row is None else _decode(row[0], collection, doc_id)

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
        query = prepare_query(self._specs[collection], eq, ranges, sort, descending, limit)
        where, params = _where(query)
        sql = f"SELECT _id, _doc FROM {_q(collection)}{where}"
        if query.sort is not None:
            sql += f" ORDER BY {_q(query.sort)} {'DESC' if query.descending else 'ASC'}"
        if query.limit is not None:
            sql += " LIMIT ?"
            params.append(query.limit)
        with self._guard():
            rows = self._db.execute(sql, params).fetchall()
        return [_decode(raw, collection, doc_id) for doc_id, raw in rows]

    async def count(
        self, collection: str, *, eq: Eq | None = None, ranges: Ranges | None = None
    ) -> int:
        query = prepare_query(self._specs[collection], eq, ranges)
        where, params = _where(query)
        with self._guard():
            (n,) = self._db.execute(
                f"SELECT COUNT(*) FROM {_q(collection)}{where}", params
            ).fetchone()
        return int(n)

    async def delete(self, collection: str, doc_id: str) -> bool:
        self._specs[collection]
        with self._guard():
            cursor = self._db.execute(f"DELETE FROM {_q(collection)} WHERE _id = ?", (doc_id,))
        return cursor.rowcount == 1

    async def ping(self) -> None:
        with self._guard():
            self._db.execute("SELECT 1").fetchone()

    async def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.execute("PRAGMA optimize")
        self._db.close()

    def explain(
        self,
        collection: str,
        *,
        eq: Eq | None = None,
        ranges: Ranges | None = None,
        sort: str | None = None,
        descending: bool = False,
    ) -> list[str]:
        """SQLite's query plan for a find (the details column), to check an index is used."""
        query = prepare_query(self._specs[collection], eq, ranges, sort, descending)
        where, params = _where(query)
        sql = f"EXPLAIN QUERY PLAN SELECT _id, _doc FROM {_q(collection)}{where}"
        if query.sort is not None:
            sql += f" ORDER BY {_q(query.sort)} {'DESC' if query.descending else 'ASC'}"
        return [row[3] for row in self._db.execute(sql, params)]

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Map the sqlite3 errors a user can fix to our hierarchy; bugs stay sqlite3 errors."""
        try:
            yield
        except sqlite3.ProgrammingError as exc:
            if "closed" in str(exc):
                raise StoreUnavailable(
                    f"the history database {self.path} is closed; open the store again"
                ) from exc
            raise
        except sqlite3.OperationalError as exc:
            message = str(exc)
            if any(s in message for s in ("locked", "busy", "unable to open", "disk", "readonly")):
                raise StoreUnavailable(
                    f"the history database {self.path} cannot be used ({message}); make sure no "
                    "other program holds it and that the disk is writable"
                ) from exc
            raise
        except sqlite3.DatabaseError as exc:
            if "malformed" in str(exc) or "not a database" in str(exc):
                raise CorruptValue(
                    f"the history database {self.path} is damaged ({exc}); restore it from a "
                    "backup or move it away to start an empty history"
                ) from exc
            raise


def _q(name: str) -> str:
    """A quoted SQL identifier (names are already restricted by `CollectionSpec`)."""
    return '"' + name.replace('"', '""') + '"'


@functools.cache
def _insert_sql(spec: CollectionSpec) -> str:
    names = ", ".join(_q(f) for f in ("_id", *spec.fields, "_doc"))
    marks = ", ".join("?" * (len(spec.fields) + 2))
    return f"INSERT INTO {_q(spec.name)} ({names}) VALUES ({marks}) ON CONFLICT(_id) DO NOTHING"


@functools.cache
def _upsert_sql(spec: CollectionSpec) -> str:
    updates = ", ".join(f"{_q(f)} = excluded.{_q(f)}" for f in (*spec.fields, "_doc"))
    return _insert_sql(spec).replace("DO NOTHING", f"DO UPDATE SET {updates}")


def _column(value: Scalar) -> str | int | float | None:
    """A declared field's column value: datetimes as fixed-width UTC ISO text."""
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds")
    return value


def _columns(spec: CollectionSpec, doc: Mapping[str, Any]) -> list[Any]:
    return [_column(doc.get(field)) for field in spec.fields]


def _where(query: Query) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for field, value in query.eq.items():
        col = _q(field)
        if isinstance(value, tuple):
            present = [_column(v) for v in value if v is not None]
            options = []
            if present:
                options.append(f"{col} IN ({', '.join('?' * len(present))})")
                params.extend(present)
            if None in value:
                options.append(f"{col} IS NULL")
            clauses.append("(" + " OR ".join(options) + ")" if options else "0")
        elif value is None:
            clauses.append(f"{col} IS NULL")
        else:
            clauses.append(f"{col} = ?")
            params.append(_column(value))
    for field, (low, high) in query.ranges.items():
        if low is not None:
            clauses.append(f"{_q(field)} >= ?")
            params.append(_column(low))
        if high is not None:
            clauses.append(f"{_q(field)} < ?")
            params.append(_column(high))
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _to_json(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$date": value.isoformat(timespec="milliseconds")}
    if isinstance(value, dict):
        return {key: _to_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_to_json(item) for item in value]
    return value


def _encode(doc: dict[str, Any]) -> str:
    return json.dumps(_to_json(doc), ensure_ascii=False, separators=(",", ":"))


def _from_json(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and isinstance(date := obj.get("$date"), str):
        return datetime.fromisoformat(date).astimezone(UTC)
    return obj


_DECODER = json.JSONDecoder(object_hook=_from_json)


def _decode(raw: Any, collection: str, doc_id: str) -> dict[str, Any]:
    try:
        doc = _DECODER.decode(raw)
    except (TypeError, ValueError) as exc:
        raise CorruptValue(
            f"history {collection}[{doc_id!r}] holds an unreadable document ({exc}); "
            "fix or delete that row in the SQLite file"
        ) from exc
    if not isinstance(doc, dict):
        raise CorruptValue(
            f"history {collection}[{doc_id!r}] holds {type(doc).__name__}, not a document; "
            "fix or delete that row in the SQLite file"
        )
    return doc
