"""Store outages in the middle of a campaign, on the real services, driven by the project's own
script (``scripts/services stop|kill|start``, and ``freeze|thaw``: SIGSTOP/SIGCONT, a store that
keeps its connections open and answers nothing), with real Celery workers delivering.

Each fault ends with the campaign finished, ``failed == 0``, and every recipient exact: one inbox
entry, one conversation, unread 1 (Redis's counts as the deliveries left them; after a Redis
crash, read through the API's own path, which repairs what the crash lost). The beat is played
by the test's loop: ``bulk.sweep`` and the counters' restart check, every half second.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.test import override_settings

from bulk import fanout
from bulk.models import Campaign, CampaignStatus, ChannelSetting
from infra import breakers, hbase
from infra.redis import get_redis
from messaging.models import Conversation
from storage.counters import epoch
from storage.counters.store import unread_summary as live_counts
from storage.inbox import _cached, get_inbox
from tests.bulk.helpers import Scenario, business_with_followers, launch
from tests.conftest import services, wait_for
from unread.selectors import unread_summary

pytestmark = [pytest.mark.worker, pytest.mark.faults]
ROOT = Path(__file__).resolve().parents[2]
RECIPIENTS = 4000
LEASE_S = 3


def reconnecting(fn: Callable[[], Any]) -> Callable[[], Any]:
    """The test's own database connection dies with a restarted MariaDB: reopen it."""

    def call() -> Any:
        try:
            return fn()
        except OperationalError:
            connection.close()
            return False

    return call


def beat_and_status(campaign_id: int) -> str:
    """One beat tick (what ``celery beat`` runs every few seconds), then the campaign's status."""
    try:
        fanout.sweep()
        epoch.check_restart()
    except Exception:  # a store still down: the beat's next tick tries again
        connection.close()
        return "beat-failed"
    return str(Campaign.objects.get(pk=campaign_id).status)


@pytest.fixture
def campaign_setup(workers: Any, uids: Callable[[int], list[int]]) -> Iterator[Any]:
    """An HBase-inbox campaign of RECIPIENTS, two daily workers, short leases."""
    workers.env.update({"INBOX_BACKEND": "hbase", "BULK_LEASE_S": str(LEASE_S)})
    with override_settings(INBOX_BACKEND="hbase", BULK_LEASE_S=LEASE_S):
        _cached.cache_clear()
        ChannelSetting.objects.create(channel="daily", rate_per_s=1500, batch_size=250)
        scenario = business_with_followers(uids(RECIPIENTS + 1), blocked_every=101)
        workers.start(queues="bulk.daily", concurrency=2)
        yield scenario
    _cached.cache_clear()
    hbase.reset_pools()


