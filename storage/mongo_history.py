"""The production history backend: MongoDB through pymongo's native ``AsyncMongoClient``.

`MongoHistory` takes an async database object, so the same code runs on
``AsyncMongoClient(url, tz_aware=True)[name]`` and, in tests, on
``mongomock_motor.AsyncMongoMockClient(tz_aware=True)[name]``. The two differ in whether
``close()`` and ``aggregate()`` return awaitables; `maybe_await` hides that.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from bson.errors import InvalidDocument as InvalidBSON
from pymongo import ASCENDING, DESCENDING, AsyncMongoClient
from pymongo.errors import (
    ConfigurationError,
    ConnectionFailure,
    DuplicateKeyError,
    OperationFailure,
    PyMongoError,
    WriteConcernError,
    WriteError,
)

from yuiju.config import redact_url
from yuiju.storage.errors import InvalidDocument, StorageError, StoreUnavailable
from yuiju.storage.history import (
    CollectionSpec,
    Eq,
    Query,
    Ranges,
    SpecRegistry,
    normalize_doc,
    prepare_query,
)

__all__ = ["MongoHistory", "maybe_await"]

_SERVER_SELECTION_TIMEOUT_MS = 5000
"""How long a call waits for a reachable server before failing (pymongo's default is 30 s)."""
_AUTH_ERROR_CODES = {13, 18}  # Unauthorized, AuthenticationFailed
_UNAVAILABLE_CODES = frozenset(
    {
        6,  # HostUnreachable
        7,  # HostNotFound
        24,  # LockTimeout
        46,  # LockBusy
        50,  # MaxTimeMSExpired
        64,  # WriteConcernFailed
        89,  # NetworkTimeout
        91,  # ShutdownInProgress
        112,  # WriteConflict
        133,  # FailedToSatisfyReadPreference
        134,  # ReadConcernMajorityNotAvailableYet
        189,  # PrimarySteppedDown
        262,  # ExceededTimeLimit
        8000,  # AtlasError (over the space quota)
        9001,  # SocketException
        10058,  # LegacyNotPrimary
        10107,  # NotWritablePrimary
        11600,  # InterruptedAtShutdown
        11602,  # InterruptedDueToReplStateChange
        12586,  # BackgroundOperationInProgressForDatabase
        12587,  # BackgroundOperationInProgressForNamespace
        13435,  # NotPrimaryNoSecondaryOk
        13436,  # NotPrimaryOrSecondary
        14031,  # OutOfDiskSpace
        16500,  # RequestRateTooLarge (Cosmos DB's MongoDB API)
    }
)
"""Server error codes that say the server cannot write now (a failover, a shutdown, a full disk,
a timeout), not that the document is wrong: pymongo's retryable codes and a few more."""
_UNAVAILABLE_LABELS = ("RetryableWriteError", "TransientTransactionError")


async def maybe_await(value: Any) -> Any:
    """``await`` it if pymongo returned an awaitable, as mongomock-motor/motor sometimes do not."""
    if inspect.isawaitable(value):
        return await value
    return value


class MongoHistory:
    """`HistoryStore` on a MongoDB database."""

    backend: Literal["mongo"] = "mongo"

    def __init__(self, database: Any, *, client: Any = None, description: str = "MongoDB") -> None:
        """``database``: an async database object; ``client``: closed by `close` when given."""
        self._db = database
        self._client = client
        self.description = description
        """Where the data lives, for logs and errors, password redacted."""
        self._specs = SpecRegistry()

    @classmethod
    async def connect(cls, url: str, database: str) -> MongoHistory:
        """Connect to ``url`` and check the server answers."""
        shown = redact_url(url)
        options: dict[str, Any] = {"tz_aware": True, "tzinfo": UTC}
        if "serverselectiontimeoutms" not in url.lower():
            options["serverSelectionTimeoutMS"] = _SERVER_SELECTION_TIMEOUT_MS
        try:
            client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url, **options)
        except ConfigurationError as exc:
            raise StoreUnavailable(
                f"MongoDB URL {shown!r} is not valid ({exc}); fix [mongo].url "
                "(mongodb://[user:password@]host[:port]/...)"
            ) from exc
        store = cls(client[database], client=client, description=f"{shown} database {database!r}")
        try:
            await store.ping()
        except StoreUnavailable:
            await store.close()
            raise
        return store

    async def ensure(self, *specs: CollectionSpec) -> None:
        with self._guard():
            for spec in specs:
                collection = self._db[spec.name]
                for index in spec.indexes:
                    await collection.create_index([(field, ASCENDING) for field in index])
                self._specs.add(spec)

    async def put(self, collection: str, doc: Mapping[str, Any]) -> None:
        norm = normalize_doc(self._specs[collection], doc)
        with self._guard():
            await self._db[collection].replace_one({"_id": norm["_id"]}, norm, upsert=True)

    async def put_many(self, collection: str, docs: Sequence[Mapping[str, Any]]) -> None:
        spec = self._specs[collection]
        norms = [normalize_doc(spec, d) for d in docs]
        if not norms:
            return
        # One replace per document, in order. (bulk_write would save round trips, but mongomock
        # rejects the ReplaceOne that pymongo 4.20 builds; production batches are small.)
        with self._guard():
            for n in norms:
                await self._db[collection].replace_one({"_id": n["_id"]}, n, upsert=True)

    async def insert_new(self, collection: str, doc: Mapping[str, Any]) -> bool:
        norm = normalize_doc(self._specs[collection], doc)
        with self._guard():
            try:
                await self._db[collection].insert_one(norm)
            except DuplicateKeyError:
                return False
        return True

    async def get(self, collection: str, doc_id: str) -> dict[str, Any] | None:
        self._specs[collection]
        with self._guard():
            doc = await self._db[collection].find_one({"_id": doc_id})
        return None if doc is None else _in_utc(doc)

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
        if query.limit == 0:
            return []  # MongoDB reads limit 0 as "no limit"
        options: dict[str, Any] = {}
        if query.sort is not None:
            options["sort"] = [(query.sort, DESCENDING if query.descending else ASCENDING)]
        if query.limit is not None:
            options["limit"] = query.limit
        with self._guard():
            cursor = self._db[collection].find(_filter(query), **options)
            return [_in_utc(doc) async for doc in cursor]

    async def count(
        self, collection: str, *, eq: Eq | None = None, ranges: Ranges | None = None
    ) -> int:
        query = prepare_query(self._specs[collection], eq, ranges)
        with self._guard():
            return int(await self._db[collection].count_documents(_filter(query)))

    async def delete(self, collection: str, doc_id: str) -> bool:
        self._specs[collection]
        with self._guard():
            result = await self._db[collection].delete_one({"_id": doc_id})
        return bool(result.deleted_count == 1)

    async def ping(self) -> None:
        with self._guard():
            await self._db.command("ping")

    async def compact(self) -> None:
        """Nothing: the server's storage engine reuses the space of deleted documents, and its
        files are not under the data dir."""

    async def close(self) -> None:
        if self._client is not None:
            await maybe_await(self._client.close())

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Map pymongo's errors to our hierarchy by kind (`mongo_error`); bugs stay as they are."""
        try:
            yield
        except (PyMongoError, InvalidBSON) as exc:
            mapped = mongo_error(exc, self.description)
            if mapped is None:
                raise
            raise mapped from exc


