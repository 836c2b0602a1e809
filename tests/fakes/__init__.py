"""Protocol fakes (placeholder docstring, rewritten below)."""

from tests.fakes._base import BAD_FRAMES, ApiCall, BadFrame, FakePlatform, Person, Sent
from tests.fakes.app import NoneBotApp, free_port
from tests.fakes.satori import SatoriFake

__all__ = [
    "BAD_FRAMES",
    "ApiCall",
    "BadFrame",
    "FakePlatform",
    "NoneBotApp",
    "Person",
    "SatoriFake",
    "Sent",
    "free_port",
]
