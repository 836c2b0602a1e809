"""Errors raised by `storage`: one small hierarchy, messages that name the problem and the fix."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = [
    "CorruptValue",
    "InvalidDocument",
    "StorageError",
    "StoreUnavailable",
    "UndeclaredField",
    "redact_url",
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


_SECRET_PARAMS = ("password", "secret", "token", "key")


def redact_url(url: str) -> str:
    """A URL safe for logs: the password and secret-looking query values become ``***``.

    Handles multi-host MongoDB URLs (``mongodb://u:pw@h1:27017,h2:27017/db``), which
    ``urllib``'s ``.port`` cannot parse.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hosts = netloc.rpartition("@")
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:***@{hosts}" if has_password else f"{user}@{hosts}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, "***" if any(s in k.lower() for s in _SECRET_PARAMS) else v) for k, v in pairs],
            safe="*/:,",
        )
    if (netloc, query) == (parts.netloc, parts.query):
        return url  # urlunsplit would turn unix:///path into unix:/path
    return urlunsplit(parts._replace(netloc=netloc, query=query))