def mongo_error(exc: PyMongoError | InvalidBSON, description: str) -> StorageError | None:
    """What a pymongo error means, by its class, code and labels (never its message), as an error
    of ours: `StoreUnavailable` (unreachable, refusing our credentials, failing over, full, too
    slow: the same write may work later), `InvalidDocument` (this document can never be stored);
    None for the rest."""
    what = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ConnectionFailure):
        return StoreUnavailable(
            f"cannot reach {description} ({what}); start MongoDB or unset [mongo].url to use the "
            "embedded SQLite history"
        )
    code = exc.code if isinstance(exc, OperationFailure) else None
    if code in _AUTH_ERROR_CODES:
        return StoreUnavailable(
            f"{description} refused our credentials ({exc}); fix the user and password in "
            "[mongo].url and the user's roles on the database"
        )
    if isinstance(exc, PyMongoError) and (
        exc.timeout
        or isinstance(exc, WriteConcernError)
        or code in _UNAVAILABLE_CODES
        or any(exc.has_error_label(label) for label in _UNAVAILABLE_LABELS)
    ):
        return StoreUnavailable(f"{description} cannot take writes now ({what}); it is retried")
    if isinstance(exc, InvalidBSON | WriteError):
        return InvalidDocument(f"{description} refuses the document ({what})")
    return None


def _filter(query: Query) -> dict[str, Any]:
    conditions: dict[str, dict[str, Any]] = {}
    for field, value in query.eq.items():
        op = "$in" if isinstance(value, tuple) else "$eq"
        conditions.setdefault(field, {})[op] = list(value) if isinstance(value, tuple) else value
    for field, (low, high) in query.ranges.items():
        if low is not None:
            conditions.setdefault(field, {})["$gte"] = low
        if high is not None:
            conditions.setdefault(field, {})["$lt"] = high
    return {field: ops for field, ops in conditions.items() if ops}


def _in_utc(value: Any) -> Any:
    """Datetimes as ``datetime.UTC`` (drivers return their own UTC tzinfo objects)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:  # a client without tz_aware: BSON datetimes are UTC
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
    if isinstance(value, dict):
        return {key: _in_utc(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_in_utc(item) for item in value]
    return value
