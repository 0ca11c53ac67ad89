"""The campaign API end to end: HTTP in, campaigns run, and what recipients then see.

Campaigns are driven synchronously in the test process (plan, then every pending batch: the same
service calls the Celery tasks make), except ``test_a_campaign_runs_on_real_workers``, which posts
over HTTP and waits for real Celery workers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.utils import timezone

from api.models import Scope
from bulk import services
from bulk.models import (
    Audience,
    AudienceMember,
    BatchState,
    Campaign,
    CampaignBatch,
    CampaignStatus,
    SenderPolicy,
)
from messaging.inbox import get_inbox
from messaging.models import Account, Block, Conversation, Follow, Message
from tests.api.factories import API, Api, ClientApi, inbox_api, make_api
from tests.conftest import wait_for
from unread.selectors import unread_summary

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]


# -- builders ----------------------------------------------------------------------------------
def shop(uid: int, *, priority: bool = False, limit: int = 1) -> int:
    """A business account with its sending policy."""
    Account.objects.create(uid=uid, kind="business", name=f"shop {uid}")
    SenderPolicy.objects.create(sender_uid=uid, per_receiver_limit=limit, priority_allowed=priority)
    return uid


def follow(sender: int, followers: list[int], at: Any = None) -> None:
    when = at or timezone.now()
    Follow.objects.bulk_create(
        [Follow(follower_uid=u, followee_uid=sender, followed_at=when) for u in followers]
    )


def block(sender: int, owners: list[int]) -> None:
    Block.objects.bulk_create([Block(owner_uid=u, blocked_uid=sender) for u in owners])


def campaigns_api(*senders: int, scopes: tuple[str, ...] = (Scope.CAMPAIGNS,)) -> ClientApi:
    return make_api(f"client-{senders[0]}-{len(scopes)}-{time.monotonic_ns()}", scopes, senders)


def body(sender: int, audience: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "sender_uid": str(sender),
        "content": {"type": "text", "text": "Spring sale 🌸"},
        "audience": audience,
        **extra,
    }


def create(api: ClientApi, sender: int, audience: dict[str, Any], **extra: Any) -> dict[str, Any]:
    status, answer = api.call("POST", "/campaigns", body(sender, audience, **extra))
    assert status == 201, answer
    return answer


def upload(api: ClientApi, content: bytes, name: str = "uids.txt") -> tuple[int, Any]:
    response = api.http.post(
        f"{API}/audiences", {"file": SimpleUploadedFile(name, content)}, format="multipart"
    )
    return response.status_code, response.json()


def drive(campaign_id: int | str) -> Campaign:
    """Run a campaign to its end in this process, as the workers would: plan, then each batch."""
    pk = int(campaign_id)
    while services.campaign_plan_step(pk):
        pass
    for _ in range(10_000):
        campaign = Campaign.objects.get(pk=pk)
        pending = CampaignBatch.objects.filter(campaign_id=pk, state=BatchState.PENDING)
        if campaign.status != CampaignStatus.RUNNING or not pending.exists():
            return campaign
        for batch_id in pending.values_list("pk", flat=True):
            outcome = services.batch_run(batch_id)
            time.sleep(outcome.retry_in_ms / 1000)
    raise AssertionError("the campaign never settled")


def progress(api: ClientApi, campaign_id: str) -> dict[str, Any]:
    status, answer = api.call("GET", f"/campaigns/{campaign_id}")
    assert status == 200, answer
    return answer


def received(uid: int, sender: int) -> list[int]:
    """The msgkeys ``uid`` holds from ``sender``, newest first."""
    return [e.msgkey for e in get_inbox().page(uid, sender).entries]


def assert_delivered(sender: int, campaign: Campaign, expected: set[int], others: set[int]) -> None:
    """What the recipients see: one business conversation with one unread message; others none."""
    for uid in expected:
        assert received(uid, sender) == [campaign.msgkey]
        conversation = Conversation.objects.get(owner_uid=uid, peer_uid=sender)
        assert conversation.category == "business"
        summary = unread_summary(uid)
        assert (summary.total, summary.by_category["business"]) == (1, 1)
    for uid in others:
        assert received(uid, sender) == []
        assert not Conversation.objects.filter(owner_uid=uid, peer_uid=sender).exists()
        assert unread_summary(uid).total == 0


# -- each audience type reaches exactly its recipients ---------------------------------------
def test_followers_campaign_reaches_every_follower_but_those_who_blocked(uids: Uids) -> None:
    sender, *fans = uids(7)
    shop(sender)
    follow(sender, fans)
    block(sender, fans[:2])
    api = campaigns_api(sender)

    created = create(api, sender, {"type": "followers"})
    assert created["id"].isdigit()
    assert created["sender_uid"] == str(sender)
    assert created["status"] == "running"
    assert created["channel"] == "daily"
    campaign = drive(created["id"])

    shown = progress(api, created["id"])
    assert shown["status"] == "finished"
    assert (shown["total"], shown["delivered"], shown["failed"]) == (6, 4, 0)
    assert shown["skipped"] == {"quota": 0, "blocked": 2, "invalid": 0, "duplicate": 0}
    assert shown["eta_s"] == 0
    assert shown["finished_at"] is not None
    assert shown["pause_reason"] is None
    assert_delivered(sender, campaign, set(fans[2:]), set(fans[:2]))


def test_followers_filter_takes_the_follow_window_and_exclusions(uids: Uids) -> None:
    sender, old, mid1, mid2, excluded, recent = uids(6)
    shop(sender)
    now = timezone.now()
    follow(sender, [old], now - timedelta(days=30))
    follow(sender, [mid1, mid2, excluded], now - timedelta(days=10))
    follow(sender, [recent], now - timedelta(days=1))
    api = campaigns_api(sender)
    window = {
        "type": "followers_filter",
        "followed_after": (now - timedelta(days=20)).isoformat(),
        "followed_before": (now - timedelta(days=5)).isoformat(),
        "exclude_uids": [str(excluded)],
    }

    campaign = drive(create(api, sender, window)["id"])

    assert (campaign.total, campaign.delivered) == (2, 2)
    assert_delivered(sender, campaign, {mid1, mid2}, {old, excluded, recent})


def test_uploaded_audience_counts_bad_lines_and_reaches_the_valid_uids(uids: Uids) -> None:
    sender, a, b, c, outsider = uids(5)
    shop(sender)
    api = campaigns_api(sender)
    lines = f"{a}\r\n{b}\n\n  {c}  \n{a}\nnot-a-uid\n-5\n99999999999999999999\n{b}".encode()

    status, stored = upload(api, lines)

    assert status == 201, stored
    assert stored["id"].isdigit()
    assert (stored["count"], stored["invalid_lines"], stored["duplicate_lines"]) == (3, 3, 2)
    assert [s["text"] for s in stored["invalid_samples"]] == [
        "not-a-uid",
        "-5",
        "99999999999999999999",
    ]
    assert [s["line"] for s in stored["invalid_samples"]] == [6, 7, 8]

    created = create(api, sender, {"type": "upload", "audience_id": stored["id"]})
    campaign = drive(created["id"])
    shown = progress(api, created["id"])
    assert (shown["total"], shown["delivered"]) == (3, 3)
    assert shown["skipped"] == {"quota": 0, "blocked": 0, "invalid": 3, "duplicate": 2}
    assert_delivered(sender, campaign, {a, b, c}, {outsider})


def test_explicit_uids_skip_bad_entries_as_invalid(uids: Uids) -> None:
    sender, a, b, blocked = uids(4)
    shop(sender)
    block(sender, [blocked])
    api = campaigns_api(sender)
    entries = [a, str(b), str(blocked), "x1", -3, 1.5, True, None, a]

    created = create(api, sender, {"type": "uids", "uids": entries})
    campaign = drive(created["id"])

    shown = progress(api, created["id"])
    assert (shown["total"], shown["delivered"]) == (3, 2)
    assert shown["skipped"] == {"quota": 0, "blocked": 1, "invalid": 5, "duplicate": 1}
    assert_delivered(sender, campaign, {a, b}, {blocked})


def test_entries_that_no_uid_could_be_are_invalid_lines_too(uids: Uids) -> None:
    sender, a = uids(2)
    shop(sender)
    api = campaigns_api(sender)
    entries = ["1" * 5000, {"uid": a}, [a], "\ud800", a]

    created = create(api, sender, {"type": "uids", "uids": entries})

    assert created["skipped"]["invalid"] == 4
    assert drive(created["id"]).delivered == 1


SUPERSCRIPT_TWO, ARABIC_123, FULLWIDTH_123 = "\u00b2", "\u0661\u0662\u0663", "\uff11\uff12\uff13"


def test_digits_of_other_scripts_are_invalid_lines_not_uids(uids: Uids) -> None:
    """str.isdigit() alone would take a superscript two (which int() then refuses: a 500) and
    read Arabic-Indic or fullwidth digits as uid 123."""
    sender, a = uids(2)
    shop(sender)
    api = campaigns_api(sender)
    lines = [str(a), SUPERSCRIPT_TWO, ARABIC_123, FULLWIDTH_123]

    status, stored = upload(api, "\n".join(lines).encode())
    listed = api.call("POST", "/campaigns", body(sender, {"type": "uids", "uids": lines}))

    assert status == 201, stored
    assert (stored["count"], stored["invalid_lines"]) == (1, 3)
    assert listed[0] == 201, listed
    assert listed[1]["skipped"]["invalid"] == 3


def test_the_sender_never_messages_itself(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    api = campaigns_api(sender)

    campaign = drive(create(api, sender, {"type": "uids", "uids": [sender, fan]})["id"])

    assert (campaign.total, campaign.delivered) == (1, 1)
    assert received(sender, sender) == []


# -- quotas ------------------------------------------------------------------------------------
def test_a_second_campaign_to_the_same_users_is_skipped_by_the_receiver_cap(uids: Uids) -> None:
    sender, *fans = uids(4)
    shop(sender, limit=1)
    follow(sender, fans)
    api = campaigns_api(sender)
    first = drive(create(api, sender, {"type": "followers"})["id"])

    second_id = create(api, sender, {"type": "uids", "uids": fans})["id"]
    drive(second_id)

    shown = progress(api, second_id)
    assert shown["status"] == "finished"
    assert (shown["delivered"], shown["skipped"]["quota"]) == (0, 3)
    for fan in fans:  # still just the first message, counted once
        assert received(fan, sender) == [first.msgkey]
        assert unread_summary(fan).by_category["business"] == 1


# -- dry run -----------------------------------------------------------------------------------
def test_dry_run_counts_blocks_and_quota_and_stores_nothing(uids: Uids) -> None:
    sender, *fans = uids(7)
    shop(sender, limit=1)
    follow(sender, fans)
    block(sender, fans[:1])
    api = campaigns_api(sender)
    drive(create(api, sender, {"type": "uids", "uids": fans[1:3]})["id"])  # caps two of them
    before = (Campaign.objects.count(), Audience.objects.count(), Message.objects.count())

    status, preview = api.call(
        "POST", "/campaigns", body(sender, {"type": "followers"}, dry_run=True)
    )
    status2, listed = api.call(
        "POST",
        "/campaigns",
        body(sender, {"type": "uids", "uids": [*fans, "oops", fans[3]]}, dry_run=True),
    )

    assert status == 200, preview
    assert preview == {
        "dry_run": True,
        "audience": 6,
        "would_skip": {"blocked": 1, "quota": 2, "invalid": 0, "duplicate": 0},
        "would_deliver": 3,
        "budget_remaining": None,
    }
    assert status2 == 200, listed
    assert listed["would_skip"] == {"blocked": 1, "quota": 2, "invalid": 1, "duplicate": 1}
    assert listed["would_deliver"] == 3
    assert (Campaign.objects.count(), Audience.objects.count(), Message.objects.count()) == before
    assert not AudienceMember.objects.filter(uid=fans[3]).exists()
    assert received(fans[3], sender) == []


def test_dry_run_reports_the_daily_budget_left(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    SenderPolicy.objects.filter(sender_uid=sender).update(daily_budget=500)
    api = campaigns_api(sender)

    status, preview = api.call(
        "POST", "/campaigns", body(sender, {"type": "uids", "uids": [fan]}, dry_run=True)
    )

    assert status == 200, preview
    assert (preview["budget_remaining"], preview["would_deliver"]) == (500, 1)


# -- idempotency -------------------------------------------------------------------------------
def create_with_key(api: ClientApi, request: dict[str, Any], key: str) -> tuple[int, Any]:
    response = api.http.post(f"{API}/campaigns", request, format="json", HTTP_IDEMPOTENCY_KEY=key)
    return response.status_code, response.json()


def test_idempotency_key_replays_the_same_campaign_and_refuses_another_body(uids: Uids) -> None:
    sender, a, b = uids(3)
    shop(sender)
    api = campaigns_api(sender)
    request = body(sender, {"type": "uids", "uids": [a, b]})
    changed = {**request, "content": {"type": "text", "text": "another"}}

    first = create_with_key(api, request, "order-42")
    again = create_with_key(api, request, "order-42")
    other = create_with_key(api, changed, "order-42")

    assert first[0] == 201, first
    assert again == (200, first[1] | {"rate_per_s": again[1]["rate_per_s"]})
    assert other[0] == 409
    assert other[1]["error"] == "conflict"
    assert Campaign.objects.filter(sender_uid=sender).count() == 1
    assert Audience.objects.filter(sender_uid=sender).count() == 1  # the replay stored no list
    drive(first[1]["id"])
    assert received(a, sender) == received(b, sender) != []


def test_the_same_idempotency_key_of_two_clients_makes_two_campaigns(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    one, two = campaigns_api(sender), campaigns_api(sender)
    request = body(sender, {"type": "uids", "uids": [fan]})

    answers = [create_with_key(api, request, "k") for api in (one, two)]

    assert [status for status, _ in answers] == [201, 201]
    assert answers[0][1]["id"] != answers[1][1]["id"]


# -- control -----------------------------------------------------------------------------------
def planned(fans: int, uids: Uids) -> tuple[ClientApi, int, list[int], str]:
    """A shop's campaign to ``fans`` listed uids, planned but not run: (api, sender, fans, id)."""
    sender, *listed = uids(fans + 1)
    shop(sender)
    api = campaigns_api(sender)
    campaign_id = create(api, sender, {"type": "uids", "uids": listed})["id"]
    while services.campaign_plan_step(int(campaign_id)):
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
        services.batch_run(batch_id)  # a queued batch meets a paused campaign: nothing sent
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


