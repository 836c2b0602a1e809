"""The message log's collection: every message seen or sent, per chat session.

Written by the chat side (`message.recorder`), read there and by memory governance
(`memory.governance`: a person's lines, found by their id). Declared here, below both, so the two
ensure one spec.
"""

from __future__ import annotations

from yuiju.storage.history import CollectionSpec

CHAT_LOG = CollectionSpec(
    name="chat_log",
    fields=("character_id", "session_id", "time", "id", "user_id"),
    indexes=(
        ("character_id", "session_id", "time"),
        ("character_id", "time"),
        ("character_id", "session_id", "id"),
        ("character_id", "user_id", "time"),
    ),
)
"""Every message seen or sent, per session: the message log. Records written before platforms
(``user_id`` a number, ``session_id`` ``group:123``) read as QQ's (`message.model.Entry` validates
them). A message taken back keeps its record, marked ``recalled`` with its words removed."""
