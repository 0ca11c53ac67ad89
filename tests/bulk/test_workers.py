"""Real Celery worker processes: kill -9 mid-campaign, forced redeliveries, separate channels."""

from __future__ import annotations

import os
import signal

import pytest
from django.test import override_settings

from bulk import fanout, services
from bulk.models import Campaign, CampaignBatch, CampaignStatus, ChannelSetting
from tests.bulk.helpers import assert_exactly_once, business_with_followers, launch
from tests.conftest import wait_for

pytestmark = pytest.mark.worker


def _finished(campaign_id: int, sweep: bool = False) -> bool:
    if sweep:
        fanout.sweep()
    return Campaign.objects.get(pk=campaign_id).status == CampaignStatus.FINISHED


@override_settings(BULK_LEASE_S=3)
def test_kill_minus_nine_mid_campaign_then_recovery_is_exactly_once(workers, uids) -> None:
    workers.env["BULK_LEASE_S"] = "3"
    ChannelSetting.objects.create(channel="daily", rate_per_s=4000, batch_size=500)
    scenario = business_with_followers(uids(12001), blocked_every=97)
    victim = workers.start(queues="bulk.daily", concurrency=2, new_session=True)
    campaign = launch(scenario)
    wait_for(lambda: Campaign.objects.get(pk=campaign.pk).delivered >= 3000, timeout=120)
    os.killpg(victim.pid, signal.SIGKILL)  # the whole worker: parent and forked children
    victim.wait()
    dead_at = Campaign.objects.get(pk=campaign.pk)
    assert dead_at.status == CampaignStatus.RUNNING
    assert dead_at.processed < len(scenario.followers)  # killed mid-campaign, not after
    workers.start(queues="bulk.daily", concurrency=2)
    wait_for(lambda: _finished(campaign.pk, sweep=True), timeout=240, every=1.0)
    assert_exactly_once(
        campaign.pk, scenario.expected, scenario.sender, skipped_blocked=len(scenario.blocked)
    )


def test_every_batch_message_delivered_twice_changes_nothing(workers, uids) -> None:
    scenario = business_with_followers(uids(5001))
    campaign = launch(scenario)
    while fanout.campaign_plan_step(campaign.pk):
        pass  # planned here, so the duplicates below race the originals in the queue
    ids = list(CampaignBatch.objects.filter(campaign=campaign).values_list("pk", flat=True))
    services.enqueue_batches("daily", ids)  # a second copy of every batch message
    workers.start(queues="bulk.daily", concurrency=2)
    wait_for(lambda: _finished(campaign.pk), timeout=180)
    services.enqueue_batches("daily", ids)  # a redelivery after the visibility timeout
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)


def test_a_priority_campaign_finishes_while_a_big_daily_one_runs(workers, uids) -> None:
    ChannelSetting.objects.create(channel="daily", rate_per_s=2000, batch_size=1000)
    daily_scenario = business_with_followers(uids(30001))
    daily = launch(daily_scenario, channel="daily")
    workers.start(queues="bulk.daily", concurrency=1)
    workers.start(queues="bulk.priority", concurrency=1)
    wait_for(lambda: Campaign.objects.get(pk=daily.pk).delivered > 0, timeout=120)
    priority_scenario = business_with_followers(uids(1001))
    priority = launch(priority_scenario, channel="priority")
    wait_for(lambda: _finished(priority.pk), timeout=120)
    assert Campaign.objects.get(pk=daily.pk).status == CampaignStatus.RUNNING
    assert_exactly_once(priority.pk, priority_scenario.expected, priority_scenario.sender)
    wait_for(lambda: _finished(daily.pk), timeout=240)
    assert_exactly_once(daily.pk, daily_scenario.expected, daily_scenario.sender)
