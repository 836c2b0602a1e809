"""Where LLM usage goes: the daily counters in Redis (the budget and the observer read them)
and one ledger document per call through the episode outbox (the engine writes it to history)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from redis.exceptions import RedisError

from yuiju.llm.usage import CallRecord
from yuiju.memory.ledger import LLM_CALLS, call_document, usage_increments
from yuiju.storage.keys import Keys
from yuiju.world.clock import Clock
from yuiju.world.store import dumps_doc
from yuiju.world.transitions import outbox_entry

log = logging.getLogger(__name__)


class UsageLedger:
    """A `llm.UsageSink`: counts every call on the world's day and queues its ledger document."""

    def __init__(self, redis: Any, keys: Keys, clock: Clock) -> None:
        self.redis = redis
        self.keys = keys
        self.clock = clock

    async def __call__(self, call: CallRecord) -> None:
        now = self.clock.now()
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                for field, amount in usage_increments(now.date().isoformat(), call).items():
                    if amount:
                        pipe.hincrby(self.keys.llm_usage, field, amount)
                if call.reached:  # a request that never reached the provider is no call
                    doc = outbox_entry(LLM_CALLS.name, call_document(now, call))
                    pipe.rpush(self.keys.episode_outbox, dumps_doc(doc))
                await pipe.execute()
        except (RedisError, OSError) as exc:  # accounting must never fail the call it accounts
            log.warning("LLM usage not recorded (%s): %s", exc, call)

    async def tokens_on(self, now: datetime) -> int:
        """Tokens of every call on ``now``'s day, failed calls' estimated prompts included."""
        return int(
            await self.redis.hget(self.keys.llm_usage, f"{now.date().isoformat()}:tokens") or 0
        )
