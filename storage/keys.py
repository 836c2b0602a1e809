"""Every Redis key yuiju uses, in one place.

Values are JSON strings validated by pydantic when read (see ``world/store.py``). Everything
under one prefix, so several towns can share a server; the prefix is a hash tag, so a town's keys
share one Redis Cluster slot and its atomic scripts work there too. Per-character keys carry the character
id from the start: one world, any number of characters.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Keys:
    prefix: str = "yuiju"
    """From ``[redis].prefix``."""

    @property
    def tag(self) -> str:
        """The prefix as a Redis Cluster hash tag (``{yuiju}``): every key of a town lands in one
        slot, so the engine's multi-key compare-and-set script also runs on a cluster."""
        return "{" + self.prefix + "}"

    @property
    def world(self) -> str:
        """STRING: the shared `WorldState` JSON (time, weather, places, resources)."""
        return f"{self.tag}:world"

    def character(self, character_id: str) -> str:
        """STRING: a `CharacterState` JSON, including her running action."""
        return f"{self.tag}:char:{character_id}:state"

    def lease(self, character_id: str) -> str:
        """STRING with PX expiry: the token of the engine that drives this character now."""
        return f"{self.tag}:char:{character_id}:lease"

    @property
    def town_lease(self) -> str:
        """STRING with PX expiry: the token of the one engine that advances the shared world (the
        world tick: time, weather, opening hours, resources, queued commands) now. Independent of
        the character leases, so any engine may take the town over when its holder stops."""
        return f"{self.tag}:town:lease"

    @property
    def workers(self) -> str:
        """ZSET: the registry of live engines ("workers"): token -> when its heartbeat expires (ms
        since the epoch on Redis's clock). A worker past its score has stopped. The default town's
        keys hold it for every town of a config; workers share the characters out by it."""
        return f"{self.tag}:workers"

    @property
    def worker_info(self) -> str:
        """HASH: token -> JSON of each live worker (name, host, pid, start, what it drives, its
        engine figures), for `yuiju status`; an entry leaves with its worker."""
        return f"{self.tag}:workers:info"

    @property
    def commands(self) -> str:
        """LIST: queued external world commands (JSON), applied at the next world tick."""
        return f"{self.tag}:commands"

    @property
    def rejected_commands(self) -> str:
        """LIST (capped): rejected commands with the reason, newest first."""
        return f"{self.tag}:commands:rejected"

    @property
    def events(self) -> str:
        """STREAM: world and behavior events for the bot, the observer and memory indexing."""
        return f"{self.tag}:events"

    @property
    def episode_outbox(self) -> str:
        """LIST: episode documents committed with the state, waiting to be written to history.

        The transactional outbox: a state change and its episode are pushed in one Redis
        transaction, then flushed to MongoDB/SQLite by idempotent upserts, so a crash or a
        dead history store loses nothing and duplicates nothing.
        """
        return f"{self.tag}:outbox:episodes"

    @property
    def outbox_dead(self) -> str:
        """LIST: outbox entries the history store can never take (not JSON, no document id, a
        document the store refuses), oldest first, each as JSON ``{entry, reason, at}`` with the
        raw entry kept verbatim; moved here so the episodes behind them flow on. For a human to
        inspect (``yuiju status``), fix and push back onto the outbox, or delete."""
        return f"{self.tag}:outbox:dead"

    @property
    def outbox_lock(self) -> str:
        """STRING with PX expiry: held by the one engine flushing the outbox right now."""
        return f"{self.tag}:outbox:lock"

    @property
    def llm_usage(self) -> str:
        """HASH: tokens and calls per world day (``YYYY-MM-DD:tokens``), for the daily budget."""
        return f"{self.tag}:llm:usage"

    def proactive_switches(self, character_id: str) -> str:
        """HASH: group id -> '1' / '0', an admin's on/off for her proactive posts there (wins over config)."""
        return f"{self.tag}:proactive:{character_id}:switches"

    def proactive_unreachable(self, character_id: str) -> str:
        """HASH: group id -> JSON {reason, at}: groups a post could not be sent to (reported once,
        then skipped until a human speaks there again or an admin switches the group on)."""
        return f"{self.tag}:proactive:{character_id}:unreachable"

    def proactive_latest(self, character_id: str) -> str:
        """STRING: JSON {event_id, fields} of her latest shareable ``action_completed`` event, for
        the admin's preview and force commands."""
        return f"{self.tag}:proactive:{character_id}:latest"

    # -- the chat side (message/) -------------------------------------------------------------

    def chat_context(self, character_id: str, session_id: str) -> str:
        """LIST: the session's model context, oldest first: user, assistant (with tool calls) and
        tool messages as JSON; compaction trims it from the left into `chat_summary`."""
        return f"{self.tag}:chat:{character_id}:{session_id}:context"

    def chat_summary(self, character_id: str, session_id: str) -> str:
        """STRING: the session's rolling summary of compacted older context."""
        return f"{self.tag}:chat:{character_id}:{session_id}:summary"

    def chat_recent(self, character_id: str, session_id: str) -> str:
        """LIST (capped): the session's latest normalised messages (JSON), hers included."""
        return f"{self.tag}:chat:{character_id}:{session_id}:recent"

    def chat_window(self, character_id: str, session_id: str) -> str:
        """LIST: messages of the open conversation window, archived as a conversation episode
        when it closes (message count or silence)."""
        return f"{self.tag}:chat:{character_id}:{session_id}:window"

    def chat_sessions(self, character_id: str) -> str:
        """SET: the session ids she has context for (``group:qq:<id>`` / ``private:tg:<id>``;
        before platforms ``group:<id>``, renamed by `SessionStore.migrate`)."""
        return f"{self.tag}:chat:{character_id}:sessions"

    @property
    def people_links(self) -> str:
        """HASH: platform-qualified account (``tg:678``) -> the person it belongs to (``qq:123``):
        one person's accounts across platforms, linked by an admin (``/link``)."""
        return f"{self.tag}:people:links"

    # -- memory requests in chat (message/memory_chat.py) ------------------------------------

    def memory_forget_pending(self, character_id: str, person: str) -> str:
        """STRING with EX expiry: JSON {kind, id, code} of a forget ``person`` asked for in chat,
        waiting for their confirmation (`/memory forget confirm <code>`)."""
        return f"{self.tag}:memory:{character_id}:forget:{person}"

    def memory_requests(self, character_id: str, person: str) -> str:
        """STRING with EX expiry: how many memory requests ``person`` made in chat this hour."""
        return f"{self.tag}:memory:{character_id}:requests:{person}"
