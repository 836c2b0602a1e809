"""Errors raised by `storage`: one small hierarchy, messages that name the problem and the fix."""

from __future__ import annotations

__all__ = [
    "CorruptValue",
    "InvalidDocument",
    "StorageError",
    "StoreUnavailable",
    "UndeclaredField",
]


class StorageError(Exception):
    """Base class of every error raised by `storage`."""


class StoreUnavailable(StorageError):
    """A store (Redis, MongoDB, the SQLite file) cannot be reached or refused us."""


class CorruptValue(StorageError):
    """A stored value cannot be decoded; the message names where it lives."""


class UndeclaredField(StorageError):
    """A query used a collection or field that no `CollectionSpec` declared."""


class InvalidDocument(StorageError, ValueError):
    """A document or query value cannot be stored as is (naive datetime, unsupported type...)."""
