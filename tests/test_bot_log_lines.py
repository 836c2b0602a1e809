"""nonebot's own log lines in `yuiju bot`: a frame field it prints with a lone UTF-16 surrogate
(a fuzzed ``sub_type``, a sender's nickname) is written, not a loguru "Logging error" traceback
(found by bench/chat_burst.py: 70 such tracebacks in a 10,000-frame burst)."""

from __future__ import annotations

import io
from datetime import UTC

import pytest
from loguru import logger

from yuiju.cli import _nonebot_line_filter


def test_a_nonebot_line_with_a_lone_surrogate_is_written_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)  # strict, as stdout is
    handler = logger.add(
        stream, format="{extra[town_time]} {message}", filter=_nonebot_line_filter(UTC), catch=True
    )
    try:
        logger.success("OneBot V11 10001 | [message.group.\ud83d]: Message 1011 'fuzz 22'")
    finally:
        logger.remove(handler)
    written = raw.getvalue().decode("utf-8")
    assert "[message.group.\\ud83d]: Message 1011 'fuzz 22'" in written
    # (nonebot's own handler, which `yuiju bot` replaces with ours, still fails here)
    assert f"Logging error in Loguru Handler #{handler} " not in capsys.readouterr().err