def run_with_fault(
    scenario: Scenario, down: Callable[[], None], up: Callable[[], None], hold_s: float
) -> Campaign:
    """Launch, take a store down once a quarter is delivered, hold, bring it back, finish."""
    campaign = launch(scenario)
    wait_for(lambda: Campaign.objects.get(pk=campaign.pk).delivered >= RECIPIENTS // 4, timeout=120)
    down()
    time.sleep(hold_s)
    up()
    during = reconnecting(lambda: Campaign.objects.get(pk=campaign.pk))()
    assert during, "the campaign could not be read after the fault"
    assert during.delivered < len(scenario.expected), "the fault came too late"
    wait_for(
        reconnecting(lambda: beat_and_status(campaign.pk) == CampaignStatus.FINISHED),
        timeout=300,
        every=0.5,
    )
    return Campaign.objects.get(pk=campaign.pk)


def recipients_where(wrong: Callable[[int], bool], uids: Collection[int]) -> set[int]:
    """The ``uids`` for which ``wrong`` holds, asked of each user's own read path from 8 threads:
    one at a time, 4,000 unread reads (each repairs that user's counters first) took 14 s a test."""
    ordered = sorted(uids)

    def part(start: int) -> set[int]:
        try:
            return {uid for uid in ordered[start::8] if wrong(uid)}
        finally:
            connection.close()  # this thread's own

    with ThreadPoolExecutor(8) as pool:
        return set().union(*pool.map(part, range(8)))


def assert_every_recipient_exact(
    campaign: Campaign, scenario: Scenario, *, redis_lost_writes: bool = False
) -> None:
    """Finished, nobody failed, and each recipient holds one inbox entry, one conversation and
    an unread count of 1 from the sender. The counts are Redis's as the deliveries left them (a
    batch counted twice shows as 2), unless the fault lost Redis writes (``redis_lost_writes``:
    a Redis killed, a cluster master failed over): then they are read through the API's own path,
    which first rebuilds from the truth what Redis lost (4,000 such rebuilds: ~7 s a test)."""
    assert (campaign.status, campaign.failed) == (CampaignStatus.FINISHED, 0)
    assert campaign.delivered == len(scenario.expected)
    assert campaign.skipped_blocked == len(scenario.blocked)
    inbox, sender = get_inbox(), scenario.sender
    assert recipients_where(lambda u: inbox.count(u, sender) != 1, scenario.expected) == set()
    receivers = Conversation.objects.filter(peer_uid=sender)
    assert set(receivers.values_list("owner_uid", flat=True)) == scenario.expected
    counts = unread_summary if redis_lost_writes else live_counts
    wrong = recipients_where(lambda u: counts(u).by_peer != {sender: 1}, scenario.expected)
    assert wrong == set()


@pytest.mark.hbase_faults
def test_hbase_gateways_down_mid_campaign(campaign_setup: Scenario) -> None:
    """Held 10 s like the freezes below: past the breakers' opening and a few sweeps, the rest
    of an outage is more of the same wait (scripts/fault_drill.py holds each fault 30 s)."""
    down, up = (
        (lambda: services("stop", "hbase-thrift")),
        (lambda: services("start", "hbase-thrift")),
    )
    campaign = run_with_fault(campaign_setup, down, up, hold_s=10)
    assert_every_recipient_exact(campaign, campaign_setup)


@pytest.mark.hbase_faults
def test_the_whole_hbase_restarted_mid_campaign(campaign_setup: Scenario) -> None:
    down, up = (lambda: services("stop", "hbase")), (lambda: services("start", "hbase"))
    campaign = run_with_fault(campaign_setup, down, up, hold_s=0)
    assert_every_recipient_exact(campaign, campaign_setup)


def test_redis_killed_with_minus_nine_and_restarted(campaign_setup: Scenario) -> None:
    epoch.check_restart()  # the running Redis is recorded, as the beat had done long before

    def up() -> None:
        services("start", "redis")
        get_redis().connection_pool.disconnect()

    campaign = run_with_fault(campaign_setup, lambda: services("kill", "redis"), up, hold_s=3)
    assert_every_recipient_exact(campaign, campaign_setup, redis_lost_writes=True)


def test_mariadb_restarted_mid_campaign(campaign_setup: Scenario) -> None:
    def up() -> None:
        services("start", "mariadb")
        connection.close()

    campaign = run_with_fault(campaign_setup, lambda: services("stop", "mariadb"), up, hold_s=5)
    assert_every_recipient_exact(campaign, campaign_setup)


# -- frozen stores (SIGSTOP: connections open, nothing answers; infra/breakers.py) ---------------
def test_redis_frozen_mid_campaign(campaign_setup: Scenario) -> None:
    def up() -> None:
        services("thaw", "redis")
        breakers.reset()  # this process's (the test's beat): the workers' probe on their own

    try:
        campaign = run_with_fault(campaign_setup, lambda: services("freeze", "redis"), up, 10)
    finally:
        services("thaw", "redis")
    assert_every_recipient_exact(campaign, campaign_setup)


def test_mariadb_frozen_mid_campaign(campaign_setup: Scenario) -> None:
    def up() -> None:
        services("thaw", "mariadb")
        breakers.reset()
        connection.close()

    try:
        campaign = run_with_fault(campaign_setup, lambda: services("freeze", "mariadb"), up, 10)
    finally:
        services("thaw", "mariadb")
    assert_every_recipient_exact(campaign, campaign_setup)


@pytest.mark.hbase_faults
def test_hbase_gateways_frozen_mid_campaign(campaign_setup: Scenario) -> None:
    def down() -> None:
        services("freeze", "hbase-thrift")

    def up() -> None:
        services("thaw", "hbase-thrift")
        breakers.reset()

    try:
        campaign = run_with_fault(campaign_setup, down, up, 10)
    finally:
        services("thaw", "hbase-thrift")
    assert_every_recipient_exact(campaign, campaign_setup)
