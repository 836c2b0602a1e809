"""nonebot's log lines in the town's time, as her own lines are."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
from zoneinfo import ZoneInfo
from yuiju.cli import _nonebot_logs_in_town_time
_nonebot_logs_in_town_time(ZoneInfo("Asia/Shanghai"), to_stderr=False)
import nonebot
nonebot.init()
nonebot.logger.info("after init")
"""


def test_nonebot_lines_stay_in_town_time_after_nonebot_init_replaces_the_patcher() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    lines = out.splitlines()
    assert len(lines) >= 3, out
    assert all("+08:00 [" in line for line in lines), out
