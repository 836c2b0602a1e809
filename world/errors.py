"""Errors of the world package: what the model can fix goes back to it, what a human must fix stops."""

from __future__ import annotations


class WorldError(Exception):
    """Base class for errors raised by world/."""


class ConfigurationError(WorldError):
    """Something in the configuration or content is unusable; the message says what and how to fix it."""


class ActionLoadError(ConfigurationError):
    """Action modules cannot be loaded together (e.g. a duplicate id)."""


class CorruptState(WorldError):
    """A value in Redis does not validate. Names the key and what is wrong."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(
            f"Redis key {key!r} holds an invalid value: {problem}. Fix the value by hand, or delete "
            f"the key (redis-cli DEL {key}) to start that part of the world afresh."
        )
        self.key = key
        self.problem = problem


class InvalidDecision(WorldError):
    """A decision the engine cannot carry out; the message (Chinese) goes back to the model."""


class LeaseLost(WorldError):
    """Another engine drives this character now; this one must stop driving it."""
