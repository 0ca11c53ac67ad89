"""The primary and its read replica (DESIGN.md, "Past one machine").

``DATABASE_REPLICA_URL`` adds the database alias ``replica``: a MariaDB replica fed by GTID
replication from ``default`` (the primary). A read goes to the replica only where the code says
so, greppably, with ``.using(replica())`` (or ``connections[replica()]``): the reads that may be
stale. Today those are the cold tier of the conversation list (``messaging.convlist.mysql_page``
and the cache fills of ``storage.convcache``), message bodies of history past the caches,
follower counting of a campaign dry run, and admin changelists (``ReplicaChangelistMixin``).
Every write, and every read of what the caller has just written (idempotent send lookups, the
batch ledger, quotas, read positions), stays on the primary: it names no alias.

A read whose answer is stored (the conversation-list cache fills) uses ``caught_up_replica()``:
the replica only once it has replayed what the primary had committed when the fill began.

``replica()`` answers ``default`` when no replica is configured (the one-machine demo on SQLite)
or REPLICA_READS is off, and while the primary connection is inside a transaction: rows that
transaction wrote are invisible to any other connection, and its reads must see them.

A replica is never the reason for a 503. ``replica()`` also answers ``default`` while the replica
is not usable: it did not answer (refused, timed out, its circuit breaker open) or lags more than
REPLICA_MAX_LAG_S (``SHOW SLAVE STATUS``: Seconds_Behind_Master, NULL when replication is not
running, which counts as lagging). That is checked at most once a second per process and thread
(``replica_usable``), so a dead or lagging replica sends reads to the primary within a second. A
read that meets a replica failing before the next check runs through ``read_replica``, which
marks the replica down and reads the primary. REPLICA_MAX_LAG_S=0 turns the lag check off (tests
that stop replication to see stale reads); a replica that does not answer is still left.

**The primary out, the replica reads for it.** An API read (GET) that failed because the primary
did not answer is run once more with this thread's ``default`` connection replaced by the
replica's (``replica_for_primary``, used by ``api.fallback``): raw cursors and the ORM alike then
read the replica, and a write there is refused (read-only: 503). While the primary is frozen or cut
off it commits nothing, so the replica holds what it had committed (less its lag, normally
milliseconds). ``missive_replica_fallback_reads_total`` counts such requests.

``PrimaryReplicaRouter`` sends every read and write that names no alias to the primary and lets
migrations run on the primary only (the replica receives their DDL by replication).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from django.conf import settings
from django.contrib import admin
from django.db import DatabaseError, connections
from django.db.models import Model, QuerySet
from django.http import HttpRequest

log = logging.getLogger(__name__)
T = TypeVar("T")
PRIMARY = "default"
REPLICA = "replica"
CHECK_EVERY_S = 1.0  # how often a process (thread) asks the replica how far behind it is


def replica_configured() -> bool:
    return REPLICA in settings.DATABASES and bool(settings.REPLICA_READS)


def replica() -> str:
    """The alias for a read that may be stale (see the module docstring)."""
    if not replica_configured() or connections[PRIMARY].in_atomic_block:
        return PRIMARY
    return REPLICA if replica_usable() else PRIMARY


class _Health(threading.local):  # Django's connections are per thread: so is their check
    checked_at = -CHECK_EVERY_S
    usable = True
    answers = True  # usable, or only lagging
    standing_in = False  # the replica stands in for the primary (``replica_for_primary``)


_health = _Health()


def replica_usable() -> bool:
    """Whether the replica answers and keeps up, as last checked (at most CHECK_EVERY_S ago)."""
    now = time.monotonic()
    if now - _health.checked_at >= CHECK_EVERY_S:
        _health.checked_at = now  # before the probe: a slow probe is not repeated meanwhile
        _health.usable = _probe()
    return _health.usable


def forget_replica_health() -> None:
    """The next ``replica()`` checks the replica again (tests; after a settings change)."""
    _health.checked_at = -CHECK_EVERY_S


def mark_replica_down() -> None:
    """Reads go to the primary until the next check (a read just met the replica failing)."""
    _health.checked_at, _health.usable, _health.answers = time.monotonic(), False, False


def _probe() -> bool:
    _health.answers = False
    try:
        lag = replica_lag_s()
    except DatabaseError as exc:  # an open breaker raises one too (infra/breakers.py)
        log.warning("dbrouter: the replica does not answer (%r); reading the primary", exc)
        return False
    _health.answers = True
    if settings.REPLICA_MAX_LAG_S > 0 and (lag is None or lag > settings.REPLICA_MAX_LAG_S):
        log.warning("dbrouter: the replica lags (%s s behind); reading the primary", lag)
        return False
    return True


def replica_lag_s() -> float | None:
    """Seconds_Behind_Master of the replica: None when replication is not running; 0 when the
    server is not a replica at all (nothing to lag behind)."""
    with connections[REPLICA].cursor() as cur:
        cur.execute("SHOW SLAVE STATUS")
        row = cur.fetchone()
        names = [d[0] for d in cur.description or ()]
    if row is None:
        return 0.0
    lag = dict(zip(names, row, strict=True)).get("Seconds_Behind_Master")
    return None if lag is None else float(lag)


def read_replica(read: Callable[[str], T], alias: str = "") -> T:
    """``read(alias)`` on ``alias`` (by default ``replica()``); when the replica fails to answer
    it, on the primary (the replica left until the next check): a replica never fails a read."""
    alias = alias or replica()
    if alias == PRIMARY:
        return read(PRIMARY)
    try:
        return read(alias)
    except Exception as exc:
        from infra.outages import store_unavailable  # it imports the stores' clients

        if not store_unavailable(exc):
            raise
        log.warning("dbrouter: the replica failed a read (%r); reading the primary", exc)
        mark_replica_down()
        connections[REPLICA].close_if_unusable_or_obsolete()
        return read(PRIMARY)


def caught_up_replica(wait_s: float | None = None) -> str:
    """The alias for a read whose answer is stored (a cache fill): the replica once it has
    applied everything the primary had committed when this was called (MariaDB's
    MASTER_GTID_WAIT on the primary's ``@@gtid_binlog_pos``), waiting at most ``wait_s``
    (REPLICA_CATCH_UP_MS); a replica lagging more than that, or failing, leaves the read to the
    primary. So a fill never stores a state older than its own start."""
    alias = replica()
    if alias == PRIMARY or _health.standing_in:  # standing in: the primary commits nothing now
        return alias
    wait = settings.REPLICA_CATCH_UP_MS / 1000 if wait_s is None else wait_s
    with connections[PRIMARY].cursor() as cur:  # the primary out: its error, not the replica's
        cur.execute("SELECT @@gtid_binlog_pos")
        position = cur.fetchone()[0]
    try:
        with connections[REPLICA].cursor() as cur:
            cur.execute("SELECT MASTER_GTID_WAIT(%s, %s)", [position, wait])
            caught_up = cur.fetchone()[0] == 0
    except DatabaseError:  # an open breaker raises one too (infra/breakers.py)
        log.warning("dbrouter: the replica did not answer; reading the primary", exc_info=True)
        mark_replica_down()
        return PRIMARY
    return REPLICA if caught_up else PRIMARY


def replica_answers() -> bool:
    """Whether a request may read the replica in the primary's place: one is configured, and it
    answered its last check (``replica_usable``; a replica lagging behind a primary that is out
    is still the newest copy there is, so lag does not matter here)."""
    if not replica_configured():
        return False
    replica_usable()
    return _health.answers


@contextmanager
def replica_for_primary() -> Iterator[None]:
    """For the block, this thread's ``default`` connection is the replica's (module docstring)."""
    primary = connections[PRIMARY]
    connections[PRIMARY] = connections[REPLICA]
    _health.standing_in = True
    try:
        yield
    finally:
        connections[PRIMARY] = primary
        _health.standing_in = False


class PrimaryReplicaRouter:
    """Reads and writes that name no alias go to the primary; migrations never to the replica."""

    def db_for_read(self, model: type[Model], **hints: Any) -> str:
        return PRIMARY

    def db_for_write(self, model: type[Model], **hints: Any) -> str:
        return PRIMARY

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool:
        return True  # one database, two copies of it

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db != REPLICA


class ReplicaChangelistMixin(admin.ModelAdmin):
    """An admin whose changelist pages (GET) read the replica. Actions (POST), change forms and
    saves read and write the primary: an action must act on what is, not on a lagging copy."""

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        request.replica_reads = request.method == "GET"  # type: ignore[attr-defined]
        return super().changelist_view(request, extra_context)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        qs = super().get_queryset(request)
        return qs.using(replica()) if getattr(request, "replica_reads", False) else qs
