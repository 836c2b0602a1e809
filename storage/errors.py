"""Errors raised by `storage`: one small hierarchy, messages that name the problem and the fix."""

from __future__ import annotations

__all__ = [
    "CorruptValue",
    "InvalidDocument",
    "StorageError",
    "StoreDamaged",
    "StoreUnavailable",
    "UndeclaredField",
]


class StorageError(Exception):
    """Base class of every error raised by `storage`."""


class StoreUnavailable(StorageError):
    """A store (Redis, MongoDB, the SQLite file) cannot be used now: unreachable, locked, busy,
    full, read-only, refusing our credentials, damaged. Nothing about what was to be written:
    it stays queued and is written again later."""


class CorruptValue(StorageError):
    """A stored value cannot be decoded; the message names where it lives."""


class StoreDamaged(StoreUnavailable, CorruptValue):
    """The store's own file is damaged (not one value in it): unusable until a human restores or
    moves it, whatever is written."""


class UndeclaredField(StorageError):
    """A query used a collection or field that no `CollectionSpec` declared."""


class InvalidDocument(StorageError, ValueError):
    """A document or query value cannot be stored as is (naive datetime, unsupported type, too
    large, refused by a constraint...): sending it again never helps."""
