"""The campaign API, who a campaign reaches: each audience type reaches exactly its recipients
(followers, a follow window, an uploaded list, explicit uids), bad entries are counted as skipped,
the receiver cap skips a second campaign, and an audience is only another client's to use."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from bulk.models import Audience
from tests.bulk.helpers import (
    Uids,
    assert_delivered,
    block,
    body,
    campaigns_api,
    create,
    drive,
    follow,
    progress,
    received,
    shop,
    upload,
)
from unread.selectors import unread_summary

pytestmark = pytest.mark.django_db


# -- each audience type reaches exactly its recipients --------------------------------------------
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


# -- quotas ---------------------------------------------------------------------------------------
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


# -- whose audience -------------------------------------------------------------------------------
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
