"""Which failures mean "a store is unavailable" (wait and retry) rather than a bug or bad data.

Transport errors and timeouts from Redis, HBase (its Thrift gateway and the cluster behind it) and
the database are outages: the API answers 503 with ``Retry-After`` (``api.exceptions``), a
campaign batch is put back with backoff for as long as BULK_OUTAGE_HORIZON_S and never counted
as failed. Anything else (a Lua error, a missing table, an unknown column, bad data) is a fault
that retrying cannot fix.

The database's OperationalError covers both kinds (MySQLdb raises it for a lost connection and for
an unknown column alike), so it is told apart by the server's error code.

Two more kinds wait like an outage:
- a circuit breaker that is open (``config.breakers.StoreOpen``): the store was just found out;
- Redis refusing writes (``OOM``: maxmemory reached, ``MISCONF``: it cannot persist, say a full
  disk): the remedy is an operator's, as for an outage, and the data is intact, so a batch waits
  instead of failing its recipients. The client that meets one counts it
  (``missive_redis_refused_writes_total{reason}``) and logs a WARNING saying what to do
  (``report_refused_write``, config/redis.py).

``store_down`` is the narrower question a breaker asks: did the store answer at all? A deadlock,
a lock wait, a read-only replica or a Redis that refuses writes answered, and do not open one.
"""

from __future__ import annotations

import logging
import random
import re
import socket
import time

import happybase  # noqa: F401  (loads the Hbase_thrift module below)
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from happybase.pool import NoConnectionsAvailable
from Hbase_thrift import IOError as HBaseIOError
from pybreaker import CircuitBreakerError
from redis import exceptions as redis_errors
from thriftpy2.transport import TTransportException

from config import hbase
from config.redis import ping_all

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
REFUSED_WRITE_ADVICE = {
    "OOM": "maxmemory is reached: raise maxmemory or free memory",
    "MISCONF": "it cannot persist (disk full or not writable?): free disk space or fix its dir",
}
REFUSED_LOG_EVERY_S = 10.0
log = logging.getLogger(__name__)


def store_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) says a store did not answer, not that we are wrong."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _unavailable(current):
            return True
        current = current.__cause__ or current.__context__
    return False


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


def stores_answer(timeout_s: float = 2.0) -> bool:
    """Whether every store a batch writes answers now: the database, Redis, and HBase when the
    inbox or the conversation-list cache lives there."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        ping_all()  # on a cluster, every primary
        if settings.INBOX_BACKEND == "hbase" or settings.CONVCACHE_HBASE:
            hbase.ping(timeout_s)
    except Exception as exc:
        if store_unavailable(exc) or isinstance(exc, OSError):
            return False
        raise
    return True


def backoff_s(attempt: int, cap_s: float) -> float:
    """Exponential backoff, capped, with jitter (half to all of the step): 1, 2, 4 ... cap."""
    step = min(cap_s, 2.0 ** min(attempt, 30))
    return step * random.uniform(0.5, 1.0)


def _db_unavailable(exc: OperationalError) -> bool:
    code = exc.args[0] if exc.args else None
    if isinstance(code, int):
        return code in DB_UNAVAILABLE_CODES
    return "database is locked" in str(exc)  # SQLite, one machine: a writer holds the file


def store_down(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) says a store did not answer at all: what a circuit
    breaker counts (config/breakers.py)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _down(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def _down(exc: BaseException) -> bool:
    if isinstance(exc, (*REDIS_DOWN, *TRANSPORT)):
        return True
    if isinstance(exc, OperationalError):
        return bool(exc.args) and exc.args[0] in DB_DOWN_CODES
    return False


def refused_write(exc: BaseException) -> str | None:
    """``OOM`` or ``MISCONF`` when Redis refused a write for want of memory or disk, else None."""
    if isinstance(exc, redis_errors.OutOfMemoryError):  # redis-py drops its "OOM " prefix
        return "OOM"
    if not isinstance(exc, redis_errors.ResponseError):
        return None
    found = REFUSED_WRITE.search(str(exc))
    return found.group(1) if found else None


_last_refused_log: dict[str, float] = {}


def report_refused_write(exc: BaseException) -> None:
    """Count a write Redis refused and tell the operator what to do (a WARNING at most every
    REFUSED_LOG_EVERY_S per reason and process: under a campaign every batch meets it)."""
    reason = refused_write(exc)
    if reason is None:
        return
    from config import metrics  # metrics imports the Redis client, which reports through here

    metrics.inc("redis_refused_writes", reason=reason)
    now = time.monotonic()
    if now - _last_refused_log.get(reason, -REFUSED_LOG_EVERY_S) >= REFUSED_LOG_EVERY_S:
        _last_refused_log[reason] = now
        log.warning(
            "Redis refuses writes: %s (%s); %s. Campaign batches wait and API writes answer "
            "503 until it accepts them again.",
            reason,
            str(exc)[:200],
            REFUSED_WRITE_ADVICE[reason],
        )
