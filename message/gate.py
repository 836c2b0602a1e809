"""Whether she answers a message: who may talk to her where, while she sleeps, and the flood and
rate limits (per user, per group's replies, and a group flooded by anyone)."""

from __future__ import annotations

import logging
import time
from collections import defaultdict, deque
from collections.abc import Callable

from yuiju.characters import CharacterCard
from yuiju.config import ChatConfig
from yuiju.message.model import Entry, split_id

log = logging.getLogger(__name__)


class ReplyGate:
    def __init__(
        self, cfg: ChatConfig, card: CharacterCard, is_admin: Callable[[str], bool]
    ) -> None:
        self.cfg = cfg
        """The `[chat]` section."""
        self.card = card
        self.is_admin = is_admin
        self.monotonic: Callable[[], float] = time.monotonic
        """The clock of the rate limits (tests move it)."""
        self._user_times: dict[str, deque[float]] = defaultdict(deque)
        self._group_replies: dict[str, deque[float]] = defaultdict(deque)
        self._group_messages: dict[str, deque[float]] = {}
        self._flooded: set[str] = set()

    def private_allowed(self, person: str) -> bool:
        """Whether she answers ``person`` in private: an admin, someone on the whitelist, or anyone
        on a platform whitelisted as a whole (``"web:*"``: a platform that lets in only people its
        owner let in, such as the observer page behind its token)."""
        whitelist = self.cfg.private_whitelist
        return (
            person in whitelist or f"{split_id(person)[0]}:*" in whitelist or self.is_admin(person)
        )

    def called_by_name(self, text: str) -> bool:
        return any(n and n in text for n in (self.card.name, *self.card.nicknames))

    def addressed(self, entry: Entry) -> bool:
        """Whether ``entry`` is one she may answer at all, whatever her state and the limits: a
        message to her in a private chat she keeps or an enabled group. Counts nothing (`decide`
        does); the caller reads her state only for these."""
        return self._not_addressed(entry) is None

    def _not_addressed(self, entry: Entry) -> str | None:
        cfg = self.cfg
        if entry.from_bot:
            return "her own message"
        if entry.scene == "private":
            return None if self.private_allowed(entry.user_id) else "private sender not whitelisted"
        policy = cfg.group_policy(entry.conversation.key)
        if not policy.enabled or policy.reply == "off":
            return "group not enabled"
        directed = (
            entry.mentions_me
            or entry.reply_to_me
            or (policy.reply == "name" and self.called_by_name(entry.text))
        )
        return None if directed else "not addressed to her"

    def decide(self, entry: Entry, asleep: bool) -> tuple[bool, str]:
        """Whether she answers ``entry``, and why (or why not)."""
        cfg = self.cfg
        if entry.from_bot:
            return False, "her own message"
        now = self.monotonic()
        group = entry.group_key
        flooded = group is not None and self._group_flooded(group, now)
        refusal = self._not_addressed(entry)
        if refusal is not None:
            return False, refusal
        if asleep:
            if cfg.answer_while_asleep == "never":
                return False, "asleep"
            if entry.scene == "group" and not entry.mentions_me:
                return False, "asleep (only a direct @ wakes her)"
        times = self._user_times[entry.user_id]
        while times and now - times[0] > 60:
            times.popleft()
        times.append(now)
        if len(times) > cfg.user_messages_per_minute:
            return False, "user flood"
        if flooded:
            return False, "group flood"
        if group is not None:
            replies = self._group_replies[group]
            while replies and now - replies[0] > 60:
                replies.popleft()
            if len(replies) >= cfg.group_replies_per_minute:
                return False, "group rate limit"
            replies.append(now)
        return True, "woken up" if asleep else "addressed"

    def _group_flooded(self, group_id: str, now: float) -> bool:
        """Count one incoming message of ``group_id``; True while more than
        ``group_messages_per_minute`` arrived within the last minute (bounded memory per group)."""
        limit = self.cfg.group_messages_per_minute
        times = self._group_messages.get(group_id)
        if times is None or times.maxlen != limit + 1:
            times = self._group_messages[group_id] = deque(maxlen=limit + 1)
        times.append(now)
        flooded = len(times) > limit and now - times[0] <= 60
        if flooded and group_id not in self._flooded:
            log.info(
                "group %s is flooded (over %d messages a minute): recording, not answering",
                group_id,
                limit,
            )
            self._flooded.add(group_id)
        elif not flooded and group_id in self._flooded:
            log.info("group %s calmed down: answering again", group_id)
            self._flooded.discard(group_id)
        return flooded
