"""The embedded history backend: one SQLite file, one table per collection, real indexes.

A table is ``_id TEXT PRIMARY KEY``, one column per declared field (what queries and indexes
use) and ``_doc``, the whole document as JSON with datetimes as ``{"$date": "<UTC ISO>"}``.
Declared datetime fields are stored as fixed-width UTC ISO strings
(``2026-11-30T04:00:00.123+00:00``), so they sort and compare as instants whatever zone the
caller used.

The ``sqlite3`` calls run off the event loop, each connection in its own thread: a statement
usually takes microseconds, but one that meets another program's lock on the file waits up to
`BUSY_TIMEOUT_SECONDS`, and that wait must not freeze the engine, the page and the bot. Writes
go through one connection (SQLite has one writer anyway) and reads through another, so in WAL
mode the page and her recall keep reading while a write waits for a lock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from yuiju.storage.errors import (
    CorruptValue,
    InvalidDocument,
    StorageError,
    StoreDamaged,
    StoreUnavailable,
)
from yuiju.storage.history import (
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

BUSY_TIMEOUT_SECONDS = 5.0
"""How long a statement waits for another program's lock on the file before the store reports
itself unavailable (the engine keeps its episodes queued and retries)."""

CLOSE_WAIT_SECONDS = 0.5
"""How long `SqliteHistory.close` waits for writes still queued or waiting on a lock; after that
the process may exit without them (SQLite keeps the file consistent, the engine's outbox replays).
Queued writes on a free file take milliseconds; on a locked one they cannot finish in any wait
shorter than `BUSY_TIMEOUT_SECONDS`, and a stop must end within 2 s."""

T = TypeVar("T")

# What a failed statement says, by SQLite's primary result code (``sqlite_errorcode & 0xFF``),
# never by its message: "locking protocol" (a lock held on the -shm file) names no lock word.
_UNAVAILABLE = frozenset(
    {
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_ABORT,  # rolled back under us
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_INTERRUPT,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PROTOCOL,  # the WAL index (-shm) locked by another program
        sqlite3.SQLITE_SCHEMA,
        sqlite3.SQLITE_NOLFS,
        sqlite3.SQLITE_AUTH,
    }
)
"""The file cannot be used now; the same statement may work later."""
_DAMAGED = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
"""The file itself is damaged: nothing works until a human restores or moves it."""
_REFUSED = frozenset({sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH})
"""This statement's values can never be stored; others can."""


class _Thread:
    """One connection and the one daemon thread that uses it: the event loop hands it calls and
    awaits their results. A daemon thread, so a write stuck on a lock never holds up an exit."""

    def __init__(self, connection: sqlite3.Connection, name: str) -> None:
        self.connection = connection
        self._calls: queue.SimpleQueue[
            tuple[Callable[[], Any], Callable[[Any, BaseException | None], None]] | None
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            fn, done = call
            try:
                result = fn()
            except BaseException as exc:  # handed to the caller, whatever it is
                done(None, exc)
            else:
                done(result, None)

    async def run(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def settle(result: Any, exc: BaseException | None) -> None:
            if not future.done():  # the caller may have been cancelled meanwhile
                if exc is not None:
                    future.set_exception(exc)
                else:
                    future.set_result(result)

        def done(result: Any, exc: BaseException | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
                loop.call_soon_threadsafe(settle, result, exc)

        self._calls.put((fn, done))
        return await future

    def run_blocking(self, fn: Callable[[], T]) -> T:
        """For synchronous callers (``explain``): wait for the thread, blocking."""
        box: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._calls.put(
            (fn, lambda result, exc: box.set_exception(exc) if exc else box.set_result(result))
        )
        return box.result()

    def stop(self) -> None:
        self._calls.put(None)


class SqliteHistory:
    """`HistoryStore` on a SQLite file (WAL, ``synchronous=NORMAL``, every write committed)."""

    backend: Literal["sqlite"] = "sqlite"

    def __init__(self, writer: sqlite3.Connection, reader: sqlite3.Connection, path: Path) -> None:
        self.path = path
        """The database file."""
        self._writer = _Thread(writer, "yuiju-sqlite-writer")
        self._reader = _Thread(reader, "yuiju-sqlite-reader")
        self._db = writer
        self._specs = SpecRegistry()
        self._closing = False
        self._closed = False

    @classmethod
    def open(cls, path: Path) -> SqliteHistory:
        """Open (creating if needed) the database at ``path``. Blocking: from async code, run it
        in a thread (`open_history` does)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: autocommit, each write is its own committed transaction.
            db = _connect(path)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            # a deleted row's bytes are overwritten, not left in a free page (a forget, 撤回)
            db.execute("PRAGMA secure_delete=ON")
            db.execute(f"CREATE TABLE IF NOT EXISTS {_META} (name TEXT PRIMARY KEY, fields TEXT)")
            reader = _connect(path)
            reader.execute("PRAGMA query_only=ON")
        except sqlite3.DatabaseError as exc:
            raise StoreUnavailable(
                f"cannot open the history database {path} ({exc}); check [app].data_dir is "
                "writable, or move a damaged file away and restart"
            ) from exc
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot create {path.parent} ({exc}); fix [app].data_dir or its permissions"
            ) from exc
        return cls(db, reader, path)

    async def _write(self, fn: Callable[[], T]) -> T:
        self._check_open()
        return await self._writer.run(self._guarded(fn))

    async def _read(self, fn: Callable[[], T]) -> T:
        self._check_open()
        return await self._reader.run(self._guarded(fn))

    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()

    def _closed_error(self) -> StoreUnavailable:
        return StoreUnavailable(f"the history database {self.path} is closed; open the store again")

    def _guarded(self, fn: Callable[[], T]) -> Callable[[], T]:
        def call() -> T:
            if self._closed:
                raise self._closed_error()
            with self._guard():
                return fn()

        return call

    async def ensure(self, *specs: CollectionSpec) -> None:
        def missing() -> list[CollectionSpec]:
            return [spec for spec in specs if not self._is_ensured(spec)]

        def ensure_all(todo: list[CollectionSpec]) -> None:
            for spec in todo:
                self._ensure(spec)

        # Usually everything exists already: checking that only reads, so a page (re)started while
        # another program holds the write lock still works.
        if todo := await self._read(missing):
            await self._write(lambda: ensure_all(todo))
        for spec in specs:
            self._specs.add(spec)

    def _is_ensured(self, spec: CollectionSpec) -> bool:
        db = self._reader.connection
        row = db.execute(f"SELECT fields FROM {_META} WHERE name = ?", (spec.name,)).fetchone()
        if row is None or json.loads(row[0]) != list(spec.fields):
            return False
        indexes = {
            r[0]
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", (spec.name,)
            )
        }
        columns = {r[1] for r in db.execute(f"PRAGMA table_info({_q(spec.name)})")}
        return all(f in columns for f in spec.fields) and all(
            _index_name(spec, i) in indexes for i in spec.indexes
        )

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
                name = _q(_index_name(spec, index))
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
        row = (norm["_id"], *_columns(spec, norm), _encode(norm))
        await self._write(lambda: self._db.execute(_upsert_sql(spec), row))

    async def put_many(self, collection: str, docs: Sequence[Mapping[str, Any]]) -> None:
        spec = self._specs[collection]
        rows = [
            (n["_id"], *_columns(spec, n), _encode(n))
            for n in (normalize_doc(spec, d) for d in docs)
        ]
        if not rows:
            return

        def batch() -> None:
            self._db.execute("BEGIN IMMEDIATE")  # one transaction (and one fsync) for the batch
            try:
                self._db.executemany(_upsert_sql(spec), rows)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

        await self._write(batch)

    async def insert_new(self, collection: str, doc: Mapping[str, Any]) -> bool:
        spec = self._specs[collection]
        norm = normalize_doc(spec, doc)
        row = (norm["_id"], *_columns(spec, norm), _encode(norm))
        cursor = await self._write(lambda: self._db.execute(_insert_sql(spec), row))
        return cursor.rowcount == 1

    async def get(self, collection: str, doc_id: str) -> dict[str, Any] | None:
        self._specs[collection]
        sql = f"SELECT _doc FROM {_q(collection)} WHERE _id = ?"
        row = await self._read(lambda: self._reader.connection.execute(sql, (doc_id,)).fetchone())
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

        def rows() -> list[
            dict[str, Any]
        ]:  # decoded in the thread too: a week of episodes is real work
            found = self._reader.connection.execute(sql, params).fetchall()
            return [_decode(raw, collection, doc_id) for doc_id, raw in found]

        return await self._read(rows)

    async def count(
        self, collection: str, *, eq: Eq | None = None, ranges: Ranges | None = None
    ) -> int:
        query = prepare_query(self._specs[collection], eq, ranges)
        where, params = _where(query)
        sql = f"SELECT COUNT(*) FROM {_q(collection)}{where}"
        (n,) = await self._read(lambda: self._reader.connection.execute(sql, params).fetchone())
        return int(n)

    async def delete(self, collection: str, doc_id: str) -> bool:
        self._specs[collection]
        sql = f"DELETE FROM {_q(collection)} WHERE _id = ?"
        cursor = await self._write(lambda: self._db.execute(sql, (doc_id,)))
        return cursor.rowcount == 1

    async def ping(self) -> None:
        await self._read(lambda: self._reader.connection.execute("SELECT 1").fetchone())

    async def compact(self) -> None:
        """Copy the WAL into the file and empty it, rewrite the file (``VACUUM``) and empty the
        WAL again: old page images of deleted rows are left nowhere."""

        def vacuum() -> None:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.execute("VACUUM")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

        await self._write(vacuum)

    async def close(self) -> None:
        """Close both connections once the writes queued before are done, waiting at most
        `CLOSE_WAIT_SECONDS` for writes stuck on another program's lock."""
        if self._closed:
            return
        self._closing = True  # calls still queued meet closed connections: the store is unavailable

        def close_writer() -> None:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("PRAGMA optimize")
            self._db.close()

        def close_reader() -> None:
            self._reader.connection.close()

        try:
            await asyncio.wait_for(
                asyncio.gather(self._writer.run(close_writer), self._reader.run(close_reader)),
                CLOSE_WAIT_SECONDS,
            )
        except TimeoutError:
            pass  # the daemon threads finish (or die with the process); SQLite keeps the file consistent
        finally:
            self._closed = True
            self._writer.stop()
            self._reader.stop()

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
        return self._reader.run_blocking(
            lambda: [row[3] for row in self._reader.connection.execute(sql, params)]
        )

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Map the sqlite3 errors to our hierarchy by kind (`sqlite_error`); bugs stay sqlite3
        errors."""
        try:
            yield
        except sqlite3.Error as exc:
            if self._closing and isinstance(exc, sqlite3.ProgrammingError):
                raise self._closed_error() from exc  # a call that met the closed connection
            mapped = sqlite_error(exc, self.path)
            if mapped is None:
                raise
            raise mapped from exc


def sqlite_error(exc: sqlite3.Error, path: Path) -> StorageError | None:
    """What a sqlite3 error means, by its result code (never its message), as an error of ours:
    `StoreUnavailable` (the file cannot be used now: locked, busy, read-only, full...),
    `StoreDamaged`, `InvalidDocument` (these values can never be stored); None for the rest
    (a bug: a misused statement, a missing table)."""
    code: int | None = getattr(exc, "sqlite_errorcode", None)  # absent: not from the library
    if code is None:
        return None
    primary = code & 0xFF
    what = f"{getattr(exc, 'sqlite_errorname', code)}: {exc}"
    if primary in _UNAVAILABLE:
        return StoreUnavailable(
            f"the history database {path} cannot be used now ({what}); make sure no other program "
            "holds it (or its -wal and -shm files) and that the disk is writable and has room"
        )
    if primary in _DAMAGED:
        return StoreDamaged(
            f"the history database {path} is damaged ({what}); restore it from a backup or move "
            "it away to start an empty history"
        )
    if primary in _REFUSED:
        return InvalidDocument(f"the history database {path} refuses the values ({what})")
    return None


def _connect(path: Path) -> sqlite3.Connection:
    # check_same_thread=False: opened here, used only by its own `_Thread` from then on
    return sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )


def _index_name(spec: CollectionSpec, index: tuple[str, ...]) -> str:
    return "ix_" + spec.name + "__" + "__".join(index)


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
