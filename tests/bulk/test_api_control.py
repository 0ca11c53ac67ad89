"""Pause, resume and cancel through the API (``POST /campaigns/{id}/pause|resume|cancel``), and what
they do to delivery, rate and ETA; a scheduled campaign waits."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from bulk import fanout
from bulk.models import Campaign, CampaignBatch, ChannelSetting
from tests.api.factories import ClientApi
from tests.bulk.helpers import Uids, campaigns_api, create, drive, progress, received, shop

pytestmark = pytest.mark.django_db


# -- control --------------------------------------------------------------------------------------
def planned(fans: int, uids: Uids) -> tuple[ClientApi, int, list[int], str]:
    """A shop's campaign to ``fans`` listed uids, planned but not run: (api, sender, fans, id)."""
    sender, *listed = uids(fans + 1)
    shop(sender)
    api = campaigns_api(sender)
    campaign_id = create(api, sender, {"type": "uids", "uids": listed})["id"]
    while fanout.campaign_plan_step(int(campaign_id)):
        pass
    return api, sender, listed, campaign_id


def test_pause_resume_and_cancel_through_the_api(uids: Uids) -> None:
    api, sender, fans, campaign_id = planned(3, uids)

    status, paused = api.call("POST", f"/campaigns/{campaign_id}/pause")
    assert status == 200, paused
    assert (paused["status"], paused["pause_reason"], paused["eta_s"]) == ("paused", "manual", None)
    for batch_id in CampaignBatch.objects.filter(campaign_id=campaign_id).values_list(
        "pk", flat=True
    ):
        fanout.batch_run(batch_id)  # a queued batch meets a paused campaign: nothing sent
    assert all(received(fan, sender) == [] for fan in fans)

    status, resumed = api.call("POST", f"/campaigns/{campaign_id}/resume")
    assert status == 200, resumed
    assert (resumed["status"], resumed["pause_reason"]) == ("running", None)
    drive(campaign_id)
    assert progress(api, campaign_id)["delivered"] == 3

    status, refused = api.call("POST", f"/campaigns/{campaign_id}/cancel")
    assert status == 409, refused
    assert refused["error"] == "conflict"
    status, refused = api.call("POST", f"/campaigns/{campaign_id}/resume")
    assert status == 409, refused


def test_rate_and_eta_leave_out_the_time_a_campaign_spent_paused(uids: Uids) -> None:
    api, _, _, campaign_id = planned(2, uids)
    # 100 s ago it started; 1,000 of 3,000 went out before it was paused 80 s ago.
    now = timezone.now()
    Campaign.objects.filter(pk=campaign_id).update(
        started_at=now - timedelta(seconds=100), total=3000, delivered=1000
    )
    assert api.call("POST", f"/campaigns/{campaign_id}/pause")[0] == 200
    Campaign.objects.filter(pk=campaign_id).update(paused_at=now - timedelta(seconds=80))
    paused = progress(api, campaign_id)
    assert 45 <= paused["rate_per_s"] <= 55  # 1,000 in 20 s of running, frozen while paused
    assert paused["eta_s"] is None

    assert api.call("POST", f"/campaigns/{campaign_id}/resume")[0] == 200
    resumed = progress(api, campaign_id)
    assert 45 <= resumed["rate_per_s"] <= 55  # not 1,000 / 100 s
    assert 36 <= resumed["eta_s"] <= 44  # 2,000 more at ~50/s


def ledger(campaign_id: str, finished_s_ago: list[float], each: int, total: int) -> None:
    """The campaign's batches as the workers leave them: one done batch of ``each`` recipients per
    entry of ``finished_s_ago`` (the others pending); its totals match the ledger's."""
    now = timezone.now()
    batches = list(CampaignBatch.objects.filter(campaign_id=campaign_id).order_by("index"))
    for batch, ago in zip(batches, finished_s_ago, strict=False):
        CampaignBatch.objects.filter(pk=batch.pk).update(
            state="done", size=each, delivered=each, finished_at=now - timedelta(seconds=ago)
        )
    delivered = each * len(finished_s_ago)
    Campaign.objects.filter(pk=campaign_id).update(
        started_at=now - timedelta(seconds=100), total=total, delivered=delivered
    )


