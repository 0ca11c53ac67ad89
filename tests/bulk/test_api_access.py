"""Who may see and do what: a client acts as its own senders only and sees only their campaigns
(anything else is 404), needs the ``campaigns`` scope (403) and a token (401), and the priority
channel needs the sender's permission."""

from __future__ import annotations

import pytest

from api.models import Scope
from bulk.models import Audience, Campaign, CampaignStatus
from tests.api.factories import Api
from tests.bulk.helpers import Uids, body, campaigns_api, create, drive, shop, upload

pytestmark = pytest.mark.django_db


# -- who may see and do what ----------------------------------------------------------------------
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
