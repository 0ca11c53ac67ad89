"""Reads on the real MariaDB read replica (infra/dbrouter.py), with its replication stopped
(``STOP SLAVE`` on the replica, restarted in a ``finally``) so that it is visibly stale.

- What may be stale really comes from the replica: the cold tier of the conversation list and a
  campaign dry run's follower count miss a row written while replication is stopped, and show it
  once replication has caught up.
- What must be fresh stays fresh: an idempotent send replay, the read position, the batch
  ledger and quotas of a campaign (exactly once, batches redelivered), history of a message
  just sent, the conversation-list cache (a fill from the stale replica never regresses
  an entry a newer push wrote: mtime compare-and-set).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from bulk import services as bulk_services
from infra.dbrouter import PRIMARY, REPLICA, caught_up_replica, replica, replica_configured
from messaging import convlist, selectors, services
from messaging.models import Conversation, Follow
from storage.convcache import mysql_tier, redis_tier
from storage.convcache.model import ConversationPage
from tests.bulk.helpers import (
    assert_exactly_once,
    business_with_followers,
    launch,
    run_synchronously,
)
from tests.conftest import wait_for
from tests.dbreplica import replica_sql, wait_for_replica
from tests.messaging.test_convcache import send

Uids = Callable[[int], list[int]]
# faults: replication is stopped (STOP SLAVE), for every database the replica serves
pytestmark = [
    pytest.mark.django_db(transaction=True, databases=[PRIMARY, REPLICA]),
    pytest.mark.faults,
]


@pytest.fixture
def stale() -> Iterator[None]:
    """Replication stopped for the test's body, the replica caught up again after it."""
    assert replica_configured(), "DATABASE_REPLICA_URL is not set: these tests need the replica"
    wait_for_replica()
    replica_sql("STOP SLAVE")
    try:
        with override_settings(REPLICA_MAX_LAG_S=0):  # a stopped replica is left otherwise
            yield
    finally:
        replica_sql("START SLAVE")
        wait_for_replica()


def peers_of(page: ConversationPage) -> list[int]:
    return [item.peer_uid for item in page.results]


def test_the_replica_alias_is_the_read_only_replica_of_the_test_database() -> None:
    with connections[REPLICA].cursor() as cur:
        cur.execute("SELECT @@server_id, @@read_only, DATABASE()")
        server_id, read_only, name = cur.fetchone()
    assert (server_id, read_only) == (2, 1)
    assert name == connections[PRIMARY].settings_dict["NAME"]
    assert replica() == REPLICA


def test_the_cold_tier_reads_the_replica(uids: Uids, stale: None) -> None:
    owner, old_peer, new_peer = uids(3)
    replica_sql("START SLAVE")
    send(old_peer, owner)
    wait_for_replica()
    replica_sql("STOP SLAVE")
    send(new_peer, owner)  # committed on the primary, not replicated

    assert peers_of(convlist.mysql_page(owner, category=None, cursor=None, limit=20)) == [old_peer]
    rows, _ = convlist.top(owner, 20, db=PRIMARY)
    assert [r.peer_uid for r in rows] == [new_peer, old_peer]

    replica_sql("START SLAVE")
    wait_for_replica()
    page = convlist.mysql_page(owner, category=None, cursor=None, limit=20)
    assert peers_of(page) == [new_peer, old_peer]


def test_an_idempotent_send_replays_from_the_primary(uids: Uids, stale: None) -> None:
    sender, receiver = uids(2)
    content = {"type": "text", "text": "once"}
    first = services.message_send(
        sender_uid=sender, receiver_uid=receiver, content=content, client_msg_id="r-1"
    )
    again = services.message_send(
        sender_uid=sender, receiver_uid=receiver, content=content, client_msg_id="r-1"
    )
    assert (again.created, again.message.msgkey) == (False, first.message.msgkey)
    assert selectors.history(receiver, sender).results[0].msgkey == first.message.msgkey


def test_the_read_position_is_fresh(uids: Uids, stale: None) -> None:
    owner, peer = uids(2)
    send(peer, owner)
    last = send(peer, owner)
    assert services.conversation_mark_read(owner_uid=owner, peer_uid=peer) == 0
    assert services.conversation_get(owner, peer).read_upto == last
    on_replica = Conversation.objects.using(REPLICA).filter(owner_uid=owner).first()
    assert on_replica is None  # the replica has not even seen the conversation


def test_a_stale_fill_never_regresses_a_cached_conversation(uids: Uids, stale: None) -> None:
    owner, peer = uids(2)
    replica_sql("START SLAVE")
    first = send(peer, owner, "first")
    wait_for_replica()
    selectors.conversation_list(owner)  # a miss: the cache fills in the background
    wait_for(lambda: redis_tier.begin(owner)[0] == "ready")
    replica_sql("STOP SLAVE")
    newest = send(peer, owner, "second")  # pushed into the cache by compare-and-set

    state, generation = redis_tier.begin(owner)
    assert caught_up_replica(wait_s=0.2) == PRIMARY  # a fill would not trust this replica
    fill = mysql_tier.fill(owner, db=REPLICA)  # as if it did: one message behind
    assert [p.summary().last_msgkey for p in fill.entries] == [first]
    assert redis_tier.finish(owner, generation, fill) == 1

    item = selectors.conversation_list(owner).results[0]
    assert item.last_message is not None
    assert (state, item.peer_uid, item.last_message["msgkey"]) == ("ready", peer, newest)


def test_a_dry_run_counts_followers_on_the_replica(uids: Uids, stale: None) -> None:
    replica_sql("START SLAVE")
    scenario = business_with_followers(uids(4))
    wait_for_replica()
    replica_sql("STOP SLAVE")
    Follow.objects.create(
        follower_uid=uids(1)[0], followee_uid=scenario.sender, followed_at=timezone.now()
    )

    def audience() -> int:
        return bulk_services.campaign_preview(
            sender_uid=scenario.sender, audience_spec={"type": "followers"}, channel="daily"
        ).audience

    assert audience() == 3
    replica_sql("START SLAVE")
    wait_for_replica()
    assert audience() == 4


def test_a_cache_filled_while_the_replica_lags_holds_every_committed_change(
    uids: Uids, stale: None
) -> None:
    owner, peer = uids(2)
    newest = send(peer, owner)  # the replica never sees it during the test
    selectors.conversation_list(owner)  # a miss: the answer may lag, the fill may not
    wait_for(lambda: redis_tier.begin(owner)[0] == "ready")
    page = selectors.conversation_list(owner)
    assert [(i.peer_uid, (i.last_message or {}).get("msgkey")) for i in page.results] == [
        (peer, newest)
    ]


def test_a_campaign_runs_exactly_once_on_the_ledger_while_the_replica_is_stale(
    uids: Uids, stale: None
) -> None:
    scenario = business_with_followers(uids(21), blocked_every=5)
    campaign = launch(scenario)
    run_synchronously(campaign.pk, repeat=2)  # the ledger and quotas read what they just wrote
    assert_exactly_once(
        campaign.pk, scenario.expected, scenario.sender, skipped_blocked=len(scenario.blocked)
    )
