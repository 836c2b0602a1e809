"""Debug and thinking output, privately to admins: the production sink of `[chat] debug_to_admins`.

Every turn's debug lines (steps, answers sent back by the output filter or the grounding check)
and thinking (her text next to tool calls, the tools she uses) reach each admin as a private
message, never a group; a per-minute cap keeps a busy bot from flooding them.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable

from yuiju.message.channel import Sender
from yuiju.message.model import Conversation, Outgoing

log = logging.getLogger(__name__)

MAX_CHARS = 500
"""A debug message is cut to this many characters."""


class AdminDebugSink:
    """``sink(kind, session_id, text)`` sending ``[kind session] text`` to every admin in private."""

    def __init__(
        self,
        admins: Iterable[str],
        sender: Sender,
        *,
        per_minute: int = 30,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.admins = list(admins)
        self.sender = sender
        """The chat's sender: each admin is reached on their own platform."""
        self.per_minute = per_minute
        """Debug messages per minute at most; the rest stay in the log only."""
        self.clock = clock
        self._sent: deque[float] = deque()

    async def __call__(self, kind: str, session_id: str, text: str) -> None:
        if not self.admins:
            return
        now = self.clock()
        while self._sent and now - self._sent[0] > 60:
            self._sent.popleft()
        if len(self._sent) >= self.per_minute:
            return
        self._sent.append(now)
        for admin in self.admins:
            try:
                await self.sender.send(
                    Outgoing.text(
                        Conversation.private(admin), f"[{kind} {session_id}] {text}"[:MAX_CHARS]
                    )
                )
            except Exception as exc:  # an admin who is not her friend must not stop the reply
                log.debug("debug output to admin %s failed: %s", admin, exc)