# -- listing -----------------------------------------------------------------------------------
def test_list_shows_the_clients_campaigns_newest_first_filtered_and_paged(uids: Uids) -> None:
    sender, other_sender, fan = uids(3)
    shop(sender)
    shop(other_sender)
    api, other = campaigns_api(sender), campaigns_api(other_sender)
    ids = [create(api, sender, {"type": "uids", "uids": [fan]})["id"] for _ in range(3)]
    create(other, other_sender, {"type": "uids", "uids": [fan]})
    api.call("POST", f"/campaigns/{ids[0]}/cancel")

    status, everything = api.call("GET", "/campaigns")
    _, cancelled = api.call("GET", "/campaigns", status="cancelled")
    _, first_page = api.call("GET", "/campaigns", limit=2)
    _, second_page = api.call("GET", "/campaigns", limit=2, cursor=first_page["next_cursor"])

    assert status == 200, everything
    assert [c["id"] for c in everything["results"]] == ids[::-1]
    assert everything["next_cursor"] is None
    assert [c["id"] for c in cancelled["results"]] == [ids[0]]
    assert [c["id"] for c in first_page["results"] + second_page["results"]] == ids[::-1]
    assert second_page["next_cursor"] is None


def test_list_refuses_an_unknown_status(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])

    status, answer = api.call("GET", "/campaigns", status="sleeping")

    assert status == 400
    assert "status" in answer["fields"]


