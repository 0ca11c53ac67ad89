"""The project's HBase connection helper: a per-process happybase pool with one retry.

Missive talks to HBase through the Thrift gateway (buffered transport, binary protocol: happybase's
defaults). Every table name carries HBASE_TABLE_PREFIX, so several deployments (or the test suite)
share one cluster. The gateway drops idle connections after its socket read timeout; the pool then
hands out a dead connection once, so ``call`` retries exactly once on a transport error.

Gray failures: the Thrift socket timeout is HBASE["TIMEOUT_MS"] (by default the ``hbase`` row of
STORE_TIMEOUTS for this process: 2 s in an API process, 10 s in a worker), and every attempt goes
through the ``hbase`` circuit breaker (infra/breakers.py): while it is open ``call`` fails at once.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any, TypeVar

import happybase
from django.conf import settings
from thriftpy2.transport import TTransportException

from infra import breakers
from infra.store_errors import timed_out

T = TypeVar("T")
TRANSPORT_ERRORS = (TTransportException, socket.error, BrokenPipeError, ConnectionError)

_pools: dict[tuple[int, str], happybase.ConnectionPool] = {}


def options() -> dict[str, Any]:
    return dict(settings.HBASE)


def address() -> str:
    return f"{options()['HOST']}:{options()['PORT']}"


def pool() -> happybase.ConnectionPool:
    opts = options()
    key = (os.getpid(), f"{address()}/{opts['TABLE_PREFIX']}")
    if key not in _pools:  # one pool per process: happybase connections do not survive a fork
        _pools[key] = happybase.ConnectionPool(
            size=opts["POOL_SIZE"],
            host=opts["HOST"],
            port=opts["PORT"],
            timeout=opts["TIMEOUT_MS"],
            table_prefix=opts["TABLE_PREFIX"],
            table_prefix_separator=b"_",
            autoconnect=False,
        )
    return _pools[key]


def call(fn: Callable[[happybase.Connection], T]) -> T:
    """Run ``fn`` with a pooled connection, retrying once on a dropped Thrift connection, never
    on a timeout: a gateway that does not answer would hold the caller twice the timeout (an API
    read behind a black-holed path answered 503 after 4.0 s instead of 2; toxiproxy,
    tests/api/test_network_faults.py). The breaker sees one outcome per call, the retry's: a
    pooled connection the gateway had closed (a restart, its idle timeout) is not a gateway that
    does not answer. When each attempt counted, eight threads meeting their stale connections
    after a gateway restart opened the breaker although every retry succeeded (the HBase
    gateway-restart test's check, reading 4,000 recipients from 8 threads)."""
    return breakers.guarded("hbase", _call_retrying_once, fn)


def _call_retrying_once(fn: Callable[[happybase.Connection], T]) -> T:
    try:
        return _call_once(fn)
    except TRANSPORT_ERRORS as exc:
        if timed_out(exc):
            raise
        # the pool replaced the broken connection; a second failure is real
        return _call_once(fn)


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
