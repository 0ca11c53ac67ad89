"""Which errors say "a store did not answer" (wait and retry), not "we are wrong".

The classification alone, on the client libraries' exception types, importing none of Missive's
clients: the clients (infra/redis.py, infra/hbase.py) and their circuit breakers
(infra/breakers.py) ask it, and infra/outages.py, which also probes the stores, builds on it.

- ``store_unavailable``: an outage for the API (503 + Retry-After) and for campaign batches (put
  back, never failed): transport errors and timeouts, a breaker that is open, a replica not yet
  promoted, a cluster slot being moved, Redis refusing writes (OOM, MISCONF), the database's
  "come back later" codes.
- ``store_down``: the narrower question a breaker asks: did the store answer at all? A deadlock,
  a lock wait, a read-only replica or a Redis that refuses writes answered, and open none.
- ``refused_write``: ``OOM`` or ``MISCONF`` when Redis refused a write for want of memory or disk.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator

import happybase  # noqa: F401  (loads the Hbase_thrift module below)
from django.db import InterfaceError, OperationalError
from happybase.pool import NoConnectionsAvailable
from Hbase_thrift import IOError as HBaseIOError
from pybreaker import CircuitBreakerError
from redis import exceptions as redis_errors
from thriftpy2.transport import TTransportException

# Client-side (2xxx) connection losses and the server's own "come back later" answers:
# 1040 too many connections, 1053 shutting down, 1205 lock wait timeout, 1213 deadlock,
# 1290 read-only (a replica or a failover in progress), 1927 connection killed, 4031 idle timeout.
DB_UNAVAILABLE_CODES = frozenset(
    {1040, 1053, 1205, 1213, 1290, 1927, 2002, 2003, 2006, 2013, 2055, 4031}
)
REDIS_UNAVAILABLE = (
    redis_errors.ConnectionError,  # includes BusyLoadingError (a restarted Redis loading its data)
    redis_errors.TimeoutError,
    redis_errors.ReadOnlyError,  # a replica that has not been promoted yet
    redis_errors.ClusterDownError,  # a cluster with a slot unserved (a failover in progress)
    redis_errors.SlotNotCoveredError,
    redis_errors.TryAgainError,  # a slot being migrated
    redis_errors.MasterDownError,
)
TRANSPORT = (TTransportException, NoConnectionsAvailable, socket.timeout, ConnectionError)
# The client-side codes of a server that did not answer (no route, refused, gone, lost, timed out)
# and the server shutting down: what a breaker counts (``store_down``).
DB_DOWN_CODES = frozenset({1053, 2002, 2003, 2006, 2013, 2055})
REDIS_DOWN = (redis_errors.ConnectionError, redis_errors.TimeoutError)
# "OOM command not allowed when used memory > 'maxmemory'", "MISCONF Redis is configured to save
# RDB snapshots, but it's currently unable to persist to disk" (also inside a script's or a
# pipeline's error message)
REFUSED_WRITE = re.compile(r"(?:^|\W)(OOM|MISCONF) ")


def store_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) says a store did not answer, not that we are wrong."""
    return any(_unavailable(e) for e in _chain(exc))


def unavailable_store(exc: BaseException) -> tuple[str, str] | None:
    """(which store, what its client said) when ``exc`` says a store did not answer, in an
    operator's words: "the database", "Redis" or "HBase"; None when it is no outage."""
    for current in _chain(exc):
        if _unavailable(current):
            return _kind(current), _said(current)
    return None


def _kind(exc: BaseException) -> str:
    if isinstance(exc, (InterfaceError, OperationalError)):
        return "the database"
    if isinstance(exc, redis_errors.RedisError):
        return "Redis"
    if isinstance(exc, (*TRANSPORT, HBaseIOError)):
        return "HBase"
    return "a store"


def _said(exc: BaseException) -> str:
    if isinstance(exc, OperationalError) and len(exc.args) == 2:
        return f"{exc.args[1]} ({exc.args[0]})"  # MySQLdb's (code, message)
    return str(exc) or type(exc).__name__


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what caused it, each once (``__cause__``, else ``__context__``)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _unavailable(exc: BaseException) -> bool:
    if isinstance(exc, (*REDIS_UNAVAILABLE, *TRANSPORT, InterfaceError, CircuitBreakerError)):
        return True
    if isinstance(exc, redis_errors.ResponseError):
        return refused_write(exc) is not None
    if isinstance(exc, HBaseIOError):
        return "TableNotFound" not in str(getattr(exc, "message", "") or exc)
    if isinstance(exc, OperationalError):
        return _db_unavailable(exc)
    return False


def _db_unavailable(exc: OperationalError) -> bool:
    code = exc.args[0] if exc.args else None
    if isinstance(code, int):
        return code in DB_UNAVAILABLE_CODES
    return "database is locked" in str(exc)  # SQLite, one machine: a writer holds the file


def store_down(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) says a store did not answer at all: what a circuit
    breaker counts (infra/breakers.py)."""
    return any(_down(e) for e in _chain(exc))


def _down(exc: BaseException) -> bool:
    if isinstance(exc, (*REDIS_DOWN, *TRANSPORT)):
        return True
    if isinstance(exc, OperationalError):
        return bool(exc.args) and exc.args[0] in DB_DOWN_CODES
    return False


def database_down(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) says the database did not answer at all (what its
    breaker counts, or the breaker itself, open): a read the replica might serve instead."""
    return any(
        isinstance(e, InterfaceError) or (isinstance(e, OperationalError) and _down(e))
        for e in _chain(exc)
    )


def timed_out(exc: BaseException) -> bool:
    """True when ``exc`` is a read or connect that ran out of time (the store may be frozen: a
    second try would wait as long again), not a connection that was lost."""
    if isinstance(exc, TTransportException):
        return bool(exc.type == TTransportException.TIMED_OUT)
    return isinstance(exc, (TimeoutError, redis_errors.TimeoutError))


def refused_write(exc: BaseException) -> str | None:
    """``OOM`` or ``MISCONF`` when Redis refused a write for want of memory or disk, else None."""
    if isinstance(exc, redis_errors.OutOfMemoryError):  # redis-py drops its "OOM " prefix
        return "OOM"
    if not isinstance(exc, redis_errors.ResponseError):
        return None
    found = REFUSED_WRITE.search(str(exc))
    return found.group(1) if found else None