# -- who may see and do what -------------------------------------------------------------------
def test_another_clients_campaign_answers_404_everywhere(uids: Uids) -> None:
    sender, other_sender, fan = uids(3)
    shop(sender)
    shop(other_sender)
    mine, theirs = campaigns_api(sender), campaigns_api(other_sender)
    campaign_id = create(theirs, other_sender, {"type": "uids", "uids": [fan]})["id"]

    answers = [
        mine.call("GET", f"/campaigns/{campaign_id}"),
        *(mine.call("POST", f"/campaigns/{campaign_id}/{verb}") for verb in ("pause", "cancel")),
    ]

    assert [status for status, _ in answers] == [404, 404, 404]
    assert {a["error"] for _, a in answers} == {"not_found"}
    assert mine.call("GET", "/campaigns")[1]["results"] == []
    assert Campaign.objects.get(pk=campaign_id).status == CampaignStatus.RUNNING


def test_unknown_campaign_and_malformed_id(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])

    assert api.call("GET", "/campaigns/999999999999")[0] == 404
    status, answer = api.call("GET", "/campaigns/abc")
    assert status == 400
    assert "campaign_id" in answer["fields"]


def test_a_sender_of_another_client_answers_404(uids: Uids) -> None:
    sender, stranger_sender, fan = uids(3)
    shop(sender)
    shop(stranger_sender)
    api = campaigns_api(sender)

    status, answer = api.call(
        "POST", "/campaigns", body(stranger_sender, {"type": "uids", "uids": [fan]})
    )

    assert status == 404, answer
    assert not Campaign.objects.filter(sender_uid=stranger_sender).exists()


