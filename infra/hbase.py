"""The project's HBase connection helper: a per-process happybase pool with one retry.

Missive talks to HBase through the Thrift gateway (buffered transport, binary protocol: happybase's
defaults). Every table name carries HBASE_TABLE_PREFIX, so several deployments (or the test suite)
share one cluster. The gateway drops idle connections after its socket read timeout; the pool then
hands out a dead connection once, so ``call`` retries exactly once on a transport error.

Gray failures: the Thrift socket timeout is HBASE["TIMEOUT_MS"] (by default the ``hbase`` row of
STORE_TIMEOUTS for this process: 2 s in an API process, 10 s in a worker), and every attempt goes
through a circuit breaker (infra/breakers.py): while it is open ``call`` fails at once. A call
about one row (``at``: a history page, a group's timeline) goes through the breaker of the
RegionServer serving that row (``hbase-rs``, ``RegionMaps``), every other call through the
gateway's (``hbase``).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import happybase
from django.conf import settings
from thriftpy2.thrift import TException
from thriftpy2.transport import TTransportException

from infra import breakers
from infra.store_errors import store_down, timed_out

T = TypeVar("T")
log = logging.getLogger(__name__)
TRANSPORT_ERRORS = (TTransportException, socket.error, BrokenPipeError, ConnectionError)

_pools: dict[tuple[int, str], happybase.ConnectionPool] = {}


def options() -> dict[str, Any]:
    return dict(settings.HBASE)


def address() -> str:
    return f"{options()['HOST']}:{options()['PORT']}"


def full_name(table: str) -> bytes:
    """A table's name in HBase: HBASE_TABLE_PREFIX, ``_``, the table."""
    return f"{options()['TABLE_PREFIX']}_{table}".encode()


def pool() -> happybase.ConnectionPool:
    opts = options()
    key = (os.getpid(), f"{address()}/{opts['TABLE_PREFIX']}")
    if key not in _pools:  # one pool per process: happybase connections do not survive a fork
        _pools[key] = _Pool(
            size=opts["POOL_SIZE"],
            host=opts["HOST"],
            port=opts["PORT"],
            timeout=opts["TIMEOUT_MS"],
            table_prefix=opts["TABLE_PREFIX"],
            table_prefix_separator=b"_",
            autoconnect=False,
        )
    return _pools[key]


class _Pool(happybase.ConnectionPool):
    """happybase's pool, except that a connection a call failed on is not opened again at once
    (its next use opens it, as every use does). happybase reconnects in its error handler: with
    the gateway frozen, a connect that timed out there cost a request another 2 s, and with
    ``call``'s retry a history read answered 503 after 8.03 s in the fault drill (four 2-s
    connects). The rest is happybase 1.3.0's ``connection``."""

    @contextlib.contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[happybase.Connection]:
        connection: Any = getattr(self._thread_connections, "current", None)
        return_after_use = connection is None
        if return_after_use:
            connection = self._acquire_connection(timeout)
            with self._lock:
                self._thread_connections.current = connection
        try:
            connection.open()
            yield connection
        except (TException, OSError):
            connection._refresh_thrift_client()  # a fresh, closed transport: opened on next use
            raise
        finally:
            if return_after_use:
                del self._thread_connections.current
                self._return_connection(connection)


def call(fn: Callable[[happybase.Connection], T], at: tuple[str, bytes] | None = None) -> T:
    """Run ``fn`` with a pooled connection, retrying once on a dropped Thrift connection, never
    on a timeout: a gateway that does not answer would hold the caller twice the timeout (an API
    read behind a black-holed path answered 503 after 4.0 s instead of 2; toxiproxy,
    tests/api/test_network_faults.py). The breaker sees one outcome per call, the retry's: a
    pooled connection the gateway had closed (a restart, its idle timeout) is not a gateway that
    does not answer. When each attempt counted, eight threads meeting their stale connections
    after a gateway restart opened the breaker although every retry succeeded (the HBase
    gateway-restart test's check, reading 4,000 recipients from 8 threads).

    ``at``: (table, row) when ``fn`` is about that one row: the breaker is then that of the
    RegionServer serving it, as last read (``regions.server_of``; the gateway's until a map was
    read). A RegionServer's calls go through the gateway all the same: while the gateway itself
    is known to be out (``gateway_check``), they fail at once."""
    server = regions.server_of(*at) if at is not None else ""
    if not server:
        return breakers.guarded("hbase", _call_retrying_once, fn)
    if gateway_check.out:
        raise breakers.open_error("hbase")
    try:
        return breakers.guarded_at("hbase-rs", server, _call_retrying_once, fn)
    except TRANSPORT_ERRORS as exc:
        if store_down(exc) and not isinstance(exc, breakers.StoreOpen):
            gateway_check.soon()
        raise


