"""The primary/replica split (infra/dbrouter.py) on the real MariaDB primary and replica.

Writes and reads that name no alias go to the primary, migrations never run on the replica, a
read inside a transaction stays on the primary (it must see the transaction's own rows), and an
admin changelist page reads the replica while its actions act on the primary.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import router, transaction
from django.test import Client, override_settings
from django.utils import timezone

from infra.dbrouter import PRIMARY, REPLICA, caught_up_replica, replica
from messaging.models import Follow
from tests.dbreplica import replica_sql, wait_for_replica

Uids = Callable[[int], list[int]]
# faults: replication is stopped (STOP SLAVE), for every database the replica serves
pytestmark = [
    pytest.mark.django_db(transaction=True, databases=[PRIMARY, REPLICA]),
    pytest.mark.faults,
]


def test_writes_and_unnamed_reads_go_to_the_primary_and_migrations_never_to_the_replica() -> None:
    assert router.db_for_write(Follow) == PRIMARY
    assert router.db_for_read(Follow) == PRIMARY
    assert router.allow_migrate(PRIMARY, "messaging")
    assert not router.allow_migrate(REPLICA, "messaging")


def test_a_read_inside_a_transaction_stays_on_the_primary(uids: Uids) -> None:
    assert replica() == REPLICA
    with transaction.atomic():
        Follow.objects.create(follower_uid=uids(1)[0], followee_uid=1, followed_at=timezone.now())
        assert replica() == PRIMARY
        assert caught_up_replica() == PRIMARY


def test_a_caught_up_replica_serves_cache_fills() -> None:
    wait_for_replica()
    assert caught_up_replica(wait_s=5) == REPLICA


@override_settings(REPLICA_MAX_LAG_S=0)  # a stopped replica is left for the primary otherwise
def test_admin_changelists_read_the_replica(admin_client: Client, uids: Uids) -> None:
    followee, old, new = uids(3)
    Follow.objects.create(follower_uid=old, followee_uid=followee, followed_at=timezone.now())
    wait_for_replica()
    replica_sql("STOP SLAVE")
    try:
        Follow.objects.create(follower_uid=new, followee_uid=followee, followed_at=timezone.now())
        page = admin_client.get("/admin/messaging/follow/", {"q": str(followee)})
        assert page.status_code == 200
        shown = {f.follower_uid for f in page.context["cl"].result_list}
        assert shown == {old}
    finally:
        replica_sql("START SLAVE")
        wait_for_replica()
    page = admin_client.get("/admin/messaging/follow/", {"q": str(followee)})
    assert {f.follower_uid for f in page.context["cl"].result_list} == {old, new}
