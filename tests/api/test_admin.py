"""Operators' Django admin of API clients: the pages load, a new client's token is shown once,
scope edits take effect, revoke cuts a client off, and rotate replaces the token."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from api.models import ApiClient, ApiClientSender
from tests.api.factories import Api, inbox_api, send_api

pytestmark = pytest.mark.django_db

ADMIN = "/admin/api"


def notices(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_client_pages_load(admin_client: Client) -> None:
    client = send_api("app", [42]).client
    for path in ["apiclient", "apiclient/add", f"apiclient/{client.pk}/change"]:
        assert admin_client.get(f"{ADMIN}/{path}/").status_code == 200, path


def test_creating_a_client_shows_its_token_once(
    admin_client: Client, uids: Callable[[int], list[int]]
) -> None:
    sender_uid, receiver_uid = uids(2)
    form = {
        "name": "shop-backend",
        "scopes": ["send", "inbox"],
        "is_active": "on",
        "senders-TOTAL_FORMS": "1",
        "senders-INITIAL_FORMS": "0",
        "senders-MIN_NUM_FORMS": "0",
        "senders-MAX_NUM_FORMS": "1000",
        "senders-0-uid": str(sender_uid),
    }
    response = admin_client.post(f"{ADMIN}/apiclient/add/", form, follow=True)
    assert response.status_code == 200
    shown = [m for m in notices(response) if "Token for" in m]
    assert len(shown) == 1
    token = re.search(r"(msv_[\w-]+)", shown[0]).group(1)  # type: ignore[union-attr]

    client = ApiClient.objects.get(name="shop-backend")
    assert sorted(client.scopes) == ["inbox", "send"]
    assert list(ApiClientSender.objects.filter(client=client).values_list("uid", flat=True)) == [
        sender_uid
    ]
    assert token not in (client.token_hash, client.token_prefix)
    api = Api(token)
    assert api.send(sender_uid, receiver_uid, "via admin-made token")[0] == 201
    assert api.unread(receiver_uid)["total"] == 1

    page = admin_client.get(f"{ADMIN}/apiclient/{client.pk}/change/")
    assert token not in page.text  # never shown again
    assert client.token_prefix in admin_client.get(f"{ADMIN}/apiclient/").text


def test_editing_scopes_takes_effect(admin_client: Client, uid: int) -> None:
    api = send_api("narrow", [uid])
    assert api.call("GET", f"/users/{uid}/unread")[0] == 403
    form = {
        "name": "narrow",
        "scopes": ["send", "inbox"],
        "is_active": "on",
        "senders-TOTAL_FORMS": "1",
        "senders-INITIAL_FORMS": "1",
        "senders-MIN_NUM_FORMS": "0",
        "senders-MAX_NUM_FORMS": "1000",
        "senders-0-id": str(ApiClientSender.objects.get(uid=uid).pk),
        "senders-0-client": str(api.client.pk),
        "senders-0-uid": str(uid),
    }
    response = admin_client.post(f"{ADMIN}/apiclient/{api.client.pk}/change/", form, follow=True)
    assert response.status_code == 200
    assert not any("Token for" in m for m in notices(response))  # editing issues no token
    assert api.call("GET", f"/users/{uid}/unread")[0] == 200


def test_revoke_action_cuts_the_client_off(admin_client: Client, uid: int) -> None:
    api = inbox_api("leaky")
    assert api.call("GET", f"/users/{uid}/unread")[0] == 200
    response = admin_client.post(
        f"{ADMIN}/apiclient/",
        {"action": "revoke_selected", "_selected_action": [str(api.client.pk)]},
        follow=True,
    )
    assert "Revoked 1 client(s)." in notices(response)
    client = ApiClient.objects.get(pk=api.client.pk)
    assert client.is_active is False
    assert client.revoked_at is not None
    assert api.call("GET", f"/users/{uid}/unread")[0] == 401


def test_rotate_action_replaces_the_token(admin_client: Client, uid: int) -> None:
    api = inbox_api("rotating")
    assert api.call("GET", f"/users/{uid}/unread")[0] == 200
    response = admin_client.post(
        f"{ADMIN}/apiclient/",
        {"action": "rotate_token", "_selected_action": [str(api.client.pk)]},
        follow=True,
    )
    token = re.search(r"(msv_[\w-]+)", " ".join(notices(response))).group(1)  # type: ignore[union-attr]
    assert api.call("GET", f"/users/{uid}/unread")[0] == 401
    assert Api(token).call("GET", f"/users/{uid}/unread")[0] == 200
