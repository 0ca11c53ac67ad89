"""The binlog loop: follow the primary's GTID row binlog, apply each commit, resume after it.

``Follower.run`` registers with the primary as a replica (python-mysql-replication,
``server_id`` = CACHESYNC_SERVER_ID, unique among the primary's replicas) from the saved GTID
position (position.py; the primary's current one when none is saved, or with ``from_now``),
and reads only the followed tables of the application's database (changes.py): the primary
still sends every event, but the rows of other tables are never decoded, nor message inserts,
nor the inbox rows the application wrote (``changes.ignored``), and the conversation rows are
read from the event's bytes (rows.py). Each statement's text comes before its rows (an
annotate-rows event): one without the application's mark (infra/statements.py) is a DBA's, a
backfill's, anyone else's, and its rows are ``outside`` (changes.py).
Each transaction's row events are gathered into a ``ChangeSet``; at its commit (the XID event)
the set joins the batch, which is applied (services.py) as soon as the primary has sent nothing
more yet, or once it holds BATCH_MAX_CHANGES changes: a follower that keeps up applies each
transaction as it commits, one that is behind applies many with one round of cache calls. The
position then moves past the batch. The position is saved at most every SAVE_EVERY_S, when the
binlog goes idle (heartbeat) and at stop, so a restart resumes after the last saved transaction:
whatever committed while the follower was down is applied once it is back; after a crash, the
transactions since the last save are applied once more, which changes nothing (every push is a
compare-and-set on mtime).

Where the time went (a 200,000-recipient campaign, 4 workers, 10% cached lists, cProfile): the
library's row decoding 27 of 52 s, the cache pushes 10 s, every one of them a push the
application had made already. With rows.py and held.py the follower used 6.2 s of CPU there
against 19.4 s (both profiled); with the batches too, a 1,000,000-recipient campaign cost it
11 µs of CPU a recipient and its lag stayed under 1.4 s (BENCHMARKS.md).

Outages never skip a transaction. A store that does not answer (``store_unavailable``), a push
that a tier missed (``CachePushFailed``) or a lost binlog connection makes the loop wait
(RETRY_MIN_S doubling to RETRY_MAX_S) and try the same transaction again, reconnecting the
stream from the applied position when it broke. Any other error (a bug, a position the primary
no longer has) stops the follower with the error: its position is where it stopped.

Stopping (``stop`` set, SIGTERM in ``cache_follow``) takes at most about HEARTBEAT_S: the
primary sends a heartbeat whenever the binlog is idle that long.
"""

from __future__ import annotations

import logging
import select
import threading
import time
from dataclasses import dataclass
from typing import Any

import pymysql
from django.conf import settings
from django.db import close_old_connections, connection, connections
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    HeartbeatLogEvent,
    MariadbAnnotateRowsEvent,
    MariadbGtidEvent,
    QueryEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from cachesync import position, rows, services
from cachesync.changes import TABLES, ChangeSet, ignored
from cachesync.lag import LagPublisher
from infra.statements import is_marked
from infra.store_errors import DB_UNAVAILABLE_CODES, store_unavailable
from messaging.services import CachePushFailed

log = logging.getLogger(__name__)
HEARTBEAT_S = 1.0
READ_TIMEOUT_S = 10.0  # several heartbeats: a primary silent that long is frozen
CONNECT_TIMEOUT_S = 2
RETRY_MIN_S = 0.2
RETRY_MAX_S = 5.0
SAVE_EVERY_S = 1.0
LOG_EVERY_S = 10.0
BATCH_MAX_CHANGES = 8000  # committed transactions applied at once while the follower is behind
FL_STANDALONE = 1  # a GTID event's flag: a statement with no XID after it (DDL)
ROW_KINDS = {WriteRowsEvent: "insert", UpdateRowsEvent: "update", DeleteRowsEvent: "delete"}
EVENTS = [
    MariadbGtidEvent,
    MariadbAnnotateRowsEvent,
    XidEvent,
    QueryEvent,
    HeartbeatLogEvent,
    *ROW_KINDS,
]


class Stopped(Exception):
    """The follower was asked to stop while it waited out an outage."""


def unavailable(exc: BaseException) -> bool:
    """A store or the binlog connection did not answer, or a tier missed a push: wait, retry."""
    if isinstance(exc, (CachePushFailed, OSError, EOFError, pymysql.err.InterfaceError)):
        return True
    if isinstance(exc, pymysql.err.OperationalError):
        return bool(exc.args) and exc.args[0] in DB_UNAVAILABLE_CODES
    return store_unavailable(exc)


