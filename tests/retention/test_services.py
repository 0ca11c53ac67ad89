"""Retention on the real stores (MariaDB, Redis, and HBase for ``backend == "hbase"``): data
sent weeks ago ages out, and what users see follows: their conversation lists, their unread
counts, their history; the dry run says what would go and changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bulk.models import CampaignBatch, CampaignStatus
from infra.redis import get_redis
from messaging.models import Message
from retention.services import retention_run
from storage import events
from storage import msgkey as keys
from storage.inbox import _cached
from tests.api.factories import Api
from tests.retention.helpers import DAY_MS, campaign, chat

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]


@pytest.fixture(params=["sql", "hbase"])
def backend(request: pytest.FixtureRequest, settings: Any) -> Iterator[str]:
    settings.INBOX_BACKEND = request.param
    _cached.cache_clear()
    yield request.param
    _cached.cache_clear()


def peers(bff: Api, uid: int) -> dict[int, dict[str, Any]]:
    return {int(c["peer_uid"]): c for c in bff.conversations(uid)["results"]}


def texts(bff: Api, uid: int, peer: int) -> list[str]:
    return [m["content"]["text"] for m in bff.history(uid, peer)["results"]]


def counts(report: Any, kind: str) -> dict[str, int]:
    return next(k.counts for k in report.kinds if k.kind == kind)


def test_campaign_copies_age_out_and_lists_and_unread_follow(
    backend: str, uids: Uids, bff: Api
) -> None:
    shop, reader, loyal, lapsed = uids(4)
    old = campaign(shop, [reader, loyal, lapsed], days_ago=40, text="spring sale")
    bff.read(reader, shop)
    new = campaign(shop, [loyal], days_ago=5, text="summer sale")
    assert bff.unread(lapsed)["total"] == 1

    retention_run()

    assert peers(bff, lapsed) == {}
    assert peers(bff, reader) == {}
    assert bff.unread(lapsed)["total"] == 0
    assert peers(bff, loyal)[shop]["unread"] == 1  # the summer sale, not the spring one
    assert peers(bff, loyal)[shop]["last_message"]["preview"] == "summer sale"
    assert texts(bff, loyal, shop) == ["summer sale"]
    assert bff.unread(loyal)["total"] == 1
    assert not Message.objects.filter(msgkey=old.msgkey or 0).exists()
    assert Message.objects.filter(msgkey=new.msgkey or 0).exists()
    old.refresh_from_db()
    assert old.delivered == 3  # the campaign's totals stay, its ledger goes
    assert not CampaignBatch.objects.filter(campaign=old).exists()
    assert CampaignBatch.objects.filter(campaign=new).exists()


def test_a_dry_run_says_what_would_go_and_changes_nothing(
    backend: str, uids: Uids, bff: Api
) -> None:
    shop, reader, lapsed = uids(3)
    campaign(shop, [reader, lapsed], days_ago=40)
    bff.read(reader, shop)

    report = retention_run(dry_run=True)

    assert report.dry_run
    assert counts(report, "campaign_inbox") == {
        "campaigns": 1,
        "entries": 2,
        "unread": 1,
        "conversations_changed": 2,
        "content_rows": 1,
    }
    assert next(k for k in report.kinds if k.kind == "history").days == 0  # kept for ever
    assert texts(bff, lapsed, shop) == ["sale"]
    assert bff.unread(lapsed)["total"] == 1
    assert retention_run().kinds[0].counts["entries"] == 2  # the real run finds the same


def test_history_ages_out_after_its_days_and_unread_counts_what_is_left(
    backend: str, uids: Uids, bff: Api, settings: Any
) -> None:
    settings.RETENTION_HISTORY_DAYS = 30
    alice, bob, carol = uids(3)
    gone = chat(alice, bob, days_ago=60, text="long ago")
    kept = chat(alice, bob, days_ago=1, text="yesterday")
    chat(carol, bob, days_ago=45, text="forgotten")
    assert bff.unread(bob)["total"] == 3

    report = retention_run(kinds=["history"])

    assert set(peers(bff, bob)) == {alice}
    assert peers(bff, bob)[alice]["unread"] == 1
    assert bff.unread(bob)["total"] == 1
    assert texts(bff, bob, alice) == ["yesterday"]
    assert texts(bff, alice, bob) == ["yesterday"]
    assert peers(bff, carol) == {}
    assert counts(report, "history")["conversations_removed"] == 2  # carol's side and bob's
    assert not Message.objects.filter(msgkey=gone).exists()
    assert Message.objects.filter(msgkey=kept).exists()


def test_content_still_referenced_is_kept(
    backend: str, uids: Uids, bff: Api, settings: Any
) -> None:
    settings.RETENTION_HISTORY_DAYS = 30
    shop, fan, alice = uids(3)
    running = campaign(shop, [fan], days_ago=40, text="still going", status=CampaignStatus.RUNNING)
    chat(alice, fan, days_ago=10, text="recent")

    retention_run(kinds=["campaign_inbox", "history"])

    assert Message.objects.filter(
        msgkey=running.msgkey or 0
    ).exists()  # the campaign still sends it
    assert texts(bff, fan, alice) == ["recent"]
    assert bff.unread(fan)["total"] == 1  # the campaign's old copy went with history


def test_delivery_events_age_out_and_unread_losses_are_counted(uids: Uids) -> None:
    receiver, peer = uids(2)
    stream = events.stream_key(receiver % events.SHARDS)
    old_id = f"{keys.now_ms() - 20 * DAY_MS}-0"
    client = get_redis()
    client.xadd(stream, {"uids": str(receiver), "peer": peer, "msgkey": 1}, id=old_id)
    client.xgroup_create(stream, "gateways", id="0")
    events.publish_deliveries(receiver_uids=[receiver], peer_uid=peer, msgkey=2)

    report = retention_run(kinds=["events"])

    assert counts(report, "events") == {"stream_entries": 1}
    assert [d.msgkey for d in events.read_deliveries(receiver % events.SHARDS)] == [2]
    assert client.hget(events.trimmed_key(stream), "gateways") == b"1"
