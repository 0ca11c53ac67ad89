"""Retention drops whole months of content with ``DROP PARTITION`` (MariaDB), outside any
transaction: a month wholly before the cutoff that nothing kept refers to goes as one partition,
its messages with it; newer content stays and its history still reads; a dry run counts the
month and drops nothing; a month that a running campaign still sends from is kept whole."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from bulk.models import CampaignStatus
from messaging.models import Message
from retention.services import retention_run
from storage import partitions
from storage.partitions import Month
from tests.api.factories import Api
from tests.retention.helpers import campaign, chat

# ALTER TABLE commits whatever is open: these tests run outside a test transaction, as the command
# and the beat task do.
pytestmark = pytest.mark.django_db(transaction=True)
Uids = Callable[[int], list[int]]


def this_month() -> Month:
    return Month.of(datetime.now(UTC))


def months() -> list[str]:
    with connection.cursor() as cur:
        return [m.name for m in partitions.existing(cur) or []]


def days_ago(when: datetime) -> float:
    return (datetime.now(UTC) - when).total_seconds() / 86_400


@pytest.fixture
def cold_month() -> Iterator[Month]:
    """The month before last as a partition of its own (the oldest one holds anything older), split
    off last month's; merged back afterwards if it is still there."""
    cold, last = this_month().plus(-2), this_month().plus(-1)
    assert months()[0] == last.name, months()
    clause = partitions.partition_clause([cold, last]).rsplit(", PARTITION pmax", 1)[0]
    with connection.cursor() as cur:
        cur.execute(
            f"ALTER TABLE {partitions.TABLE} REORGANIZE PARTITION {last.name} INTO ({clause})"
        )
    yield cold
    if cold.name in months():
        with connection.cursor() as cur:
            merged = f"PARTITION {last.name} VALUES LESS THAN ({last.bound})"
            cur.execute(
                f"ALTER TABLE {partitions.TABLE} REORGANIZE PARTITION {cold.name}, {last.name} "
                f"INTO ({merged})"
            )


def run_at_start_of_last_month(dry_run: bool = False) -> dict[str, int]:
    """History kept for one day, as of a day into last month: the cutoff falls just after the
    cold month ends."""
    start = this_month().plus(-1).first_instant
    report = retention_run(
        kinds=["history"], dry_run=dry_run, now=start + timedelta(days=1, hours=1)
    )
    return next(k.counts for k in report.kinds if k.kind == "history")


def test_a_cold_month_goes_as_one_partition_and_newer_history_stays(
    cold_month: Month, uids: Uids, bff: Api, settings: Any
) -> None:
    settings.RETENTION_HISTORY_DAYS = 1
    alice, bob = uids(2)
    old = chat(alice, bob, days_ago(cold_month.first_instant + timedelta(days=3)), text="old")
    chat(alice, bob, days_ago=0.01, text="new")

    dry = run_at_start_of_last_month(dry_run=True)
    assert dry["content_partitions"] == 1
    assert cold_month.name in months()
    assert Message.objects.filter(msgkey=old).exists()

    counts = run_at_start_of_last_month()

    assert counts["content_partitions"] == 1
    assert cold_month.name not in months()
    assert not Message.objects.filter(msgkey=old).exists()
    assert [m["content"]["text"] for m in bff.history(bob, alice)["results"]] == ["new"]


def test_a_month_a_running_campaign_still_sends_from_is_kept(
    cold_month: Month, uids: Uids, settings: Any
) -> None:
    settings.RETENTION_HISTORY_DAYS = 1
    shop, fan = uids(2)
    sent = days_ago(cold_month.first_instant + timedelta(days=3))
    running = campaign(shop, [fan], sent, text="still going", status=CampaignStatus.RUNNING)

    counts = run_at_start_of_last_month()

    assert counts["content_partitions"] == 0
    assert cold_month.name in months()
    assert Message.objects.filter(msgkey=running.msgkey or 0).exists()