def test_a_sender_that_is_no_business_account_answers_404(uids: Uids) -> None:
    sender, fan = uids(2)
    api = campaigns_api(sender)  # one of its senders, but not an Account

    status, answer = api.call("POST", "/campaigns", body(sender, {"type": "uids", "uids": [fan]}))

    assert status == 404, answer
    assert not Audience.objects.filter(sender_uid=sender).exists()  # rolled back with it


def test_without_the_campaigns_scope_every_endpoint_answers_403(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    api = campaigns_api(sender, scopes=(Scope.SEND,))

    answers = [
        api.call("POST", "/campaigns", body(sender, {"type": "uids", "uids": [fan]})),
        api.call("GET", "/campaigns"),
        api.call("GET", "/campaigns/1"),
        api.call("POST", "/campaigns/1/pause"),
        upload(api, f"{fan}\n".encode()),
    ]

    assert [status for status, _ in answers] == [403] * 5
    assert {a["error"] for _, a in answers} == {"forbidden"}


def test_no_token_answers_401() -> None:
    status, answer = Api("msv_not-a-token").call("GET", "/campaigns")

    assert status == 401
    assert answer["error"] == "unauthorized"


def test_priority_channel_needs_the_senders_permission(uids: Uids) -> None:
    plain, vip, fan = uids(3)
    shop(plain)
    shop(vip, priority=True)
    api = campaigns_api(plain, vip)

    refused = api.call(
        "POST", "/campaigns", body(plain, {"type": "uids", "uids": [fan]}, channel="priority")
    )
    allowed = api.call(
        "POST", "/campaigns", body(vip, {"type": "uids", "uids": [fan]}, channel="priority")
    )

    assert refused[0] == 403
    assert refused[1]["error"] == "forbidden"
    assert allowed[0] == 201
    assert allowed[1]["channel"] == "priority"
    assert drive(allowed[1]["id"]).delivered == 1


# -- bad input ---------------------------------------------------------------------------------
BAD_SPECS = [
    ("audience", "followers"),
    ("audience.type", {"type": "everyone"}),
    ("audience.type", {}),
    ("audience.exclude_uids", {"type": "followers_filter", "exclude_uids": "1,2"}),
    ("audience.exclude_uids.0", {"type": "followers_filter", "exclude_uids": ["x"]}),
    ("audience.followed_after", {"type": "followers_filter", "followed_after": "yesterday"}),
    ("audience.followed_after", {"type": "followers_filter", "followed_after": 20240101}),
    (
        "audience.followed_before",
        {
            "type": "followers_filter",
            "followed_after": "2024-02-01T00:00:00Z",
            "followed_before": "2024-01-01T00:00:00Z",
        },
    ),
    ("audience.uids", {"type": "uids", "uids": []}),
    ("audience.uids", {"type": "uids", "uids": "1,2"}),
    ("audience.uids", {"type": "uids", "uids": ["x", -1]}),
    ("audience.audience_id", {"type": "upload"}),
    ("audience.audience_id", {"type": "upload", "audience_id": "abc"}),
    ("audience.uids", {"type": "followers", "uids": [1]}),
]


@pytest.mark.parametrize(("field", "spec"), BAD_SPECS)
def test_bad_audience_specs_answer_400_naming_the_field(uids: Uids, field: str, spec: Any) -> None:
    sender = shop(uids(1)[0])
    api = campaigns_api(sender)

    status, answer = api.call("POST", "/campaigns", body(sender, spec))

    assert status == 400, answer
    assert answer["error"] == "invalid"
    assert field in answer["fields"], answer
    assert not Campaign.objects.filter(sender_uid=sender).exists()


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("sender_uid", {"sender_uid": "-1"}),
        ("sender_uid", {"sender_uid": True}),
        ("content", {"content": "hello"}),
        ("content.text", {"content": {"type": "text", "text": ""}}),
        ("channel", {"channel": "express"}),
        ("scheduled_at", {"scheduled_at": "next week"}),
    ],
)
def test_bad_campaign_fields_answer_400(uids: Uids, field: str, change: dict[str, Any]) -> None:
    sender = shop(uids(1)[0])
    api = campaigns_api(sender)

    status, answer = api.call(
        "POST", "/campaigns", {**body(sender, {"type": "followers"}), **change}
    )

    assert status == 400, answer
    assert field in answer["fields"], answer


