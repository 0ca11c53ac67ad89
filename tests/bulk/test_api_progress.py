"""Reading campaigns: ``GET /campaigns`` (the client's, newest first, filtered, keyset-paged),
``GET /campaigns/{id}``, and the OpenAPI schema that documents them."""

from __future__ import annotations

import pytest

from tests.bulk.helpers import Uids, campaigns_api, create, shop

pytestmark = pytest.mark.django_db


# -- listing --------------------------------------------------------------------------------------
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


def test_unknown_campaign_and_malformed_id(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])

    assert api.call("GET", "/campaigns/999999999999")[0] == 404
    status, answer = api.call("GET", "/campaigns/abc")
    assert status == 400
    assert "campaign_id" in answer["fields"]


# -- schema ---------------------------------------------------------------------------------------
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
