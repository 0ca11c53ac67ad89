"""Django's MySQL/MariaDB backend, with idle connections kept per process and fewer round trips.

Why it exists, measured: under ASGI Django builds a new connection wrapper for every request
(each request runs in its own thread and context), so ``CONN_MAX_AGE`` never reuses a connection;
Django's docs point to a pool, and ship one for PostgreSQL only. MariaDB's general log of a 1:1
send (``POST /messages`` on the production server) showed a new connection on every request and
five statements before its first query (``SET NAMES``, autocommit off then on, Django's
``SELECT VERSION(), @@sql_mode...`` for its feature flags, the isolation level), plus
``SET autocommit=0`` / ``SET autocommit=1`` around each of its two transactions: 10 of its 21
MariaDB round trips (BENCHMARKS.md, "1 ms more on every round trip", has the figures before and
after). django-db-connection-pool (SQLAlchemy's QueuePool) was the library candidate: it keeps the
per-wrapper ``SELECT VERSION()`` and isolation ``SET``, and resets each connection with a
``ROLLBACK`` on return or pings it on checkout, a round trip either way.

What this backend does instead:

- **Idle connections per process**, by (host, port, database, user): a wrapper's ``close()`` (at
  the end of each request and task: ``CONN_MAX_AGE`` is 0 with this engine) gives a clean
  connection back (autocommit on, no atomic block open, no database error seen); any other is
  closed as before. Every cursor still open on it is closed first, on its own thread
  (``_close_cursors``). At most ``POOL_SIZE`` wait; one idle for ``POOL_IDLE_S`` or more is closed.
  A forked child (a Celery pool process) starts with none: its parent's stay the parent's, idle
  or in use when it forked (those are closed, never kept: their file number may be reused).
- **No round trip to check one out**: a connection the server closed, killed or restarted away has
  sent an EOF or an error packet, so its socket reads as ready; ``poll()`` with no wait sees that
  and the connection is dropped. A frozen or cut-off server is not seen this way; its first query
  times out (the client timeouts of config/settings.py) and the connection is not given back.
- **Session state once per physical connection** (charset, autocommit, isolation level), and the
  server's version and modes read once per process and server (Django reads them per wrapper).
- **A transaction opens with ``START TRANSACTION``**, not ``SET autocommit=0``: the server's
  autocommit stays on, so ``COMMIT`` or ``ROLLBACK`` ends it and the return to autocommit costs
  nothing (nothing in Missive turns autocommit off by hand and expects a new transaction to start
  after a commit, which is the one behaviour this changes).
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
import weakref
from collections import deque
from typing import Any

from django.db.backends.mysql import base
from django.utils.functional import cached_property

POOL_SIZE = 16
POOL_IDLE_S = 30.0

Key = tuple[Any, ...]


class _Idle:
    """Idle connections by (host, port, database, user, socket); the freshest is taken first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[Key, deque[tuple[float, Any]]] = {}

    def take(self, key: Key) -> Any | None:
        while True:
            with self._lock:
                waiting = self._waiting.get(key)
                if not waiting:
                    return None
                since, conn = waiting.pop()
            if time.monotonic() - since < POOL_IDLE_S and _quiet(conn):
                return conn
            _discard(conn)

    def give(self, key: Key, conn: Any) -> None:
        stale = []
        with self._lock:
            waiting = self._waiting.setdefault(key, deque())
            while waiting and time.monotonic() - waiting[0][0] >= POOL_IDLE_S:
                stale.append(waiting.popleft()[1])
            if len(waiting) < POOL_SIZE:
                waiting.append((time.monotonic(), conn))
            else:
                stale.append(conn)
        for old in stale:
            _discard(old)

    def forked(self) -> None:
        """In a child process: forget the parent's idle connections without closing them (a
        close would send QUIT on a socket the parent still uses); they stay referenced, unused,
        so that nothing closes them here."""
        self._lock = threading.Lock()
        _INHERITED.extend(conn for conns in self._waiting.values() for _, conn in conns)
        self._waiting = {}


IDLE = _Idle()
_INHERITED: list[Any] = []
os.register_at_fork(after_in_child=IDLE.forked)
_SERVERS: dict[Key, dict[str, Any]] = {}


def _quiet(conn: Any) -> bool:
    """Nothing to read on an idle connection: the server has not closed or killed it."""
    try:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
        return not poller.poll(0)
    except Exception:  # a closed handle has no file number
        return False


def _discard(conn: Any) -> None:
    with contextlib.suppress(Exception):  # already gone
        conn.close()


def _close_cursors(conn: Any) -> None:
    """Close, on the thread that owns ``conn``, each of its cursors still open: a query a
    request left unfinished (an exception while it iterated ``.iterator()``, the generator kept
    by the traceback) is otherwise closed whenever the garbage collector reaches it, on any
    thread. By then the connection may be another request's, and the late close takes the
    driver's connection lock: one of the two raised "This connection is already in use from
    another thread" (five times in the fault drill's API log; once the request got no answer).
    A closed cursor's later close does nothing."""
    for cursor in list(getattr(conn, "missive_cursors", ())):
        with contextlib.suppress(Exception):  # a broken connection: it is closed next anyway
            cursor.close()


def _key(params: dict[str, Any]) -> Key:
    return tuple(params.get(k) for k in ("host", "port", "database", "db", "user", "unix_socket"))


class DatabaseWrapper(base.DatabaseWrapper):
    _pool_key: Key = ()

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        self._pool_key = _key(conn_params)
        kept = IDLE.take(self._pool_key)
        if kept is not None:
            return kept
        conn = super().get_new_connection(conn_params)
        conn.missive_pid = os.getpid()
        conn.missive_cursors = weakref.WeakSet()
        return conn

    def create_cursor(self, name: Any = None) -> Any:
        wrapped = super().create_cursor(name)
        cursors = getattr(self.connection, "missive_cursors", None)
        if cursors is not None:
            cursors.add(wrapped.cursor)
        return wrapped

    def init_connection_state(self) -> None:
        if getattr(self.connection, "missive_session_set", False):
            return
        super().init_connection_state()
        self.connection.missive_session_set = True

    @cached_property
    def mysql_server_data(self) -> dict[str, Any]:
        key = _key(self.get_connection_params())
        if key not in _SERVERS:
            _SERVERS[key] = base.DatabaseWrapper.mysql_server_data.func(self)  # type: ignore[attr-defined]
        return _SERVERS[key]

    def _set_autocommit(self, autocommit: bool) -> None:
        with self.wrap_database_errors:
            if not autocommit:
                with self.connection.cursor() as cursor:
                    cursor.execute("START TRANSACTION")
            elif not self.connection.get_autocommit():
                self.connection.autocommit(True)

    def _close(self) -> None:
        if self.connection is not None:
            _close_cursors(self.connection)
            if self._reusable():
                IDLE.give(self._pool_key, self.connection)
                return
        super()._close()  # type: ignore[misc]

    def _reusable(self) -> bool:
        if self.in_atomic_block or self.needs_rollback or self.errors_occurred:
            return False
        if getattr(self.connection, "missive_pid", None) != os.getpid():
            return False  # a parent's, open when this process forked (Celery closes its fd)
        try:
            return bool(self.connection.get_autocommit())
        except Exception:  # a broken handle
            return False
