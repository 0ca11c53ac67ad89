"""Operators in Django admin: campaign progress and control, the ledger, audiences, policies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from bulk import audiences, fanout, services
from bulk.models import Campaign, CampaignStatus, ChannelSetting, SenderPolicy
from tests.bulk.helpers import drive, shop

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]
CAMPAIGNS = "/admin/bulk/campaign/"


def launch(sender: int, receivers: list[int], channel: str = "daily") -> Campaign:
    campaign, _ = services.campaign_submit(
        sender_uid=sender,
        content={"type": "text", "text": "hello"},
        audience_spec={"type": "uids", "uids": [str(u) for u in receivers]},
        channel=channel,
    )
    return campaign


def act(admin_client: Client, action: str, *campaigns: Campaign) -> list[str]:
    response = admin_client.post(
        CAMPAIGNS, {"action": action, "_selected_action": [c.pk for c in campaigns]}, follow=True
    )
    assert response.redirect_chain == [(CAMPAIGNS, 302)]
    return [str(m) for m in response.context["messages"]]


def status_of(campaign: Campaign) -> tuple[str, str]:
    campaign.refresh_from_db()
    return campaign.status, campaign.pause_reason


def test_the_campaign_list_shows_progress_and_filters(admin_client: Client, uids: Uids) -> None:
    sender, *fans = uids(5)
    shop(sender)
    finished = drive(launch(sender, fans).pk)
    running = launch(sender, fans[:2])

    page = admin_client.get(CAMPAIGNS).content.decode()
    only_finished = admin_client.get(CAMPAIGNS, {"status__exact": "finished"}).content.decode()
    only_priority = admin_client.get(CAMPAIGNS, {"channel__exact": "priority"}).content.decode()

    assert f'data-live-id="{finished.pk}" value="100" max="100"></progress>' in page
    assert "100% · 4 delivered · 0 skipped · 0 failed of 4" in page
    assert "0 delivered · 0 skipped · 0 failed of 0 planned so far" in page  # still planning
    assert f"/admin/bulk/campaign/{running.pk}/change/" in page
    assert f"/admin/bulk/campaign/{finished.pk}/change/" in only_finished
    assert f"/admin/bulk/campaign/{running.pk}/change/" not in only_finished
    assert f"/admin/bulk/campaign/{finished.pk}/change/" not in only_priority


def test_search_finds_a_campaign_by_id_or_sender(admin_client: Client, uids: Uids) -> None:
    sender, other, fan = uids(3)
    shop(sender)
    shop(other)
    mine, theirs = launch(sender, [fan]), launch(other, [fan])

    by_sender = admin_client.get(CAMPAIGNS, {"q": str(sender)}).content.decode()
    by_id = admin_client.get(CAMPAIGNS, {"q": str(theirs.pk)}).content.decode()

    assert f"/admin/bulk/campaign/{mine.pk}/change/" in by_sender
    assert f"/admin/bulk/campaign/{theirs.pk}/change/" not in by_sender
    assert f"/admin/bulk/campaign/{theirs.pk}/change/" in by_id


def test_actions_pause_resume_and_cancel_through_the_services(
    admin_client: Client, uids: Uids
) -> None:
    sender, *fans = uids(3)
    shop(sender)
    campaign = launch(sender, fans)

    assert act(admin_client, "pause_selected", campaign) == ["Paused 1 campaign(s)."]
    assert status_of(campaign) == ("paused", "operator")
    assert act(admin_client, "resume_selected", campaign) == ["Resumed 1 campaign(s)."]
    assert status_of(campaign) == ("running", "")
    assert act(admin_client, "cancel_selected", campaign) == ["Cancelled 1 campaign(s)."]
    assert status_of(campaign) == ("cancelled", "")


def test_an_action_a_status_refuses_is_reported_and_the_others_still_apply(
    admin_client: Client, uids: Uids
) -> None:
    sender, fan = uids(2)
    shop(sender)
    finished = drive(launch(sender, [fan]).pk)
    running = launch(sender, [fan])

    notes = act(admin_client, "pause_selected", finished, running)

    assert notes == [
        f"Campaign {finished.pk}: A finished campaign cannot be paused.",
        "Paused 1 campaign(s).",
    ]
    assert status_of(finished)[0] == CampaignStatus.FINISHED
    assert status_of(running)[0] == CampaignStatus.PAUSED


def test_an_action_that_changes_nothing_says_so(admin_client: Client, uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    campaign = launch(sender, [fan])
    assert act(admin_client, "pause_selected", campaign) == ["Paused 1 campaign(s)."]
    assert act(admin_client, "pause_selected", campaign) == [
        f"Campaign {campaign.pk} was already paused."
    ]
    assert act(admin_client, "cancel_selected", campaign) == ["Cancelled 1 campaign(s)."]
    assert act(admin_client, "cancel_selected", campaign) == [
        f"Campaign {campaign.pk} was already cancelled."
    ]


def test_a_campaign_page_is_read_only_and_sums_up_its_batches(
    admin_client: Client, uids: Uids
) -> None:
    sender, *fans = uids(6)
    shop(sender)
    ChannelSetting.objects.create(channel="daily", rate_per_s=3500, batch_size=2)
    campaign = drive(launch(sender, fans).pk)
    page_url = f"{CAMPAIGNS}{campaign.pk}/change/"

    page = admin_client.get(page_url)
    text = page.content.decode()

    assert page.status_code == 200
    assert 'name="_save"' not in text
    assert "<td>3</td><td>5</td>" in text  # 3 batches done, holding the 5 recipients
    assert "5 delivered, 0 failed" in text
    assert f"?campaign__id__exact={campaign.pk}&amp;state__exact=done" in text
    assert admin_client.post(page_url, {"status": "running"}).status_code == 403
    assert admin_client.get(f"{CAMPAIGNS}{campaign.pk}/delete/").status_code == 403


def test_the_batch_ledger_is_listed_read_only_by_state(admin_client: Client, uids: Uids) -> None:
    sender, *fans = uids(5)
    shop(sender)
    ChannelSetting.objects.create(channel="daily", rate_per_s=3500, batch_size=2)
    done = drive(launch(sender, fans).pk)
    pending = launch(sender, fans)
    while fanout.campaign_plan_step(pending.pk):
        pass
    url = "/admin/bulk/campaignbatch/"

    def batches(campaign: Campaign, state: str) -> Any:
        return admin_client.get(
            url, {"campaign__id__exact": str(campaign.pk), "state__exact": state}
        )

    done_rows, none_pending = batches(done, "done"), batches(done, "pending")
    waiting = batches(pending, "pending")
    batch = done.batches.first()
    assert batch is not None
    detail = admin_client.get(f"{url}{batch.pk}/change/")

    assert done_rows.context["cl"].result_count == 2
    assert none_pending.context["cl"].result_count == 0
    assert waiting.context["cl"].result_count == 2
    assert detail.status_code == 200
    assert 'name="_save"' not in detail.content.decode()
    assert admin_client.post(f"{url}{batch.pk}/change/", {"state": "pending"}).status_code == 403


def test_an_audience_page_shows_counts_and_invalid_samples(
    admin_client: Client, uids: Uids
) -> None:
    a, b = uids(2)
    stored = audiences.audience_from_lines(
        lines=[str(a), "<script>", str(b), str(a)], sender_uid=None, name="spring list"
    )

    listing = admin_client.get("/admin/bulk/audience/").content.decode()
    detail = admin_client.get(f"/admin/bulk/audience/{stored.pk}/change/").content.decode()

    assert "spring list" in listing
    assert "line 2: <code>&lt;script&gt;</code> (not a positive integer)" in detail
    assert 'name="_save"' not in detail


def test_sender_policies_and_channel_settings_are_editable(
    admin_client: Client, uids: Uids
) -> None:
    sender = uids(1)[0]
    form: dict[str, Any] = {
        "sender_uid": sender,
        "per_receiver_limit": 3,
        "per_receiver_period_s": 3600,
        "daily_budget": 1000,
        "priority_allowed": "on",
    }

    added = admin_client.post("/admin/bulk/senderpolicy/add/", form)
    ChannelSetting.objects.create(channel="priority", rate_per_s=30000, batch_size=1000)
    changed = admin_client.post(
        "/admin/bulk/channelsetting/priority/change/",
        {"channel": "priority", "rate_per_s": 20000, "batch_size": 500},
    )

    assert added.status_code == 302
    policy = SenderPolicy.objects.get(sender_uid=sender)
    assert (policy.per_receiver_limit, policy.daily_budget, policy.priority_allowed) == (
        3,
        1000,
        True,
    )
    assert changed.status_code == 302
    assert ChannelSetting.objects.filter(
        channel="priority", rate_per_s=20000, batch_size=500
    ).exists()