@pytest.mark.parametrize("field", ["uids", "exclude_uids"])
def test_lists_over_ten_thousand_uids_answer_413(uids: Uids, field: str) -> None:
    sender = shop(uids(1)[0])
    api = campaigns_api(sender)
    kind = "uids" if field == "uids" else "followers_filter"
    many = [str(10**12 + i) for i in range(10_001)]

    status, answer = api.call("POST", "/campaigns", body(sender, {"type": kind, field: many}))

    assert status == 413, answer
    assert answer["error"] == "too_large"
    assert f"audience.{field}" in answer["fields"]


def test_ten_thousand_uids_are_accepted(uids: Uids) -> None:
    sender = shop(uids(1)[0])
    api = campaigns_api(sender)
    many = [str(10**12 + i) for i in range(10_000)]

    status, preview = api.call(
        "POST", "/campaigns", body(sender, {"type": "uids", "uids": many}, dry_run=True)
    )

    assert status == 200, preview
    assert preview["audience"] == 10_000


def test_an_audience_of_another_client_answers_404(uids: Uids) -> None:
    sender, other_sender, fan = uids(3)
    shop(sender)
    mine, theirs = campaigns_api(sender), campaigns_api(other_sender)
    _, stored = upload(theirs, f"{fan}\n".encode())

    status, answer = mine.call(
        "POST", "/campaigns", body(sender, {"type": "upload", "audience_id": stored["id"]})
    )

    assert status == 404, answer
    assert "audience.audience_id" in answer["fields"]


