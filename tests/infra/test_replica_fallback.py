"""A replica is never the reason for a 503 (infra/dbrouter.py), on the real MariaDB replica.

- A replica whose replication is stopped (so it falls ever further behind) is left for the primary
  at the next check, within a second; once it replicates again it serves again.
- A replica killed with -9 (``scripts/services kill mariadb-replica``): history reads through the
  API all answer 200 with the message just sent, the first one included; the replica is
  restarted at the end, whatever happened.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from django.db import connections

from infra import breakers
from infra.dbrouter import CHECK_EVERY_S, PRIMARY, REPLICA, replica, replica_configured
from tests.api.factories import inbox_api, send_api
from tests.conftest import services
from tests.dbreplica import replica_sql, wait_for_replica

pytestmark = [
    pytest.mark.faults,
    pytest.mark.django_db(transaction=True, databases=[PRIMARY, REPLICA]),
]
Uids = Callable[[int], list[int]]


@pytest.fixture
def replication_stopped() -> Iterator[None]:
    assert replica_configured(), "DATABASE_REPLICA_URL is not set: this test needs the replica"
    wait_for_replica()
    replica_sql("STOP SLAVE")
    try:
        yield
    finally:
        replica_sql("START SLAVE")
        wait_for_replica()


@pytest.fixture
def replica_killed() -> Iterator[None]:
    assert replica_configured(), "DATABASE_REPLICA_URL is not set: this test needs the replica"
    wait_for_replica()
    services("kill", "mariadb-replica")
    try:
        yield
    finally:
        services("start", "mariadb-replica")
        connections[REPLICA].close()
        breakers.reset()  # this process's replica breaker opened meanwhile
        wait_for_replica()


def test_a_replica_that_stopped_replicating_is_left_within_a_second(
    replication_stopped: None,
) -> None:
    assert replica() == PRIMARY  # Seconds_Behind_Master NULL: not known to keep up
    replica_sql("START SLAVE")
    wait_for_replica()
    time.sleep(CHECK_EVERY_S)
    assert replica() == REPLICA


def test_history_reads_answer_200_while_the_replica_is_killed(
    uids: Uids, replica_killed: None
) -> None:
    alice, bob = uids(2)
    sent = send_api("shop", [alice]).sent(alice, bob)
    bff = inbox_api()
    reads, started = 0, time.monotonic()
    while time.monotonic() - started < 3:
        status, body = bff.call("GET", f"/users/{bob}/conversations/{alice}/messages")
        assert (status, [m["msgkey"] for m in body["results"]]) == (200, [sent]), body
        reads += 1
    assert replica() == PRIMARY
    print(f"{reads} history reads while the replica was killed: all 200")
