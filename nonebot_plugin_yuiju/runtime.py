"""The running chat service of this process, shared by the matchers and the start-up hooks (the
plugin's own state: the chat core knows nothing of it).

`yuiju bot` / `yuiju run` set `factory` (opening stores and models at driver start-up); tests set
`service` directly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from nonebot_plugin_yuiju.send import DirectChannels
from yuiju.message.service import ChatService


@dataclass
class Runtime:
    service: ChatService | None = None
    factory: Callable[[], Awaitable[ChatService]] | None = None
    """Builds the service at start-up when `service` is not set."""
    on_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Closers run at shutdown (stores, proactive task)."""
    direct_channels: DirectChannels = field(default_factory=DirectChannels)
    """Private channels people wrote from (the matchers note them, the sender answers there)."""
    extras: dict[str, Any] = field(default_factory=dict)


RUNTIME = Runtime()
