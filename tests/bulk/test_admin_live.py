"""The live campaign console in Django admin: progress.json (bulk/admin_views.py, bulk/live.py),
the polled cells and script, the actions on the campaign page, and the read-only message page."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from bulk import fanout, recall, services
from bulk.models import BatchState, Campaign, CampaignBatch, CampaignStatus, ChannelSetting
from infra import metrics
from messaging.models import Message, MessageStatus
from tests.bulk.helpers import block, drive, follow, received, shop
from tests.conftest import Workers, wait_for

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]
CAMPAIGNS = "/admin/bulk/campaign/"


def launch(sender: int, entries: list[str], channel: str = "daily") -> Campaign:
    campaign, _ = services.campaign_submit(
        sender_uid=sender,
        content={"type": "text", "text": "Spring sale"},
        audience_spec={"type": "uids", "uids": entries},
        channel=channel,
    )
    return campaign


def live(client: Client, *campaigns: Campaign) -> list[dict[str, Any]]:
    response = client.get(
        f"{CAMPAIGNS}progress.json", {"ids": ",".join(str(c.pk) for c in campaigns)}
    )
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["missing"] == []
    return list(answer["campaigns"])


def expected(campaign: Campaign) -> dict[str, Any]:
    """The campaign's real progress, read from its row on the primary."""
    campaign.refresh_from_db()
    return {
        "id": str(campaign.pk),
        "status": campaign.status,
        "total": campaign.total,
        "delivered": campaign.delivered,
        "skipped": {
            "quota": campaign.skipped_quota,
            "blocked": campaign.skipped_blocked,
            "invalid": campaign.skipped_invalid,
            "duplicate": campaign.skipped_duplicate,
        },
        "failed": campaign.failed,
        "processed": campaign.processed,
        "percent": 100 * campaign.processed // campaign.total if campaign.total else 0,
    }


def figures(body: dict[str, Any]) -> dict[str, Any]:
    """The figures of a progress.json body that ``expected`` reads from the row."""
    keys = ("id", "status", "total", "delivered", "skipped", "failed", "processed", "percent")
    return {key: body[key] for key in keys}


def run_batch(batch_id: int) -> None:
    """One batch to its end in this process, waiting out the channel's rate as a worker would."""
    for _ in range(1000):
        outcome = fanout.batch_run(batch_id)
        if CampaignBatch.objects.get(pk=batch_id).state == BatchState.DONE:
            return
        time.sleep(outcome.retry_in_ms / 1000)
    raise AssertionError("the batch never ran")


def message_of(campaign: Campaign) -> Message:
    assert campaign.msgkey is not None
    return Message.objects.get(msgkey=campaign.msgkey)


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]]


# -- progress.json ----------------------------------------------------------------------------
def test_while_planning_goes_on_the_percentage_and_eta_are_of_the_estimated_audience(
    admin_client: Client, uids: Uids
) -> None:
    """A followers campaign whose planner has walked 20 of its 25 followers: the console shows
    a percentage of the followers counted by the first plan step, and an ETA for the whole run."""
    sender, *fans = uids(26)
    shop(sender)
    follow(sender, fans)
    ChannelSetting.objects.create(channel="daily", rate_per_s=3500, batch_size=1)
    campaign, _ = services.campaign_submit(
        sender_uid=sender,
        content={"type": "text", "text": "Spring sale"},
        audience_spec={"type": "followers"},
        channel="daily",
    )
    assert fanout.campaign_plan_step(campaign.pk)  # 20 batches of 1: more audience remains
    batches = list(campaign.batches.order_by("index").values_list("pk", flat=True))
    run_batch(batches[0])
    live(admin_client, campaign)  # the rate's first sample
    time.sleep(1.2)
    run_batch(batches[1])

    body = live(admin_client, campaign)[0]
    assert (body["planned"], body["total"], body["processed"]) == (False, 20, 2)
    assert (body["estimate"], body["expected_total"], body["percent"]) == (True, 25, 8)
    assert body["eta_s"] == pytest.approx(23 / body["rate"]["per_s"], rel=0.02, abs=0.1)
    page = admin_client.get(CAMPAIGNS).content.decode()
    assert "8% · 2 delivered · 0 skipped · 0 failed of ~25 (estimated; 20 planned so far)" in page
    assert f'data-live-id="{campaign.pk}" value="8" max="100"></progress>' in page


