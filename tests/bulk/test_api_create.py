"""``POST /campaigns``: Idempotency-Key replays, and the bad input it refuses (400, 413) before
anything is stored."""

from __future__ import annotations

from typing import Any

import pytest

from bulk.models import Audience, Campaign
from tests.api.factories import API, ClientApi
from tests.bulk.helpers import Uids, body, campaigns_api, create, drive, received, shop

pytestmark = pytest.mark.django_db


# -- idempotency ----------------------------------------------------------------------------------
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


def test_a_bad_idempotency_key_answers_400(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    api = campaigns_api(sender)

    status, answer = create_with_key(api, body(sender, {"type": "uids", "uids": [fan]}), "k" * 129)

    assert status == 400, answer
    assert "Idempotency-Key" in answer["fields"]
    assert not Campaign.objects.filter(sender_uid=sender).exists()


# -- bad input ------------------------------------------------------------------------------------
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


def test_malformed_json_answers_400(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])

    status, answer = api.raw("POST", "/campaigns", b'{"sender_uid": ')

    assert status == 400
    assert answer["error"] == "malformed_json"


def test_the_api_takes_and_returns_a_name(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    api = campaigns_api(sender)

    named = create(api, sender, {"type": "uids", "uids": [fan]}, name="Spring sale")
    unnamed = create(api, sender, {"type": "uids", "uids": [fan]})
    status, too_long = api.call(
        "POST", "/campaigns", body(sender, {"type": "uids", "uids": [fan]}, name="n" * 201)
    )
    _, listed = api.call("GET", "/campaigns")

    assert (named["name"], unnamed["name"]) == ("Spring sale", "")
    assert status == 400
    assert (too_long["error"], list(too_long["fields"])) == ("invalid", ["name"])
    assert [c["name"] for c in listed["results"]] == ["", "Spring sale"]
    assert Campaign.objects.filter(sender_uid=sender).count() == 2