def _call_retrying_once(fn: Callable[[happybase.Connection], T]) -> T:
    try:
        return _call_once(fn)
    except TRANSPORT_ERRORS as exc:
        if timed_out(exc) or _not_connected(exc):
            raise
        # a pooled connection the gateway had closed, replaced; a second failure is real
        return _call_once(fn)


def _not_connected(exc: BaseException) -> bool:
    """A connect that failed (refused or timed out): the gateway itself, which a second connect
    would only wait for again."""
    return isinstance(exc, TTransportException) and exc.type == TTransportException.NOT_OPEN


def _call_once(fn: Callable[[happybase.Connection], T]) -> T:
    with pool().connection() as conn:
        conn.open()
        client = conn.client
        conn.client = _SilentAfterTimeout(client)
        try:
            return fn(conn)
        finally:
            conn.client = client  # the pool replaces it after a failure


class _SilentAfterTimeout:
    """A connection's Thrift client for one ``call``: once an RPC got no answer in time, every
    later RPC on that connection raises at once instead of waiting again. happybase closes a
    failed scan's scanner in a ``finally`` over the same connection: a scan whose gateway stopped
    answering mid-way (its RegionServer died, a freeze, a partition) waited for a second timeout
    (1.0 s with a 0.5-s timeout, tests/infra/test_hbase_timeouts.py; in the fault drill, reads
    answered after 4 s while a killed RegionServer's regions moved). The gateway's scanner is
    left to its lease."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._silent: BaseException | None = None

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if not callable(method):
            return method

        def rpc(*args: Any, **kwargs: Any) -> Any:
            if self._silent is not None:
                detail = f"{name}: the gateway did not answer this connection's last call"
                raise TTransportException(TTransportException.TIMED_OUT, detail) from self._silent
            try:
                return method(*args, **kwargs)
            except Exception as exc:
                if timed_out(exc):
                    self._silent = exc
                raise

        return rpc


def table(conn: happybase.Connection, name: str) -> happybase.Table:
    return conn.table(name)


def reset_pools() -> None:
    _pools.clear()
    regions.forget()


def _ping_at(where: str, timeout_s: float) -> None:
    """The ``hbase`` breaker's ping before a probe (infra/breakers.py): its gateway is ours."""
    ping(timeout_s)


def ping(timeout_s: float = 3.0) -> None:
    """Raise OSError/TTransportException unless a Thrift gateway answers ``tables()``."""
    opts = options()
    conn = happybase.Connection(
        host=opts["HOST"], port=opts["PORT"], timeout=int(timeout_s * 1000), autoconnect=True
    )
    try:
        conn.tables()
    finally:
        conn.close()


breakers.register_ping("hbase", _ping_at)


