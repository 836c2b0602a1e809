"""Watching what a store is asked for in tests."""

from __future__ import annotations

from typing import Any

from yuiju.storage.history import Eq, HistoryStore, Ranges


def record_reads(history: HistoryStore) -> list[dict[str, Any]]:
    """Every document ``history.find`` returns from now on, in order (the store still answers):
    for asserting that a query never read what it should not."""
    read: list[dict[str, Any]] = []
    find = history.find

    async def spy(
        collection: str,
        *,
        eq: Eq | None = None,
        ranges: Ranges | None = None,
        sort: str | None = None,
        descending: bool = False,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        found = await find(
            collection, eq=eq, ranges=ranges, sort=sort, descending=descending, limit=limit
        )
        read.extend(found)
        return found

    history.find = spy  # type: ignore[method-assign]
    return read
