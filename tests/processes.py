"""Processes the tests start, stopped whatever the tests left behind.

A daemon that a test starts (`yuiju world`, `yuiju run`) spawns an embedded redis-server that
daemonises itself: when the daemon is killed, or a test fails before stopping it, the server goes
on running after the suite. Every process started from this test run carries `RUN_MARK` in its
environment (children inherit it), so the run can find and stop what it left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from pathlib import Path

import psutil

RUN_MARK = "PYTEST_YUIJU_RUN"
"""Environment variable naming this test run (not ``YUIJU_*``: tests strip those for their
subprocesses)."""


def mark_run() -> str:
    """Name this run in the environment that every process it starts inherits."""
    os.environ[RUN_MARK] = mark = uuid.uuid4().hex
    return mark


def started_by_run(mark: str, temp: Path) -> list[psutil.Process]:
    """Live processes started from the run named ``mark`` (not this one): those with the mark in
    their environment, and those working in the run's ``temp`` folder (a redis-server works in
    its data dir, and its process title overwrites the environment that /proc shows)."""
    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        with contextlib.suppress(psutil.Error):
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if process.environ().get(RUN_MARK) == mark or Path(process.cwd()).is_relative_to(temp):
                found.append(process)
    return found


def stop(processes: list[psutil.Process], timeout: float = 5.0) -> None:
    """SIGTERM (a redis-server saves and exits), then SIGKILL what is still there."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=timeout)


def stop_embedded_redis(data_dir: Path) -> None:
    """Stop the embedded redis-server of ``data_dir`` if one still runs (its registry says which)."""
    try:
        registry = json.loads((data_dir / "redis.db.settings").read_text())
        pid = int(Path(registry["pidfile"]).read_text().strip())
        process = psutil.Process(pid)
        if "redis-server" not in process.name():
            return
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return
    stop([process])
