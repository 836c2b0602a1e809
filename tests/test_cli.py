"""The `yuiju` command as a user meets it: pipes, empty answers, and where `--config` may go."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from yuiju import cli as yuiju_cli

ROOT = Path(__file__).parents[1]


pytestmark = pytest.mark.usefixtures("clean_config_env")


def write_config(tmp_path: Path, redis_url: str, extra: str = "") -> Path:
    """Stores on the tests' Redis (its own prefix) and SQLite under tmp_path; offline memory."""
    path = tmp_path / "yuiju.toml"
    path.write_text(
        f"""
[app]
data_dir = "{(tmp_path / "data").as_posix()}"
[redis]
url = "{redis_url}"
prefix = "cli-{tmp_path.name}"
[embeddings]
provider = "hashing"
{extra}""",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("argv", [["status"], ["status", "--json"], ["actions", "list"]])
def test_output_into_a_closed_pipe_ends_quietly(
    argv: list[str], tmp_path: Path, redis_url: str
) -> None:
    """`yuiju status | head -3`: the reader is gone before she writes; no traceback."""
    config = write_config(tmp_path, redis_url)
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {k: v for k, v in os.environ.items() if not k.startswith("YUIJU_")}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "yuiju.cli", "--config", str(config), *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    err = done.stderr.decode(errors="replace")
    assert (
        "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err
    ), err
    assert done.returncode == 128 + signal.SIGPIPE, (
        err
    )  # what a Unix tool killed by SIGPIPE returns


def test_a_memory_search_that_finds_nothing_says_so(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, redis_url)

    assert yuiju_cli.main(["--config", str(config), "memory", "search", "海边的贝壳"]) == 0

    out = capsys.readouterr().out
    assert "no memories" in out and "海边的贝壳" in out


SUBCOMMANDS = [
    ["run"],
    ["world"],
    ["simulate"],
    ["status"],
    ["actions", "list"],
    ["actions", "check"],
    ["actions", "why", "walk_in_park"],
    ["memory", "search", "贝壳"],
    ["memory", "distill"],
    ["memory", "reindex"],
    ["bot"],
]


@pytest.mark.parametrize("argv", SUBCOMMANDS, ids=" ".join)
@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
def test_config_is_read_before_or_after_the_subcommand(
    argv: list[str], before: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "elsewhere.toml"
    option = ["--config", str(missing)]

    code = yuiju_cli.main(option + argv if before else argv + option)

    err = capsys.readouterr().err
    assert code == 2 and "elsewhere.toml" in err and "does not exist" in err, err


def test_init_writes_where_config_points_after_the_subcommand(tmp_path: Path) -> None:
    target = tmp_path / "conf" / "town.toml"
    target.parent.mkdir()
    assert yuiju_cli.main(["init", "--config", str(target)]) == 0
    assert target.exists() and not (tmp_path / "yuiju.toml").exists()


BAD_CHOICES = """
from pydantic import BaseModel

from yuiju.world.action import Action, one_of


class Pick(BaseModel):
    flower: str


pick_flowers = Action(id="pick_flowers", name="摘花", description="摘一朵花。[心情+2][10分钟]", at="park",
                      params=Pick, choices=lambda ctx: {"flowers": one_of(["樱花", "雏菊"])}, duration=10)
"""


def test_actions_check_finds_choices_naming_a_field_the_params_lack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Otherwise it shows only when a decision offers the action (and then every such decision
    falls back to the offline policy)."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "flowers.py").write_text(BAD_CHOICES, encoding="utf-8")
    config = tmp_path / "yuiju.toml"
    config.write_text(
        f'[world]\naction_dirs = ["{(tmp_path / "mine").as_posix()}"]\n', encoding="utf-8"
    )

    assert yuiju_cli.main(["--config", str(config), "actions", "check"]) == 1

    out = capsys.readouterr().out
    assert "'pick_flowers'" in out and "'flowers'" in out and "['flower']" in out, out
    assert out.count("problem:") == 1


# -- a newcomer's first look: status, the action list, the log -----------------------------------


async def test_status_of_a_worker_without_figures_yet_says_so_instead_of_none(
    tmp_path: Path, redis_url: str, redis: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker that has not decided anything yet has no overhead or lag percentiles."""
    import json

    from tests.conftest import make_engine
    from yuiju.config import load_config

    config = write_config(tmp_path, redis_url)
    cfg = load_config(str(config))
    kit = await make_engine(redis, None, prefix=cfg.redis.prefix)
    info = kit.engine._worker_info()
    assert info["overhead_ms"]["p95"] is None  # the case at hand: nothing measured yet
    await kit.store.heartbeat("fresh-worker", 30_000, json.dumps(info, default=str))

    assert await yuiju_cli._status(cfg, as_json=False) == 0

    out = capsys.readouterr().out
    worker = next(line for line in out.splitlines() if "决策 0 次" in line)
    assert "None" not in out, worker
    assert "引擎开销" in worker and "还没有" in worker, worker


def display_width(text: str) -> int:
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def test_actions_list_columns_line_up_on_screen_with_chinese_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Padded by display width (a Chinese character takes two columns), with no tabs."""
    import re

    assert yuiju_cli.main(["actions", "list"]) == 0

    rows = capsys.readouterr().out.splitlines()
    assert len(rows) > 20 and not any("\t" in row for row in rows)
    starts = set()
    for row in rows:
        cells = list(re.finditer(r"\S+", row))
        assert len(cells) == 4, row  # id, name, place, tags
        starts.add(tuple(display_width(row[: cell.start()]) for cell in cells))
    assert len(starts) == 1, sorted(starts)[:3]


def test_log_lines_are_stamped_in_the_towns_time_zone_and_say_so() -> None:
    """Whatever the machine's zone (UTC on a server), the log reads like the panel's clock."""
    import io
    import logging
    from datetime import datetime
    from zoneinfo import ZoneInfo

    stream = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        root.handlers = []
        yuiju_cli._setup_logging("INFO", tz=ZoneInfo("Asia/Shanghai"), stream=stream)
        record = logging.makeLogRecord(
            {"name": "yuiju", "levelno": 20, "levelname": "INFO", "msg": "she woke up"}
        )
        record.created = datetime(2026, 9, 1, 0, 40, 41, tzinfo=ZoneInfo("UTC")).timestamp()
        root.handle(record)
    finally:
        root.handlers, _ = saved
        root.setLevel(saved[1])
    assert stream.getvalue().startswith("08:40:41+08:00 INFO"), stream.getvalue()


# -- yuiju actions why ID ------------------------------------------------------------------------


def test_actions_why_on_a_fresh_start_says_which_preconditions_hold(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No state yet: she would start at home, awake (her card), so a walk in the park is not
    offered because she is not in the park; each precondition in its own words."""
    config = write_config(tmp_path, redis_url)

    assert yuiju_cli.main(["--config", str(config), "actions", "why", "walk_in_park"]) == 0

    out = capsys.readouterr().out
    assert "walk_in_park" in out and "在公园散步" in out and "not offered" in out, out
    assert "fresh start" in out, out
    lines = out.splitlines()
    assert "  ✓ 她醒着" in lines, out
    assert "  ✗ 她在家，不在南风公园" in lines, out
    assert any(line.startswith("  ✓ 体力至少 8") for line in lines), out
    assert any("06:00–21:00" in line for line in lines), out


async def test_actions_why_reads_her_state_from_the_stores(
    tmp_path: Path, redis_url: str, redis: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from datetime import datetime

    from tests.conftest import TZ, make_character, make_world
    from yuiju.config import load_config
    from yuiju.storage.keys import Keys
    from yuiju.world.store import Commit, StateStore

    config = write_config(tmp_path, redis_url)
    cfg = load_config(str(config))
    now = datetime.now(TZ)
    await StateStore(redis, Keys(cfg.redis.prefix)).transact(
        lambda _snap: (
            Commit(
                world=make_world(now),
                characters={"yuiju": make_character(location="park", stamina=5)},
            ),
            None,
        ),
        characters=["yuiju"],
    )

    assert await yuiju_cli._actions_why(cfg, "walk_in_park", None, now=now) == 0

    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "not offered" in out and "fresh start" not in out, out
    assert "  ✓ 她在南风公园" in lines, out
    assert "  ✗ 体力不足 8（现在 5）" in lines, out


def test_actions_why_an_unknown_action_names_the_close_ones(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, redis_url)

    assert yuiju_cli.main(["--config", str(config), "actions", "why", "walk_in_parc"]) == 2

    err = capsys.readouterr().err
    assert "'walk_in_parc'" in err and "walk_in_park" in err and "yuiju actions list" in err


def test_simulate_prints_what_was_never_offered_and_writes_every_offer_to_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    report = tmp_path / "r.json"

    assert yuiju_cli.main(["simulate", "--days", "1", "--quiet", "--report", str(report)]) == 0

    out = capsys.readouterr().out
    assert '"never_offered"' in out and '"offered"' not in out and '"candidates"' not in out
    written = json.loads(report.read_text(encoding="utf-8"))
    assert len(written["offered"]) == written["decisions"] and written["offered_histogram"]


def test_the_docs_command_table_names_the_memory_search_flags() -> None:
    rows = [
        row
        for row in (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8").splitlines()
        if row.startswith("| `yuiju memory search")
    ]
    assert rows and "--user" in rows[0] and "--group" in rows[0]


def test_a_stopped_daemon_does_not_wait_forever_for_a_stuck_thread() -> None:
    """A thread that never ends (an embedding still computing, a library's idle worker) must not
    keep a stopped daemon alive: its exit waits a bounded time, then names what it leaves."""
    import threading
    import time

    from yuiju.cli import join_threads

    release = threading.Event()
    stuck = threading.Thread(target=release.wait, name="stuck-embedder")
    quick = threading.Thread(target=time.sleep, args=(0.05,), name="quick")
    stuck.start()
    quick.start()
    try:
        began = time.monotonic()
        left = join_threads(0.3)
        assert time.monotonic() - began < 1.0
        names = [t.name for t in left]  # (and whatever else this test process left running)
        assert "stuck-embedder" in names and "quick" not in names and not quick.is_alive()
    finally:
        release.set()
        stuck.join()


def test_a_daemons_loop_ends_without_waiting_for_work_still_in_its_threads() -> None:
    """`asyncio.run` waits, without a bound, for whatever still runs in the default executor (an
    embedding of a long batch): a daemon's loop does not; its exit waits a bounded time."""
    import threading
    import time

    from yuiju.cli import run_daemon

    release = threading.Event()

    async def main() -> int:
        asyncio.get_running_loop().run_in_executor(None, release.wait)
        await asyncio.sleep(0.05)
        return 7

    began = time.monotonic()
    try:
        assert run_daemon(main()) == 7
        assert time.monotonic() - began < 1.0
    finally:
        release.set()