class GatewayCheck:
    """After a call about one row got no answer, whether the gateway itself answers: a ping
    (``tables()``, BREAKER_PING_S) on a thread of its own, one at a time. No answer marks the
    gateway out (``out``: every call about one row fails at once) and opens its breaker (the
    other calls too), and the thread pings again until it answers. A call
    about one row cannot tell a dead RegionServer from a frozen gateway (both are a timeout on
    the gateway's connection), and its RegionServer's breaker, whose ping connects to the
    RegionServer, probed through the frozen gateway every second: with the gateways frozen, one
    history read in four took 2 s (tests/api/test_hbase_freezes.py), and with the reconnects
    below, 8.03 s (scripts/fault_drill.py). Only the gateway's own answer marks it out, so one
    dead RegionServer (whose writes may open the gateway's breaker) still fails no other
    RegionServer's reads.

    While out, the pings follow each other (at most one every ``EVERY_S``): a ping sent to the
    frozen gateway is answered the moment it thaws, and that answer closes the gateway's breaker,
    which this check opened. Pinging every BREAKER_RESET_S and leaving the breaker to its own
    ping and probe, history reads went on answering 503 for 0.6-1.4 s after the gateways thawed
    in the fault drill (18-40 reads)."""

    EVERY_S = 0.25  # a refused connect answers at once: no more than 4 connects a second

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        """Nothing known (a forked child: its parent's checking thread is not in it)."""
        self.lock = threading.Lock()
        self.running = False
        self.out = False

    def soon(self) -> None:
        with self.lock:
            if self.running:
                return
            self.running = True
        threading.Thread(target=self._check, name="hbase-gateway-check", daemon=True).start()

    def _check(self) -> None:
        try:
            while True:
                started = time.monotonic()
                if self._answers():
                    break
                if not self.out:
                    log.warning("hbase: the Thrift gateway did not answer a ping")
                self.out = True
                breakers.trip("hbase")
                time.sleep(max(0.0, self.EVERY_S - (time.monotonic() - started)))
            if self.out:
                breakers.close("hbase")  # it opened it; the gateway answers again
            self.out = False
        finally:
            with self.lock:
                self.running = False

    @staticmethod
    def _answers() -> bool:
        try:
            ping(settings.BREAKER_PING_S)
        except Exception as exc:
            return not store_down(exc)
        return True


gateway_check = GatewayCheck()
os.register_at_fork(after_in_child=gateway_check.forget)


def _connects(where: str, timeout_s: float) -> None:
    """The ``hbase-rs`` breaker's ping: the RegionServer accepts a connection (a dead one
    refuses; whether it serves is the probe's to find out)."""
    host, _, port = where.rpartition(":")
    socket.create_connection((host, int(port)), timeout=timeout_s).close()


breakers.register_ping("hbase-rs", _connects)


class RegionMaps:
    """Which RegionServer serves a row, per table: the region map read through the gateway
    (``getTableRegions``: start keys, server, port) at most every REGIONS_TTL_S, on a thread of
    its own; a call never waits for it (``server_of`` answers "" until a first map is read).

    Why a breaker per RegionServer: one RegionServer killed with -9 left a third of the inbox's
    regions unanswered for ~13 s (its ZooKeeper session, then reassignment). Through the
    gateway's one breaker, every history read counted: two timeouts in a row opened it for
    every user, then a probe a second later met a dead region again. In the fault drill, 193 of
    822 history reads answered 503 while the server was out (a quarter, for a third of the
    regions over part of the 42 s)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.forget()

    def forget(self) -> None:
        """No map: the next calls read them again (a fork, a settings change)."""
        self.pid = os.getpid()
        self.maps: dict[bytes, tuple[float, list[bytes], list[str]]] = {}
        self.reading: set[bytes] = set()

    def server_of(self, table: str, row: bytes) -> str:
        if os.getpid() != self.pid:  # a forked child: its parent's reading threads are not here
            self.forget()
        name = full_name(table)
        found = self.maps.get(name)
        if found is None or time.monotonic() - found[0] >= REGIONS_TTL_S:
            self._read_soon(name)
        if found is None:
            return ""
        _, starts, servers = found
        return servers[max(bisect.bisect_right(starts, row) - 1, 0)]

    def _read_soon(self, name: bytes) -> None:
        with self.lock:
            if name in self.reading:
                return
            self.reading.add(name)
        threading.Thread(target=self._read, args=(name,), name="hbase-regions", daemon=True).start()

    def _read(self, name: bytes) -> None:
        try:
            regions = call(lambda conn: conn.client.getTableRegions(name))
            ordered = sorted((r.startKey, f"{r.serverName.decode()}:{r.port}") for r in regions)
            if ordered:
                starts, servers = [k for k, _ in ordered], [s for _, s in ordered]
                before = set(self.maps.get(name, (0, [], []))[2])
                self.maps[name] = (time.monotonic(), starts, servers)
                serving = {s for _, _, each in self.maps.values() for s in each}
                for server in before - serving:  # its regions moved: no calls left to probe it
                    breakers.forget("hbase-rs", server)
        except Exception as exc:  # the map stays as it was; the calls' breakers see the outage
            log.info("hbase: the region map of %s was not read: %r", name.decode(), exc)
        finally:
            with self.lock:
                self.reading.discard(name)


REGIONS_TTL_S = 2.0
regions = RegionMaps()