def test_an_audience_still_being_stored_cannot_be_used(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    api = campaigns_api(sender)
    _, stored = upload(api, f"{fan}\n".encode())
    Audience.objects.filter(pk=stored["id"]).update(count=0)  # as while its lines stream in

    status, answer = api.call(
        "POST", "/campaigns", body(sender, {"type": "upload", "audience_id": stored["id"]})
    )

    assert status == 404, answer


def test_a_bad_idempotency_key_answers_400(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    api = campaigns_api(sender)

    status, answer = create_with_key(api, body(sender, {"type": "uids", "uids": [fan]}), "k" * 129)

    assert status == 400, answer
    assert "Idempotency-Key" in answer["fields"]
    assert not Campaign.objects.filter(sender_uid=sender).exists()


def test_malformed_json_answers_400(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])

    status, answer = api.raw("POST", "/campaigns", b'{"sender_uid": ')

    assert status == 400
    assert answer["error"] == "malformed_json"


# -- uploads -----------------------------------------------------------------------------------
def test_binary_garbage_lines_are_counted_invalid_with_samples(uids: Uids) -> None:
    sender, a, b = uids(3)
    api = campaigns_api(sender)
    garbage = b"\x00\xff\xfe\x89PNG\x1a"
    content = b"\n".join([str(a).encode(), garbage, b"\xc3\x28\x00", str(b).encode(), b"12 34"])

    status, stored = upload(api, content)

    assert status == 201, stored
    assert (stored["count"], stored["invalid_lines"]) == (2, 3)
    assert [s["line"] for s in stored["invalid_samples"]] == [2, 3, 5]
    assert {s["reason"] for s in stored["invalid_samples"]} == {"not a positive integer"}
    assert stored["invalid_samples"][2]["text"] == "12 34"


def test_an_upload_without_any_valid_uid_answers_400_and_stores_nothing(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])
    before = Audience.objects.count()

    status, answer = upload(api, b"\x00\x01\x02\nabc\n-7\n")
    empty_status, empty = upload(api, b"")
    blank_status, blank = upload(api, b"\n \n\r\n")

    assert status == 400, answer
    assert answer["error"] == "invalid"
    assert answer["fields"] == {"file": "line 1: not a positive integer"}
    assert (empty_status, empty["error"]) == (400, "invalid")
    assert (blank_status, blank["error"]) == (400, "invalid")
    assert Audience.objects.count() == before


