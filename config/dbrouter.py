"""The primary and its read replica (DESIGN.md, "Past one machine").

``DATABASE_REPLICA_URL`` adds the database alias ``replica``: a MariaDB replica fed by GTID
replication from ``default`` (the primary). A read goes to the replica only where the code says
so, greppably, with ``.using(replica())`` (or ``connections[replica()]``): the reads that may be
stale. Today those are the cold tier of the conversation list (``messaging.convlist.mysql_page``
and the cache fills of ``messaging.convcache``), message bodies of history past the caches,
follower counting of a campaign dry run, and admin changelists (``ReplicaChangelistMixin``).
Every write, and every read of what the caller has just written (idempotent send lookups, the
batch ledger, quotas, read positions), stays on the primary: it names no alias.

A read whose answer is stored (the conversation-list cache fills) uses ``caught_up_replica()``:
the replica only once it has replayed what the primary had committed when the fill began.

``replica()`` answers ``default`` when no replica is configured (the one-machine demo on SQLite)
or REPLICA_READS is off, and while the primary connection is inside a transaction: rows that
transaction wrote are invisible to any other connection, and its reads must see them.

``PrimaryReplicaRouter`` sends every read and write that names no alias to the primary and lets
migrations run on the primary only (the replica receives their DDL by replication).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.db import DatabaseError, connections
from django.db.models import Model, QuerySet
from django.http import HttpRequest

log = logging.getLogger(__name__)
PRIMARY = "default"
REPLICA = "replica"


def replica_configured() -> bool:
    return REPLICA in settings.DATABASES and bool(settings.REPLICA_READS)


def replica() -> str:
    """The alias for a read that may be stale (see the module docstring)."""
    if not replica_configured() or connections[PRIMARY].in_atomic_block:
        return PRIMARY
    return REPLICA


def caught_up_replica(wait_s: float | None = None) -> str:
    """The alias for a read whose answer is stored (a cache fill): the replica once it has
    applied everything the primary had committed when this was called (MariaDB's
    MASTER_GTID_WAIT on the primary's ``@@gtid_binlog_pos``), waiting at most ``wait_s``
    (REPLICA_CATCH_UP_MS); a replica lagging more than that, or failing, leaves the read to the
    primary. So a fill never stores a state older than its own start."""
    alias = replica()
    if alias == PRIMARY:
        return PRIMARY
    wait = settings.REPLICA_CATCH_UP_MS / 1000 if wait_s is None else wait_s
    try:
        with connections[PRIMARY].cursor() as cur:
            cur.execute("SELECT @@gtid_binlog_pos")
            position = cur.fetchone()[0]
        with connections[REPLICA].cursor() as cur:
            cur.execute("SELECT MASTER_GTID_WAIT(%s, %s)", [position, wait])
            caught_up = cur.fetchone()[0] == 0
    except DatabaseError:
        log.warning("dbrouter: the replica did not answer; reading the primary", exc_info=True)
        return PRIMARY
    return REPLICA if caught_up else PRIMARY


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
