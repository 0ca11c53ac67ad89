"""A circuit breaker per store (``pybreaker``), so that a store known to be out costs nothing.

Every client's timeouts (infra/timeouts.py) bound one call to a frozen store; without a breaker
each request and each Celery slot still pays that timeout, one after the other. A breaker per
store and per process counts the calls in a row that got no answer at all (``store_down``, in
infra/outages.py: refused, reset, timed out; never a bug, a deadlock or a Redis that refuses
writes but answers). After BREAKER_FAIL_MAX of them it opens: calls raise ``StoreOpen`` at once,
which ``store_unavailable`` counts as an outage, so the API answers 503 + ``Retry-After``
(api/exceptions.py) and a campaign batch is put back, exactly as after a timeout. After
BREAKER_RESET_S it is half-open: the next call goes through as a probe and closes it (the store
answered) or opens it again.

Before that probe the store is pinged with a timeout of BREAKER_PING_S (0.5 s; ``Breaker.ping``):
a raw PING to Redis, the greeting MariaDB sends on connect, ``tables()`` of the HBase gateway. The
ping runs on a thread of its own, started by the first call that finds the breaker due; that call
and every call until the store answered fail at once. No answer keeps the breaker open for
another BREAKER_RESET_S; an answer makes the next call the probe. Measured in the fault drill
(``scripts/fault_drill.py``, each store frozen 30 s, BENCHMARKS.md): with the probe waiting for
the client's whole timeout, one read in ~30 per endpoint took 1.0-2.0 s while a store was out;
with the ping in the request, the request that drew it 0.5 s; with the ping off the requests'
path no request waits for it, so the reset time could fall from 3 s to 1 s, and with it the
503s after a store came back (2.0-3.1 s of them after the thaw before).

While open, a call raises what the store's own client raises when the store does not answer, so
that every caller's handling of an outage (a degraded answer, a batch put back, a 503) works
unchanged: ``RedisOpen`` is a redis-py ``ConnectionError``, ``DatabaseOpen`` a Django
``OperationalError`` with MySQL's code 2003 (cannot connect), ``HBaseOpen`` a thriftpy2
``TTransportException``. Each is also a ``StoreOpen`` (pybreaker's ``CircuitBreakerError``).

The breakers, by name and by the store's address in the settings (the ``breaker`` and
``target`` labels of the gauge ``missive_store_breaker_state``, 0 closed, 1 half-open, 2 open,
read at scrape time, this process's view):
- ``redis``: every command and pipeline of the data client (infra/redis.py); on a Redis Cluster
  one per primary (the ``target`` is the node), so that a frozen or cut-off master fails its own
  slots' calls fast and no one else's; commands without a key, and the unread fast path, use
  the breaker of the address in the settings (the fast path then leaves every request to
  Django, whose calls go by node);
- ``mariadb`` and ``replica``: every connect and every statement of Django's connections
  (``guard_new_connections``); a connect fails fast and counts a failure, but only a statement
  counts as an answer (a pooled connection is handed out without one); SQLite, the one-machine
  demo, has none;
- ``hbase``: every Thrift call through ``infra.hbase.call``, but those about one row;
- ``hbase-rs``: per RegionServer (the ``target`` is its address), the calls about one row it
  serves (a history page, a group's timeline: ``infra.hbase.call``'s ``at``);
- ``live-layer``: the pushes to the live gateways through the channel layer (live/pusher.py);
- ``broker``: the Celery broker's queue-length reads (infra/broker.py), and in an API process
  every task it sends (infra/broker_transport.py).

pybreaker's own ``call`` holds the breaker's lock for the whole call, which would serialize every
thread of a process on one store (a lease heartbeat behind a batch's statement); ``Breaker``
keeps pybreaker's states and counters and takes the lock only to change state.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pybreaker
import redis
from django.conf import settings
from django.db import OperationalError
from prometheus_client.core import GaugeMetricFamily, Metric
from thriftpy2.transport import TTransportException

from infra.dbhooks import on_new_connections
from infra.store_errors import store_down

T = TypeVar("T")
StoreOpen = pybreaker.CircuitBreakerError


class RedisOpen(redis.ConnectionError, StoreOpen):
    pass


class DatabaseOpen(OperationalError, StoreOpen):
    pass


class HBaseOpen(TTransportException, StoreOpen):
    pass


def open_error(name: str) -> StoreOpen:
    """What a call to ``name`` raises while its breaker is open (the store's own kind)."""
    detail = f"the {name} circuit breaker is open: the store did not answer just now"
    if name in DB_STORES:
        return DatabaseOpen(CANNOT_CONNECT, detail)
    if name in ("hbase", "hbase-rs"):
        return HBaseOpen(TTransportException.NOT_OPEN, detail)
    return RedisOpen(detail)


CANNOT_CONNECT = 2003  # MySQL's client code for a server it cannot reach
STATE_VALUES = {pybreaker.STATE_CLOSED: 0, pybreaker.STATE_HALF_OPEN: 1, pybreaker.STATE_OPEN: 2}
DB_BREAKERS = {"default": "mariadb", "replica": "replica"}  # database alias -> breaker
DB_STORES = frozenset(DB_BREAKERS.values())
# breaker -> the setting of its Redis
REDIS_URLS = {"redis": "REDIS_URL", "broker": "CELERY_BROKER_URL", "live-layer": "LIVE_REDIS_URL"}


Ping = Callable[[str, float], None]  # (the store's address, timeout in s): raises unless it answers


class Breaker(pybreaker.CircuitBreaker):
    """A pybreaker breaker that keeps its own state storage (``storage``: when it opened, read
    through the storage's public ``opened_at``, ``allows``) and pings its store before a probe
    (module docstring)."""

    def __init__(self, ping: Callable[[], None] | None = None, **kwargs: Any) -> None:
        self.storage = pybreaker.CircuitMemoryStorage(pybreaker.STATE_CLOSED)
        self.ping = ping
        self._ping_lock = threading.Lock()
        self._pinging = False
        self._answered_for: datetime | None = None  # the opening a ping got an answer in
        super().__init__(state_storage=self.storage, **kwargs)

    def call(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """pybreaker's ``call`` without holding the lock around ``func`` (module docstring)."""
        if self.still_out():
            raise StoreOpen("the store has not answered a ping since the breaker opened")
        return self.state.call(func, *args, **kwargs)

    def due(self) -> bool:
        """Open, with its reset time gone by: the next call would be the probe."""
        if self.current_state != pybreaker.STATE_OPEN:
            return False
        opened_at = self.storage.opened_at
        return opened_at is None or datetime.now(UTC) >= opened_at + timedelta(
            seconds=self.reset_timeout
        )

    def still_out(self) -> bool:
        """Whether a call now must fail without reaching the store: the breaker is due a probe
        but its store has not answered a ping in this opening. The first such call starts the
        ping on a thread of its own and fails at once, as do the calls while it runs; once the
        store answered, the next call is the probe. No answer opens the breaker again (its
        reset time starts over)."""
        if self.ping is None or not self.due():
            return False
        with self._ping_lock:
            if self._answered_for == self.storage.opened_at:
                return False
            if self._pinging:
                return True
            self._pinging = True
        threading.Thread(
            target=self._ping_once, name=f"breaker-ping-{self.name}", daemon=True
        ).start()
        return True

    def _ping_once(self) -> None:
        opened_at = self.storage.opened_at
        answered = True
        try:
            self.ping()  # type: ignore[misc]
        except Exception as exc:
            answered = not store_down(exc)  # any other error: the probe decides
        with self._ping_lock:
            self._pinging = False
            if answered:
                self._answered_for = opened_at
        if not answered and self.storage.opened_at == opened_at:
            self.open()  # its reset time starts over


def _not_counted(exc: BaseException) -> bool:
    return not store_down(exc)


_made: dict[tuple[str, str], Breaker] = {}
_made_lock = threading.Lock()


def breaker(name: str, where: str = "") -> Breaker:
    """The process's breaker of one store at the address the settings give it now, or at
    ``where`` (a Redis Cluster primary), made on first use: a store moved elsewhere (a failover,
    a settings change) starts with a closed one."""
    key = (name, where or target(name))
    found = _made.get(key)
    if found is None:
        with _made_lock:
            found = _made.get(key) or _made.setdefault(key, _new(*key))
    return found


def target(name: str) -> str:
    """Where the store ``name`` is, per the settings (the gauge's ``target`` label)."""
    if name in REDIS_URLS:  # host, port and database: never the URL's password
        url = urlsplit(str(getattr(settings, REDIS_URLS[name])))
        return f"{url.hostname}:{url.port or 6379}{url.path}"
    if name == "hbase":
        return f"{settings.HBASE['HOST']}:{settings.HBASE['PORT']}"
    if name in OPTIONS:
        return ""
    db = settings.DATABASES.get(next((a for a, n in DB_BREAKERS.items() if n == name), ""), {})
    return f"{db.get('HOST', '')}:{db.get('PORT', '')}"


# The replica's breaker opens at its first no-answer: its reads then go to the primary (never a
# 503), so nothing is gained by asking it again. At BREAKER_FAIL_MAX (2), a frozen replica cost
# an API process two requests of 2 s each: the read that met it, then the router's lag check a
# second later (tests/api/test_freezes.py, replica frozen; one since).
FAIL_MAX = {"replica": 1, "live-layer": 1}  # the layer's: live/pusher.py


def _new(name: str, where: str) -> Breaker:
    ping = PINGS.get(name)
    fail_max = FAIL_MAX.get(name, settings.BREAKER_FAIL_MAX)
    options = {"fail_max": fail_max, "reset_timeout": settings.BREAKER_RESET_S}
    if name in OPTIONS:
        options.update(OPTIONS[name]())
    return Breaker(
        ping=None if ping is None else functools.partial(ping, where, settings.BREAKER_PING_S),
        exclude=[_not_counted],
        name=name,
        throw_new_error_on_trip=False,  # the call that trips it raises its own error
        **options,
    )


OPTIONS: dict[str, Callable[[], dict[str, Any]]] = {}  # name -> its fail_max, reset_timeout


def configure(name: str, options: Callable[[], dict[str, Any]]) -> None:
    """``options()`` (read from the settings when the breaker is made) for ``name``, a breaker
    that guards work rather than a store's address (an unread repair: storage/counters/epoch.py
    ``put_off``); it is left out of ``missive_store_breaker_state``, whose open breakers page."""
    OPTIONS[name] = options


def guarded(name: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``func(*args, **kwargs)`` through the store's breaker; while it is open, the store's own
    "did not answer" error at once (module docstring)."""
    return guarded_at(name, "", func, *args, **kwargs)


def guarded_at(name: str, where: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``guarded`` through the breaker of the store's node at ``where`` ("": the settings')."""
    try:
        return breaker(name, where).call(func, *args, **kwargs)
    except StoreOpen as exc:
        if isinstance(exc, (RedisOpen, DatabaseOpen, HBaseOpen)):
            raise  # a nested call's, already the store's kind
        raise open_error(name) from exc


def allows(name: str, where: str = "") -> bool:
    """Whether the breaker would let a call through now (closed, half-open, or open with its
    reset time gone by: that call is the probe), without making one: for a caller that sends
    first and learns the outcome later (a cluster pipeline's nodes, infra/redis.py)."""
    found = breaker(name, where)
    if found.current_state != pybreaker.STATE_OPEN:
        return True
    return found.due() and not found.still_out()


# -- pings before a probe (module docstring) -----------------------------------------------------
def _host_port(where: str) -> tuple[str, int] | None:
    """("host", port) of a TCP address "host:port[/db]" ("[::1]:port" too); None for a Unix
    socket or no port."""
    host, _, rest = where.partition("/")[0].rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    return (host, int(rest)) if host and rest.isdigit() else None


def _answers(where: str, timeout_s: float, hello: bytes = b"") -> None:
    """Raise OSError unless the server at ``where`` sends a byte within ``timeout_s`` of the
    connect (after ``hello``, when given). A frozen server's kernel still accepts the connect."""
    address = _host_port(where)
    if address is None:
        return  # not a TCP address: the probe goes ahead as pybreaker's alone
    with socket.create_connection(address, timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        if hello:
            sock.sendall(hello)
        if not sock.recv(1):
            raise ConnectionResetError(f"{where} closed the connection")


def _ping_redis(where: str, timeout_s: float, setting: str) -> None:
    if not str(getattr(settings, setting)).startswith("rediss:"):  # TLS: no answer to a PING
        _answers(where, timeout_s, b"*1\r\n$4\r\nPING\r\n")  # any reply, even -NOAUTH


def _ping_mysql(where: str, timeout_s: float) -> None:
    """The server's greeting (sent in the clear, before any TLS); "localhost" is MySQLdb's Unix
    socket, not pinged."""
    host, _, port = where.rpartition(":")
    if host not in ("", "localhost"):
        _answers(f"{host}:{port or 3306}", timeout_s)


PINGS: dict[str, Ping] = {
    **{name: functools.partial(_ping_redis, setting=url) for name, url in REDIS_URLS.items()},
    "mariadb": _ping_mysql,
    "replica": _ping_mysql,
}


def register_ping(name: str, ping: Ping) -> None:
    """The ping of a store whose client lives above this module (``hbase``: infra/hbase.py)."""
    PINGS[name] = ping


def record_failure(name: str, exc: BaseException, where: str = "") -> None:
    """Count a no-answer the store's client met outside ``guarded`` (the unread fast path's own
    asyncio connection to Redis, a cluster pipeline's node)."""

    def fail() -> None:
        raise exc

    with contextlib.suppress(Exception):  # the caller already handles the failure
        guarded_at(name, where, fail)


def trip(name: str, where: str = "") -> None:
    """Open the store's breaker now: its store was found out by other means than a call (the
    HBase gateway's ping after a RegionServer's call got no answer, infra/hbase.py)."""
    breaker(name, where).open()


def close(name: str, where: str = "") -> None:
    """Close the store's breaker now: the store that ``trip`` found out answers again (the HBase
    gateway's ping, infra/hbase.py), so calls need not wait for the breaker's own probe."""
    breaker(name, where).close()


def closed(name: str, where: str = "") -> bool:
    """Whether the store's breaker (of its node at ``where``) lets calls through without a
    probe (unread fast path)."""
    return breaker(name, where).current_state == pybreaker.STATE_CLOSED


def forget(name: str, where: str) -> None:
    """Drop one breaker (a RegionServer that no longer serves any region: its open state would
    page for ever, with no call left to probe it); a later call makes a closed one."""
    with _made_lock:
        _made.pop((name, where), None)


def reset() -> None:
    """Forget every breaker (tests; a settings change): the next call makes a closed one."""
    with _made_lock:
        _made.clear()


def states() -> dict[tuple[str, str], str]:
    """(name, target) -> pybreaker's state name, for every breaker this process made."""
    return {key: b.current_state for key, b in sorted(_made.items())}


def read_gauges() -> Iterator[Metric]:
    gauge = GaugeMetricFamily(
        "missive_store_breaker_state",
        "This process's circuit breaker per store: 0 closed, 1 half-open, 2 open.",
        labels=["breaker", "target"],
    )
    for (name, where), state in states().items():
        if name not in OPTIONS:  # a store's, not work's (``configure``): the store alert reads it
            gauge.add_metric([name, where], STATE_VALUES.get(state, 0))
    yield gauge


# -- MariaDB: Django connections -----------------------------------------------------------------
def guard_new_connections() -> None:
    """Every database connection object Django makes from now on (one per thread and alias:
    under ASGI each request's thread has its own) is guarded before its first connect
    (AppConfig.ready; infra/dbhooks.py), and so are those this thread made already: a Celery
    task's and a management command's (unguarded, each of their statements against a frozen
    MariaDB paid the whole read timeout)."""
    on_new_connections(install_db_guards)


def install_db_guards(connection: Any) -> None:
    """This connection's connects and statements go through its store's breaker (once)."""
    name = DB_BREAKERS.get(connection.alias)
    if connection.vendor != "mysql" or name is None or getattr(connection, "_breaker", None):
        return
    connection._breaker = name
    connection.execute_wrappers.append(_execute_through(name))
    connection.connect = _connect_through(name, connection)  # this connection object only


def _connect_through(name: str, connection: Any) -> Callable[[], None]:
    """A connect fails at once while the breaker is open, and counts when the server did not
    answer; it never counts as an answer: infra/mysql hands out a pooled connection without a
    round trip, and such a "success" reset the count of the timeouts before it, so against a
    frozen MariaDB every pooled connection paid its 2-s read timeout before the breaker opened
    (three requests of 2 s, 2 s and 1 s in tests/api/test_freezes.py, where two should do).
    The statement that follows is what says the server answers."""
    connect = connection.connect

    def guarded_connect() -> None:
        if not allows(name):
            raise open_error(name)
        try:
            with connection.wrap_database_errors:  # the driver's errors as Django's
                connect()
        except Exception as exc:
            if store_down(exc):
                record_failure(name, exc)
            raise

    return guarded_connect


def _execute_through(name: str) -> Callable[..., Any]:
    def execute(run: Callable[..., Any], sql: str, params: Any, many: bool, ctx: Any) -> Any:
        return guarded(name, run, sql, params, many, ctx)

    return execute