def test_a_raw_text_plain_body_is_an_upload_too(uids: Uids) -> None:
    sender, a, b = uids(3)
    api = campaigns_api(sender)

    status, stored = api.raw(
        "POST",
        "/audiences",
        f"{a}\n{b}\n".encode(),
        content_type="text/plain",
        query={"name": "vip"},
    )
    empty_status, empty = api.raw("POST", "/audiences", b"", content_type="text/plain")

    assert status == 201, stored
    assert stored["count"] == 2
    assert Audience.objects.get(pk=stored["id"]).name == "vip"
    assert set(
        AudienceMember.objects.filter(audience_id=stored["id"]).values_list("uid", flat=True)
    ) == {a, b}
    assert (empty_status, empty["fields"]) == (400, {"file": "empty"})


@pytest.mark.parametrize("content_type", ["text/csv", "application/octet-stream"])
def test_a_raw_csv_or_binary_body_is_an_upload_too(uids: Uids, content_type: str) -> None:
    """What ``curl --data-binary @uids.csv -H 'Content-Type: text/csv'`` sends."""
    sender, a, b = uids(3)
    api = campaigns_api(sender)

    lines = f"{a}\r\n{b}\r\n{a}\r\n".encode()
    status, stored = api.raw("POST", "/audiences", lines, content_type=content_type)

    assert status == 201, stored
    assert (stored["count"], stored["duplicate_lines"]) == (2, 1)


def test_a_malformed_multipart_body_answers_400_malformed(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])

    status, answer = api.raw("POST", "/audiences", b"123\n", content_type="multipart/form-data")

    assert status == 400, answer
    assert answer["error"] == "malformed"
    assert "file" in answer["fields"]
    assert not Audience.objects.exists()


