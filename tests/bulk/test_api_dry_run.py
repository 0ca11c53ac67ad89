"""``POST /campaigns`` with ``dry_run: true``: who a campaign would reach and skip, the budget
left; nothing is stored."""

from __future__ import annotations

import pytest

from bulk.models import Audience, AudienceMember, Campaign, SenderPolicy
from messaging.models import Message
from tests.bulk.helpers import (
    Uids,
    block,
    body,
    campaigns_api,
    create,
    drive,
    follow,
    received,
    shop,
)

pytestmark = pytest.mark.django_db


# -- dry run --------------------------------------------------------------------------------------
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


@pytest.mark.parametrize("typo", [0, 1, "yes", "no", "true", None])
def test_dry_run_takes_json_booleans_only_so_a_typo_launches_nothing(
    typo: object, uids: Uids
) -> None:
    sender, fan = uids(2)
    shop(sender)
    follow(sender, [fan])
    api = campaigns_api(sender)
    before = (Campaign.objects.count(), Message.objects.count())

    status, answer = api.call(
        "POST", "/campaigns", body(sender, {"type": "followers"}, dry_run=typo)
    )

    assert status == 400, answer
    assert answer["error"] == "invalid"
    assert "dry_run" in answer["fields"]
    assert (Campaign.objects.count(), Message.objects.count()) == before


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