def test_rate_and_eta_are_those_of_the_last_30_seconds_in_the_api_and_the_console(
    uids: Uids, admin_client: Client
) -> None:
    ChannelSetting.objects.create(channel="daily", rate_per_s=3500, batch_size=1)
    api, _, _, campaign_id = planned(8, uids)
    # a slow start (4 batches of 1,000 90-60 s ago), then 3 batches of 1,000 in the last 30 s:
    # 100/s in the last 30 s, 70/s since the start 100 s ago; 3,000 recipients left
    ledger(campaign_id, [90, 80, 70, 60, 20, 10, 5], each=1000, total=10_000)

    shown = progress(api, campaign_id)
    console = admin_client.get("/admin/bulk/campaign/progress.json", {"ids": campaign_id}).json()[
        "campaigns"
    ][0]

    assert 95 <= shown["rate_per_s"] <= 105  # not 70
    # the ETA divides by the mean of the two: 3,000 / 85 = 35 s
    assert 34 <= shown["eta_s"] <= 37
    assert console["rate"]["per_s"] == pytest.approx(shown["rate_per_s"], rel=0.02)
    assert 29 <= console["rate"]["over_s"] <= 31
    assert console["eta_s"] == pytest.approx(shown["eta_s"], rel=0.02)


def test_after_a_resume_the_rate_counts_only_batches_finished_since(uids: Uids) -> None:
    ChannelSetting.objects.create(channel="daily", rate_per_s=3500, batch_size=1)
    api, _, _, campaign_id = planned(8, uids)
    ledger(campaign_id, [28, 26, 24, 6, 4, 2], each=1000, total=10_000)
    assert api.call("POST", f"/campaigns/{campaign_id}/pause")[0] == 200
    assert api.call("POST", f"/campaigns/{campaign_id}/resume")[0] == 200
    # the resume was 10 s ago; the three batches before it ran before the pause
    Campaign.objects.filter(pk=campaign_id).update(
        resumed_at=timezone.now() - timedelta(seconds=10)
    )

    shown = progress(api, campaign_id)

    assert 280 <= shown["rate_per_s"] <= 320  # 3,000 in the 10 s since the resume
    # 4,000 left at the mean of 300/s and the run's 60/s (6,000 in 100 s): 22 s
    assert 21 <= shown["eta_s"] <= 24


def test_a_cancelled_campaign_sends_no_more_batches(uids: Uids) -> None:
    sender, *fans = uids(4)
    shop(sender)
    api = campaigns_api(sender)
    campaign_id = create(api, sender, {"type": "uids", "uids": fans})["id"]

    status, cancelled = api.call("POST", f"/campaigns/{campaign_id}/cancel")
    drive(campaign_id)

    assert status == 200, cancelled
    assert cancelled["status"] == "cancelled"
    assert cancelled["finished_at"] is not None
    shown = progress(api, campaign_id)
    assert (shown["status"], shown["delivered"]) == ("cancelled", 0)
    assert all(received(fan, sender) == [] for fan in fans)


def test_cancelling_again_keeps_the_time_it_was_cancelled(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    api = campaigns_api(sender)
    campaign_id = create(api, sender, {"type": "uids", "uids": [fan]})["id"]
    first = api.call("POST", f"/campaigns/{campaign_id}/cancel")[1]
    time.sleep(0.01)  # so that a rewritten finished_at would differ

    status, again = api.call("POST", f"/campaigns/{campaign_id}/cancel")

    assert status == 200, again
    assert again["status"] == "cancelled"
    assert again["finished_at"] == first["finished_at"] == progress(api, campaign_id)["finished_at"]


def test_a_scheduled_campaign_waits_and_can_be_cancelled(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    api = campaigns_api(sender)
    later = (timezone.now() + timedelta(days=1)).isoformat()

    created = create(api, sender, {"type": "uids", "uids": [fan]}, scheduled_at=later)
    status, refused = api.call("POST", f"/campaigns/{created['id']}/pause")
    status2, cancelled = api.call("POST", f"/campaigns/{created['id']}/cancel")

    assert (created["status"], created["started_at"], created["rate_per_s"]) == (
        "scheduled",
        None,
        0.0,
    )
    assert created["scheduled_at"] is not None
    assert status == 409, refused
    assert (status2, cancelled["status"]) == (200, "cancelled")
