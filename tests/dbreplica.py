"""The test database's real read replica (infra/dbrouter.py, scripts/services mariadb-replica).

Django creates the test database on the primary only; the replica receives it, and every
migration, by GTID replication. ``point_replica_at_test_db`` gives the ``replica`` alias the
test database's name (in this process and, through ``DATABASE_REPLICA_URL``, in the processes
tests start) and waits until the replica has replayed everything the primary has
written so far (MASTER_GTID_WAIT on the primary's binlog position).
"""

from __future__ import annotations

import os

from django.db import connections

from infra.dbrouter import PRIMARY, REPLICA, replica_configured

CATCH_UP_S = 120


def point_replica_at_test_db() -> None:
    if not replica_configured():
        return
    conn = connections[REPLICA]
    conn.close()
    s = conn.settings_dict
    s["NAME"] = connections[PRIMARY].settings_dict["NAME"]
    # what the processes a test starts (Celery workers, gunicorn) inherit
    os.environ["DATABASE_REPLICA_URL"] = (
        f"mysql://{s['USER']}:{s['PASSWORD']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"
    )
    wait_for_replica()


def primary_position() -> str:
    with connections[PRIMARY].cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos")
        return str(cur.fetchone()[0])


def wait_for_replica(timeout: float = CATCH_UP_S) -> None:
    """Until the replica has applied every transaction the primary has committed so far."""
    position = primary_position()
    with connections[REPLICA].cursor() as cur:
        cur.execute("SELECT MASTER_GTID_WAIT(%s, %s)", [position, timeout])
        if cur.fetchone()[0] != 0:
            raise RuntimeError(f"the replica did not reach GTID {position} in {timeout} s")


def replica_sql(statement: str) -> None:
    """A replication statement on the replica (STOP SLAVE / START SLAVE)."""
    with connections[REPLICA].cursor() as cur:
        cur.execute(statement)
