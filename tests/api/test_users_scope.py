"""The ``users`` scope (API.md "Clients and scopes"): the CLI and the admin issue it, a ``users``
client sends 1:1 as any user and runs groups, and ``send`` stays limited to its listed senders."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from api.models import ApiClient
from tests.api.factories import Api

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip()


def message(sender: int, receiver: int, cmid: str) -> dict[str, object]:
    content = {"type": "text", "text": "hi"}
    return {
        "sender_uid": sender,
        "receiver_uid": receiver,
        "content": content,
        "client_msg_id": cmid,
    }


def test_the_cli_issues_a_users_client_that_acts_as_anyone(
    uids: Callable[[int], list[int]],
) -> None:
    alice, bob, carol = uids(3)
    token = run("apiclient_create", "consumer", "--scopes", "users")
    assert ApiClient.objects.get(name="consumer").scopes == ["users"]
    api = Api(token)
    assert api.call("POST", "/messages", message(alice, bob, "a"))[0] == 201
    assert api.call("POST", "/messages", message(carol, alice, "b"))[0] == 201
    status, group = api.call("POST", "/groups", {"owner_uid": bob, "name": "g"})
    assert (status, group["owner_uid"]) == (201, str(bob))
    assert api.call("GET", f"/users/{bob}/unread")[0] == 403  # reading inboxes is `inbox`'s

    rotated = run("apiclient_rotate", "consumer")
    assert Api(rotated).call("POST", "/messages", message(bob, carol, "c"))[0] == 201
    assert ApiClient.objects.get(name="consumer").scopes == ["users"]


def test_a_send_client_still_acts_only_as_its_senders(uids: Callable[[int], list[int]]) -> None:
    alice, bob = uids(2)
    token = run("apiclient_create", "shop", "--scopes", "send", "--senders", str(alice))
    api = Api(token)
    assert api.call("POST", "/messages", message(alice, bob, "a"))[0] == 201
    status, body = api.call("POST", "/messages", message(bob, alice, "b"))
    assert (status, body["error"]) == (404, "not_found")
    assert api.call("POST", "/groups", {"owner_uid": alice, "name": "g"})[0] == 403


def test_the_admin_offers_the_users_scope(admin_client: Client) -> None:
    page = admin_client.get("/admin/api/apiclient/add/")
    assert page.status_code == 200
    assert b'value="users"' in page.content
