"""The run's randomness: one seed, owned by the engine, derived per town and per character.

mesa's ``Model.random``, made stateless: a draw's generator is a function of the seed, whose
draw it is and what is drawn (``derive("yuiju").rng("2026-09-01T07:00")``), never of how many
draws came before. So the same seed gives the same life whichever worker drives a character,
after any restart, and in any order of the characters' steps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Randomness:
    """A source of seeded generators (the engine hands one to each step and world tick)."""

    key: str
    """The seed and the parts derived so far, joined by ``|``."""

    @classmethod
    def seeded(cls, seed: int) -> Randomness:
        return cls(str(seed))

    def derive(self, *parts: object) -> Randomness:
        """The randomness of a part of the run (a character: ``derive(character_id)``), drawn
        from independently of the rest."""
        return Randomness("|".join([self.key, *map(str, parts)]))

    def rng(self, *parts: object) -> random.Random:
        """A fresh generator for one draw, seeded by this key and what is drawn (``parts``)."""
        return random.Random("|".join([self.key, *map(str, parts)]))


UNSEEDED = Randomness.seeded(0)
"""The randomness of seed 0 (``[world] seed``'s default): what a step or a tick made by hand, with
no engine to hand it the run's, draws from."""