def test_progress_json_equals_the_campaigns_progress_through_a_run(
    admin_client: Client, uids: Uids
) -> None:
    sender, *fans = uids(8)
    shop(sender)
    ChannelSetting.objects.create(channel="daily", rate_per_s=3500, batch_size=2)
    block(sender, [fans[0]])
    drive(launch(sender, [str(fans[1])]).pk)  # fans[1] is at the per-receiver cap now
    campaign = launch(sender, [str(u) for u in fans] + ["abc", str(fans[2])])
    while fanout.campaign_plan_step(campaign.pk):
        pass

    first = live(admin_client, campaign)[0]
    assert figures(first) == expected(campaign)
    assert (first["total"], first["percent"], first["rate"], first["eta_s"]) == (7, 0, None, None)
    assert first["skipped"] == {"quota": 0, "blocked": 0, "invalid": 1, "duplicate": 1}

    batches = list(campaign.batches.order_by("index").values_list("pk", flat=True))
    assert len(batches) == 4
    run_batch(batches[0])
    time.sleep(1.2)  # the rate is measured over at least a second of samples
    second = live(admin_client, campaign)[0]
    assert figures(second) == expected(campaign)
    moved = second["processed"] - first["processed"]
    assert moved == 2
    rate = second["rate"]
    assert rate["over_s"] >= 1.0
    assert rate["per_s"] * rate["over_s"] == pytest.approx(moved, abs=0.2)
    remaining = second["total"] - second["processed"]
    # eta_s is rounded to 0.1 s and computed from the unrounded rate
    assert second["eta_s"] == pytest.approx(remaining / rate["per_s"], rel=0.02, abs=0.1)

    for batch in batches[1:3]:
        run_batch(batch)
        assert figures(live(admin_client, campaign)[0]) == expected(campaign)
    run_batch(batches[3])

    last = live(admin_client, campaign)[0]
    assert figures(last) == expected(campaign)
    assert last["status"] == CampaignStatus.FINISHED
    assert (last["delivered"], last["skipped"]["quota"], last["skipped"]["blocked"]) == (5, 1, 1)
    assert (last["percent"], last["rate"], last["eta_s"], last["no_worker"]) == (
        100,
        None,
        None,
        False,
    )
    page = admin_client.get(CAMPAIGNS).content.decode()
    assert "100% · 5 delivered · 2 skipped · 0 failed of 7" in page


def test_counts_have_thousands_separators(admin_client: Client, uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    campaign = launch(sender, [str(fan)])
    Campaign.objects.filter(pk=campaign.pk).update(
        total=100_000, delivered=94_600, skipped_quota=3_400, skipped_blocked=2_000, planned=True
    )

    page = admin_client.get(CAMPAIGNS).content.decode()
    detail = admin_client.get(f"{CAMPAIGNS}{campaign.pk}/change/").content.decode()

    assert "100% · 94,600 delivered · 5,400 skipped · 0 failed of 100,000" in page
    assert "94,600 delivered, 0 failed; skipped 3,400 quota, 2,000 blocked" in detail
    assert "bulk/console.js" in page
    assert "bulk/console.js" in detail
    assert f'data-live="figures" data-live-id="{campaign.pk}"' in page


def test_several_campaigns_at_once_and_unknown_ids_listed_as_missing(
    admin_client: Client, uids: Uids
) -> None:
    sender, fan = uids(2)
    shop(sender)
    one, two = launch(sender, [str(fan)]), launch(sender, [str(fan)])

    answer = admin_client.get(
        f"{CAMPAIGNS}progress.json", {"ids": f"{two.pk},{one.pk},999999999"}
    ).json()
    single = admin_client.get(f"{CAMPAIGNS}{one.pk}/progress.json").json()

    assert [b["id"] for b in answer["campaigns"]] == [str(two.pk), str(one.pk)]
    assert answer["missing"] == ["999999999"]
    assert [b["id"] for b in single["campaigns"]] == [str(one.pk)]


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({}, "ids is required"),
        ({"ids": ""}, "ids is required"),
        ({"ids": "1,abc"}, "not 'abc'"),
        ({"ids": "-3"}, "not '-3'"),
        ({"ids": "99999999999999999999999"}, "positive integers"),
        ({"ids": ",".join(str(i) for i in range(1, 102))}, "at most 100"),
    ],
)
def test_bad_ids_answer_400_with_a_reason(
    admin_client: Client, query: dict[str, str], says: str
) -> None:
    response = admin_client.get(f"{CAMPAIGNS}progress.json", query)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert says in response.json()["detail"]


def test_a_bad_or_unknown_single_id(admin_client: Client) -> None:
    bad = admin_client.get(f"{CAMPAIGNS}x1/progress.json")
    unknown = admin_client.get(f"{CAMPAIGNS}999999999/progress.json")

    assert (bad.status_code, bad.json()["error"]) == (400, "invalid")
    assert (unknown.status_code, unknown.json()) == (
        404,
        {"error": "not_found", "detail": "No campaign 999999999."},
    )