def test_an_upload_without_a_file_field_or_of_another_type_is_refused(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])

    missing = api.http.post(f"{API}/audiences", {"name": "x"}, format="multipart")
    as_json = api.call("POST", "/audiences", {"uids": [1, 2]})

    assert missing.status_code == 400
    assert "file" in missing.json()["fields"]
    assert as_json[0] == 415
    assert as_json[1]["error"] == "unsupported_media_type"


@override_settings(BULK_UPLOAD_MAX_BYTES=1000)
def test_an_upload_over_the_limit_answers_413(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])
    content = b"".join(f"{10**12 + i}\n".encode() for i in range(100))  # 1,400 bytes

    status, answer = upload(api, content)
    raw_status, raw = api.raw("POST", "/audiences", content, content_type="text/plain")

    assert (status, answer["error"]) == (413, "too_large")
    assert (raw_status, raw["error"]) == (413, "too_large")
    assert not Audience.objects.exists()


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1024, FILE_UPLOAD_MAX_MEMORY_SIZE=1024)
def test_uploads_far_over_djangos_memory_limits_stream_through(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])
    content = b"".join(f"{10**12 + i}\n".encode() for i in range(20_000))  # 280 kB

    status, stored = upload(api, content)
    raw_status, raw = api.raw("POST", "/audiences", content, content_type="text/plain")

    assert status == 201, stored
    assert raw_status == 201, raw
    assert stored["count"] == raw["count"] == 20_000


def test_a_huge_line_without_newline_is_one_invalid_line(uids: Uids) -> None:
    sender, a = uids(2)
    api = campaigns_api(sender)
    content = f"{a}\n".encode() + b"7" * 300_000 + b"\n" + b" " * 5000 + b"\n"

    status, stored = upload(api, content)

    assert status == 201, stored
    assert (stored["count"], stored["invalid_lines"]) == (1, 2)
    assert [s["line"] for s in stored["invalid_samples"]] == [2, 3]


# -- schema --------------------------------------------------------------------------------------
def test_the_openapi_schema_documents_the_campaign_api() -> None:
    from rest_framework.test import APIClient

    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json")

    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in (
        "/api/v1/audiences",
        "/api/v1/campaigns",
        "/api/v1/campaigns/{campaign_id}",
        "/api/v1/campaigns/{campaign_id}/pause",
    ):
        assert path in paths


# -- with real workers -----------------------------------------------------------------------------
@pytest.mark.worker
def test_a_campaign_runs_on_real_workers(workers: Any, uids: Uids) -> None:
    sender, *fans = uids(31)
    shop(sender)
    follow(sender, fans)
    block(sender, fans[:5])
    api = campaigns_api(sender)
    workers.start()

    created = create(api, sender, {"type": "followers"})
    wait_for(lambda: progress(api, created["id"])["status"] == "finished")

    shown = progress(api, created["id"])
    assert (shown["total"], shown["delivered"], shown["skipped"]["blocked"]) == (30, 25, 5)
    assert shown["rate_per_s"] > 0
    assert_delivered(sender, Campaign.objects.get(pk=created["id"]), set(fans[5:]), set(fans[:5]))


def test_recalling_a_campaign_takes_it_back_from_every_recipient_on_real_workers(
    workers: Any, uids: Uids
) -> None:
    sender, *fans = uids(31)
    shop(sender)
    follow(sender, fans)
    api = campaigns_api(sender)
    workers.start()
    created = create(api, sender, {"type": "followers"})
    wait_for(lambda: progress(api, created["id"])["status"] == "finished")
    msgkey = progress(api, created["id"])["msgkey"]
    assert received(fans[0], sender) == [int(msgkey)]

    assert api.recall(msgkey) == (200, {"msgkey": msgkey, "status": "recalled"})
    wait_for(lambda: all(unread_summary(uid).total == 0 for uid in fans))

    reader = inbox_api(f"bff-{sender}")
    for uid in fans:  # each still holds the message, shown as recalled, with nothing unread
        page = reader.history(uid, sender)
        assert [(m["msgkey"], m["status"], m["content"]) for m in page["results"]] == [
            (msgkey, "recalled", None)
        ]
    assert progress(api, created["id"])["status"] == "finished"
