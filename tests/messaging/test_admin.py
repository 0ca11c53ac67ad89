"""Operators' Django admin of messaging: every page loads, search finds by id, and the recall
action recalls on both sides (API clients: tests/api/test_admin.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone

from messaging.models import Account, Block, Conversation, Follow, Message, MessageStatus
from tests.api.factories import inbox_api, send_api

pytestmark = pytest.mark.django_db

ADMIN = "/admin/messaging"


@pytest.fixture
def chat(uids: Callable[[int], list[int]]) -> tuple[int, int, str]:
    alice, bob = uids(2)
    key = send_api("app", [alice]).sent(alice, bob, "hello from alice")
    Follow.objects.create(follower_uid=bob, followee_uid=alice, followed_at=timezone.now())
    Block.objects.create(owner_uid=alice, blocked_uid=bob + 7)
    Account.objects.create(uid=bob + 9, kind="business", name="Shop")
    return alice, bob, key


def notices(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.mark.parametrize(
    "page",
    [
        "message",
        "conversation",
        "follow",
        "block",
        "account",
        "account/add",
        "follow/add",
        "block/add",
    ],
)
def test_admin_pages_load(page: str, admin_client: Client, chat: tuple[int, int, str]) -> None:
    response = admin_client.get(f"{ADMIN}/{page}/")
    assert response.status_code == 200


def test_change_pages_load(admin_client: Client, chat: tuple[int, int, str]) -> None:
    alice, bob, key = chat
    conv = Conversation.objects.get(owner_uid=bob, peer_uid=alice)
    for path in [
        f"message/{key}/change",
        f"conversation/{conv.pk}/change",
    ]:
        response = admin_client.get(f"{ADMIN}/{path}/")
        assert response.status_code == 200, path
    assert "hello from alice" in admin_client.get(f"{ADMIN}/message/{key}/change/").text


def test_inbox_rows_are_not_in_admin(admin_client: Client) -> None:
    assert admin_client.get(f"{ADMIN}/inboxrow/").status_code == 404


def test_message_search_by_msgkey_or_sender(
    admin_client: Client, chat: tuple[int, int, str], uids: Callable[[int], list[int]]
) -> None:
    alice, bob, key = chat
    other = send_api("other", [bob]).sent(bob, alice, "reply")
    by_key = admin_client.get(f"{ADMIN}/message/", {"q": key}).context["cl"].result_list
    assert [str(m.msgkey) for m in by_key] == [key]
    by_sender = admin_client.get(f"{ADMIN}/message/", {"q": str(bob)}).context["cl"].result_list
    assert [str(m.msgkey) for m in by_sender] == [other]
    for junk in ["hello", "-1", str(1 << 70), "١٢"]:
        response = admin_client.get(f"{ADMIN}/message/", {"q": junk})
        assert response.status_code == 200
        assert list(response.context["cl"].result_list) == []


def test_conversation_search_by_owner_peer_or_both(
    admin_client: Client, chat: tuple[int, int, str]
) -> None:
    alice, bob, _ = chat

    def found(q: str) -> set[tuple[int, int]]:
        rows = admin_client.get(f"{ADMIN}/conversation/", {"q": q}).context["cl"].result_list
        return {(c.owner_uid, c.peer_uid) for c in rows}

    assert found(str(alice)) == {(alice, bob), (bob, alice)}
    assert found(f"{bob} {alice}") == {(bob, alice)}
    assert found("nobody") == set()


def test_message_list_filters(admin_client: Client, chat: tuple[int, int, str]) -> None:
    _, _, key = chat
    normal = admin_client.get(f"{ADMIN}/message/", {"status__exact": "0", "q": key})
    assert len(normal.context["cl"].result_list) == 1
    recalled = admin_client.get(f"{ADMIN}/message/", {"status__exact": "1", "q": key})
    assert len(recalled.context["cl"].result_list) == 0
    assert admin_client.get(f"{ADMIN}/message/", {"type__exact": "text"}).status_code == 200


def test_recall_action_recalls_on_both_sides(
    admin_client: Client, chat: tuple[int, int, str]
) -> None:
    alice, bob, key = chat
    Message.objects.filter(msgkey=int(key)).update(
        created_at=timezone.now() - timedelta(days=1)  # operators are not time-bound
    )
    response = admin_client.post(
        f"{ADMIN}/message/", {"action": "recall_selected", "_selected_action": [key]}, follow=True
    )
    assert response.status_code == 200
    assert "Recalled 1 message(s)." in notices(response)
    assert Message.objects.get(msgkey=int(key)).status == MessageStatus.RECALLED
    bff = inbox_api("bff")
    for owner, peer in ((bob, alice), (alice, bob)):
        newest = bff.history(owner, peer)["results"][0]
        assert (newest["msgkey"], newest["status"], newest["content"]) == (key, "recalled", None)
    assert bff.unread(bob)["total"] == 0