def test_progress_is_for_staff_only(client: Client, uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    campaign = launch(sender, [str(fan)])
    url = f"{CAMPAIGNS}progress.json?ids={campaign.pk}"
    User.objects.create_user("visitor", password="pw")
    staff = User.objects.create_user("intern", password="pw", is_staff=True)

    anonymous = client.get(url)
    client.login(username="visitor", password="pw")
    not_staff = client.get(url)
    client.login(username=staff.username, password="pw")
    no_permission = client.get(url)
    no_action = client.post(f"{CAMPAIGNS}{campaign.pk}/act/pause/")

    assert anonymous.status_code == 302
    assert "/admin/login/" in anonymous["Location"]
    assert not_staff.status_code == 302
    assert "/admin/login/" in not_staff["Location"]
    assert no_permission.status_code == 403
    assert no_action.status_code == 403
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.RUNNING


def test_a_running_campaign_without_a_worker_is_flagged(admin_client: Client, uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    running = launch(sender, [str(fan)])
    paused = services.campaign_pause(campaign_id=launch(sender, [str(fan)]).pk)

    # no worker consumes this suite's broker (an earlier test's answer lasts WORKERS_CACHE_S)
    wait_for(lambda: live(admin_client, running)[0]["no_worker"] is True)
    by_id = {b["id"]: b for b in live(admin_client, running, paused)}
    page = admin_client.get(CAMPAIGNS).content.decode()
    detail = admin_client.get(f"{CAMPAIGNS}{running.pk}/change/").content.decode()

    assert by_id[str(running.pk)]["no_worker"] is True
    assert by_id[str(running.pk)]["queue"] == "bulk.daily"
    assert by_id[str(paused.pk)]["no_worker"] is False
    assert "No worker consumes bulk.daily" in page
    assert 'class="live-banner"' in detail
    assert "No worker consumes bulk.daily" in detail


# -- actions on the campaign page -------------------------------------------------------------
def press(admin_client: Client, campaign: Campaign, action: str) -> tuple[str, list[str]]:
    response = admin_client.post(f"{CAMPAIGNS}{campaign.pk}/act/{action}/", follow=True)
    (where, code), *_ = response.redirect_chain
    assert code == 302
    return where, messages_of(response)


def test_the_page_buttons_pause_resume_and_cancel(admin_client: Client, uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    campaign = launch(sender, [str(fan)])
    page = f"{CAMPAIGNS}{campaign.pk}/change/"
    buttons = admin_client.get(page).content.decode()

    assert f'action="{CAMPAIGNS}{campaign.pk}/act/pause/"' in buttons
    assert f'action="{CAMPAIGNS}{campaign.pk}/act/resume/"' not in buttons  # not paused
    assert 'name="csrfmiddlewaretoken"' in buttons
    assert f'data-confirm="Cancel campaign {campaign.pk}? A cancelled campaign cannot' in buttons
    assert press(admin_client, campaign, "pause") == (page, [f"Paused campaign {campaign.pk}."])
    assert (
        Campaign.objects.get(pk=campaign.pk).status,
        live(admin_client, campaign)[0]["pause_reason"],
    ) == (
        "paused",
        "operator",
    )
    assert (
        f'action="{CAMPAIGNS}{campaign.pk}/act/resume/"' in admin_client.get(page).content.decode()
    )
    assert press(admin_client, campaign, "pause")[1] == [
        f"Campaign {campaign.pk} was already paused: nothing changed."
    ]
    assert press(admin_client, campaign, "resume")[1] == [f"Resumed campaign {campaign.pk}."]
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.RUNNING
    assert press(admin_client, campaign, "cancel")[1] == [f"Cancelled campaign {campaign.pk}."]
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.CANCELLED
    assert press(admin_client, campaign, "resume")[1] == [
        f"Could not resume campaign {campaign.pk}: A cancelled campaign cannot be resumed."
    ]
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.CANCELLED


def test_the_page_buttons_need_a_post_with_csrf(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    campaign = launch(sender, [str(fan)])
    User.objects.create_superuser("boss", password="pw")
    strict = Client(enforce_csrf_checks=True)
    strict.login(username="boss", password="pw")
    url = f"{CAMPAIGNS}{campaign.pk}/act/pause/"

    assert strict.get(url).status_code == 405
    assert strict.post(url).status_code == 403
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.RUNNING


def test_recall_from_the_page_takes_the_message_back_and_shows_its_progress(
    admin_client: Client, uids: Uids
) -> None:
    sender, *fans = uids(6)
    shop(sender)
    ChannelSetting.objects.create(channel="daily", rate_per_s=3500, batch_size=2)
    campaign = drive(launch(sender, [str(u) for u in fans]).pk)
    assert received(fans[0], sender) == [campaign.msgkey]

    where, notes = press(admin_client, campaign, "recall")
    message = message_of(campaign)
    half = live(admin_client, campaign)[0]
    for batch_id in campaign.batches.values_list("pk", flat=True):  # the recall tasks' work
        recall.batch_recall(batch_id)
    done = live(admin_client, campaign)[0]
    page = admin_client.get(CAMPAIGNS).content.decode()

    assert where == f"{CAMPAIGNS}{campaign.pk}/change/"
    assert notes == [
        f"Recalling campaign {campaign.pk}'s message from every recipient (3 batches)."
    ]
    assert message.status == MessageStatus.RECALLED
    assert half["recall"] == {"batches_done": 0, "batches": 3, "percent": 0}
    assert done["recall"] == {"batches_done": 3, "batches": 3, "percent": 100}
    assert "Recalled · 100% (3 / 3 batches)" in page
    assert (
        f'data-live="status" data-live-id="{campaign.pk}" class="">finished · message recalled<'
        in page
    )
    assert press(admin_client, campaign, "recall")[1] == [
        f"Campaign {campaign.pk}'s message was already recalled; any batch not yet recalled "
        "was enqueued again."
    ]


def test_recall_stops_a_running_campaign(admin_client: Client, uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    campaign = launch(sender, [str(fan)])

    notes = press(admin_client, campaign, "recall")[1]

    assert notes[0].endswith("The campaign was cancelled.")
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.CANCELLED


def test_duplicate_starts_the_same_campaign_again(admin_client: Client, uids: Uids) -> None:
    sender, *fans = uids(3)
    shop(sender)
    campaign = drive(launch(sender, [str(u) for u in fans]).pk)

    where, notes = press(admin_client, campaign, "duplicate")
    copy = Campaign.objects.exclude(pk=campaign.pk).get(sender_uid=sender)

    assert where == f"{CAMPAIGNS}{copy.pk}/change/"
    assert notes == [f"Campaign {campaign.pk} duplicated as campaign {copy.pk} (running)."]
    assert copy.msgkey != campaign.msgkey
    assert message_of(copy).body == {"type": "text", "text": "Spring sale"}
    assert drive(copy.pk).total == 2


def test_the_list_recalls_a_campaigns_message(admin_client: Client, uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    campaign = drive(launch(sender, [str(fan)]).pk)

    response = admin_client.post(
        CAMPAIGNS, {"action": "recall_selected", "_selected_action": [campaign.pk]}, follow=True
    )

    assert messages_of(response) == [
        f"Recalling campaign {campaign.pk}'s message from every recipient (1 batches)."
    ]
    assert message_of(campaign).status == MessageStatus.RECALLED


def test_the_message_page_is_read_only(admin_client: Client, uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    campaign = launch(sender, [str(fan)])

    page = admin_client.get(f"/admin/messaging/message/{campaign.msgkey}/change/").content.decode()

    assert "View message" in page
    assert "Change message" not in page
    assert 'name="_save"' not in page
    assert 'name="_continue"' not in page


# -- with real workers ------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_no_worker_clears_once_a_worker_consumes_the_queue(
    admin_client: Client, uids: Uids, workers: Workers
) -> None:
    sender, *fans = uids(41)
    shop(sender)
    ChannelSetting.objects.create(channel="daily", rate_per_s=1, batch_size=1)  # ~40 s of work
    campaign = launch(sender, [str(u) for u in fans])

    def flag() -> bool | None:
        body = live(admin_client, campaign)[0]
        assert body["status"] == CampaignStatus.RUNNING
        return body["no_worker"]

    assert wait_for(lambda: flag() is True)
    workers.start(queues="messaging")  # another queue's worker changes nothing
    time.sleep(metrics.WORKERS_CACHE_S + 0.5)  # past the reuse of the last answer
    assert flag() is True
    workers.start(queues="bulk.daily")
    assert wait_for(lambda: flag() is False)
    scraped = admin_client.get("/metrics").content.decode()
    assert 'missive_celery_queue_workers{queue="bulk.daily"} 1.0' in scraped
    assert 'missive_celery_queue_workers{queue="messaging"} 1.0' in scraped
    services.campaign_cancel(campaign_id=campaign.pk)