@dataclass
class Progress:
    transactions: int = 0
    applied: int = 0
    changes: int = 0
    skipped: int = 0  # refreshes every tier held already (held.py)
    recalls: int = 0  # recalls set in SQL, finished as the application's own
    backfilled: int = 0  # conversations recounted for rows others wrote (changes.py)
    retries: int = 0
    logged_at: float = 0.0


class Follower:
    def __init__(
        self,
        *,
        server_id: int | None = None,
        stop: threading.Event | None = None,
        name: str = position.DEFAULT,
        from_now: bool = False,
    ) -> None:
        self.server_id = server_id or int(settings.CACHESYNC_SERVER_ID)
        self.stop = stop or threading.Event()
        self.name = name
        self.from_now = from_now
        self.applied = position.Gtids()
        self.progress = Progress()
        self.lag = LagPublisher()
        self.started = threading.Event()  # set once the start position is read
        self._pending: ChangeSet | None = None
        self._pending_gtid = ""
        self._pending_ts = 0.0
        self._outside = False  # the statement whose rows come next is not the application's
        self._batch: ChangeSet | None = None  # committed, not applied yet (``_commit``)
        self._batch_gtids: list[str] = []
        self._batch_at = 0.0  # the oldest commit in the batch
        self._stream_now: BinLogStreamReader | None = None
        self._own_save = ""
        self._moved = False
        self._saved_at = 0.0

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> None:
        """Follow until ``stop`` is set; raises on anything but an outage (module docstring)."""
        self.applied = position.Gtids.parse(self._start_at())
        self.started.set()
        log.info("cachesync: following %s from %s", self._where(), self.applied.text() or "start")
        delay = RETRY_MIN_S
        try:
            while not self.stop.is_set():
                try:
                    self._follow()
                    delay = RETRY_MIN_S
                except Exception as exc:
                    if not unavailable(exc):
                        raise
                    self._outage(exc, delay)
                    delay = min(delay * 2, RETRY_MAX_S)
        except Stopped:
            pass
        finally:
            self._save_quietly()
            connections.close_all()  # this thread's: a follower thread leaves none behind
        log.info("cachesync: stopped at %s", self.applied.text())

    def _start_at(self) -> str:
        saved = None if self.from_now else self._retrying(lambda: position.load(self.name))
        return saved if saved is not None else self._retrying(position.primary_now)

    def _follow(self) -> None:
        stream = self._stream_now = self._stream()
        self._batch, self._batch_gtids = None, []  # read again from the applied position
        try:
            while not self.stop.is_set():
                event = stream.fetchone()
                if event is None:
                    return
                self._on(event)
                stream.auto_position = self.applied.text()  # its own reconnects resume here
        finally:
            stream.close()

    def _stream(self) -> BinLogStreamReader:
        db = connection.settings_dict
        return BinLogStreamReader(
            connection_settings={
                "host": db["HOST"] or "127.0.0.1",
                "port": int(db["PORT"] or 3306),
                "user": db["USER"],
                "password": db["PASSWORD"],
                "connect_timeout": CONNECT_TIMEOUT_S,
                "read_timeout": READ_TIMEOUT_S,
            },
            server_id=self.server_id,
            is_mariadb=True,
            auto_position=self.applied.text() or None,
            blocking=True,
            slave_heartbeat=HEARTBEAT_S,
            only_events=EVENTS,
            annotate_rows_event=True,  # each statement's text before its rows: whose it is
            only_schemas=[db["NAME"]],
            only_tables=list(TABLES),
            use_column_name_cache=True,  # without binlog_row_metadata=FULL: one lookup a table
        )

    # -- events --------------------------------------------------------------------------------
    def _on(self, event: Any) -> None:
        if isinstance(event, MariadbGtidEvent):
            self._begin(event)
        elif isinstance(event, XidEvent) or (
            isinstance(event, QueryEvent) and event.query == "COMMIT"
        ):
            self._commit()
        elif isinstance(event, HeartbeatLogEvent):
            self._idle()
        elif isinstance(event, MariadbAnnotateRowsEvent):
            self._outside = not is_marked(event.sql_statement)
        elif type(event) in ROW_KINDS and self._pending is not None:
            kind = ROW_KINDS[type(event)]
            if not ignored(event.table, kind, self._outside):
                self._pending.add(event.table, kind, rows.decode(event), outside=self._outside)
            self._pending_ts = max(self._pending_ts, float(event.timestamp))

    def _begin(self, event: MariadbGtidEvent) -> None:
        self._pending, self._pending_gtid = ChangeSet(), event.gtid
        self._pending_ts, self._outside = float(event.timestamp), False
        if event.flags & FL_STANDALONE:  # DDL: no rows, no XID; nothing to apply
            self._commit()

    def _commit(self) -> None:
        """A transaction committed: into the batch, applied once nothing more is ready to read
        (or the batch is full), so a follower that is behind applies many transactions with one
        round of cache calls, and one that keeps up applies each as it comes."""
        changes, gtid = self._pending, self._pending_gtid
        self._pending = None
        if changes is None or not gtid:
            return
        self.progress.transactions += 1
        if self._batch is None:
            self._batch, self._batch_at = changes, self._committed_at(changes)
        else:
            self._batch.merge(changes)
        self._batch_gtids.append(gtid)
        if self._batch.size() < BATCH_MAX_CHANGES and self._more_ready():
            return
        self._flush()

    def _more_ready(self) -> bool:
        """Whether the primary has already sent more of the binlog (the socket has bytes to read;
        bytes already in the client's buffer are not seen: the batch is then applied early)."""
        conn = getattr(self._stream_now, "_stream_connection", None)
        sock = getattr(conn, "_sock", None)
        if sock is None:
            return False
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)

    def _flush(self) -> None:
        changes, gtids = self._batch, self._batch_gtids
        self._batch, self._batch_gtids = None, []
        if changes is None:
            return
        if changes:
            self._apply(changes)
        for gtid in gtids:
            self.applied.advance(gtid)
        self._moved = self._moved or any(g != self._own_save for g in gtids)
        self.lag.sample(self._batch_at)
        if time.monotonic() - self._saved_at >= SAVE_EVERY_S:
            self._save()
        self._log_progress()

    def _committed_at(self, changes: ChangeSet) -> float:
        """The commit's time: the header's whole second, or a newer mtime stamped before it."""
        return min(time.time(), max(self._pending_ts, changes.newest_mtime_ms / 1000))

    def _idle(self) -> None:
        self._flush()
        self.lag.sample(None, force=True)
        self._save()

    def _apply(self, changes: ChangeSet) -> None:
        """Apply until it lands (services.py: idempotent), waiting out outages."""
        applied = self._retrying(lambda: services.changes_apply(changes))
        self.progress.skipped += applied.skipped
        self.progress.recalls += applied.recalls
        self.progress.backfilled += len(changes.backfilled)
        self.progress.applied += 1
        self.progress.changes += changes.size()

    # -- outages, position, progress -------------------------------------------------------------
    def _retrying(self, step: Any) -> Any:
        delay = RETRY_MIN_S
        while True:
            try:
                return step()
            except Exception as exc:
                if not unavailable(exc):
                    raise
                self._outage(exc, delay)
                delay = min(delay * 2, RETRY_MAX_S)

    def _outage(self, exc: BaseException, delay: float) -> None:
        self.progress.retries += 1
        log.warning("cachesync: %s: %s; again in %.1f s", type(exc).__name__, exc, delay)
        close_old_connections()
        if connection.connection is not None and not connection.is_usable():
            connection.close()
        if self.stop.wait(delay):
            raise Stopped

    def _save(self) -> None:
        if self._moved and self.applied.by_domain:
            self._own_save = position.save(self.applied.text(), self.name)
            self._moved = False
        self._saved_at = time.monotonic()

    def _save_quietly(self) -> None:
        try:
            self._save()
        except Exception:
            log.warning("cachesync: position not saved at stop", exc_info=True)

    def _log_progress(self) -> None:
        now = time.monotonic()
        if now - self.progress.logged_at < LOG_EVERY_S:
            return
        p = self.progress
        p.logged_at = now
        log.info(
            "cachesync: at %s; %d transactions, %d applied (%d changes, %d held already, "
            "%d recalls made in SQL, %d conversations backfilled), lag %.3f s, %d retries",
            self.applied.text(),
            p.transactions,
            p.applied,
            p.changes,
            p.skipped,
            p.recalls,
            p.backfilled,
            self.lag.lag,
            p.retries,
        )

    def _where(self) -> str:
        db = connection.settings_dict
        return f"{db['HOST']}:{db['PORT']}/{db['NAME']} as replica {self.server_id}"
