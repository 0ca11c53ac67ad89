"""The 1:1 messaging API end to end: two users talk, and each sees what a user would see.

Real MariaDB, Redis and (for ``backend == "hbase"``) HBase; every flow runs on both inbox
backends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from messaging.models import Account, Follow, Message, MessageStatus
from storage.inbox import _cached
from tests.api.factories import Api, inbox_api, make_api, send_api
from unread.rebuild import unread_rebuild_many

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["sql", "hbase"])
def backend(request: pytest.FixtureRequest, settings: Any) -> Iterator[str]:
    settings.INBOX_BACKEND = request.param
    _cached.cache_clear()
    yield request.param
    _cached.cache_clear()


def texts(page: dict[str, Any]) -> list[str | None]:
    return [(m["content"] or {}).get("text") for m in page["results"]]


def only(page: dict[str, Any]) -> dict[str, Any]:
    assert len(page["results"]) == 1, page
    return page["results"][0]


def test_two_users_exchange_messages_and_both_sides_see_them(
    backend: str, pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    status, first = sender.send(alice, bob, "hi bob")
    assert status == 201
    assert isinstance(first["msgkey"], str)
    assert (first["sender_uid"], first["receiver_uid"]) == (str(alice), str(bob))
    assert first["content"] == {"type": "text", "text": "hi bob"}
    assert first["status"] == "normal"
    assert first["created_at"].startswith(str(timezone.now().year))
    sender.sent(bob, alice, "hello alice 🚀")
    third = sender.sent(alice, bob, "how are you?")

    bob_conv = only(bff.conversations(bob))
    assert bob_conv["peer_uid"] == str(alice)
    assert bob_conv["category"] == "stranger"
    assert bob_conv["unread"] == 2
    assert bob_conv["last_message"]["msgkey"] == third
    assert bob_conv["last_message"]["sender_uid"] == str(alice)
    assert bob_conv["last_message"]["preview"] == "how are you?"
    assert bob_conv["sort_key"] == third
    assert (bob_conv["pinned"], bob_conv["muted"]) == (False, False)
    alice_conv = only(bff.conversations(alice))
    assert (alice_conv["peer_uid"], alice_conv["unread"]) == (str(bob), 1)

    expected = ["how are you?", "hello alice 🚀", "hi bob"]
    assert texts(bff.history(bob, alice)) == expected
    assert texts(bff.history(alice, bob)) == expected
    assert bff.history(bob, alice)["results"][1]["sender_uid"] == str(bob)
    assert bff.unread(bob) == {
        "total": 2,
        "by_category": {"followed": 0, "stranger": 2, "business": 0, "system": 0, "group": 0},
        "announcements": 0,
        "mentions": 0,
    }
    assert bff.unread(alice)["total"] == 1


def test_read_up_to_a_message_then_everything(
    backend: str, pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    keys = [sender.sent(alice, bob, f"m{i}") for i in range(3)]

    assert bff.read(bob, alice, upto=keys[0]) == (200, {"unread": 2})
    assert only(bff.conversations(bob))["unread"] == 2
    assert bff.unread(bob)["total"] == 2

    assert bff.read(bob, alice) == (200, {"unread": 0})
    assert only(bff.conversations(bob))["unread"] == 0
    assert bff.unread(bob)["by_category"]["stranger"] == 0
    assert bff.unread(alice)["total"] == 0  # alice only sent


def test_reading_past_the_newest_message_still_counts_the_next_ones(
    backend: str, pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    """An upto_msgkey beyond the newest message (a stale client, a typo, 2^63-1) reads everything
    there is, and nothing sent later: later messages stay unread, recall and delete drop them,
    and a rebuild from the truth agrees with the live counters."""
    alice, bob = pair
    sender.sent(alice, bob, "before the read")
    assert bff.read(bob, alice, upto=str((1 << 63) - 1)) == (200, {"unread": 0})
    later = [sender.sent(alice, bob, f"after the read {i}") for i in range(3)]
    assert bff.unread(bob)["total"] == 3

    assert unread_rebuild_many([bob]).total_drift == 0
    assert only(bff.conversations(bob))["unread"] == 3
    assert sender.recall(later[0])[0] == 200
    assert bff.unread(bob)["total"] == 2
    path = f"/users/{bob}/conversations/{alice}/messages/{later[1]}"
    assert bff.call("DELETE", path)[0] == 204
    assert bff.unread(bob)["total"] == 1
    assert bff.read(bob, alice, upto=later[1]) == (200, {"unread": 1})
    assert unread_rebuild_many([bob]).total_drift == 0


def test_recall_shows_recalled_on_both_sides_and_drops_it_from_unread(
    backend: str, pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    sender.sent(alice, bob, "keep")
    oops = sender.sent(alice, bob, "oops, wrong chat")

    status, body = sender.recall(oops)
    assert (status, body) == (200, {"msgkey": oops, "status": "recalled"})

    for owner, peer in ((bob, alice), (alice, bob)):
        newest = bff.history(owner, peer)["results"][0]
        assert (newest["msgkey"], newest["status"], newest["content"]) == (oops, "recalled", None)
    assert only(bff.conversations(bob))["last_message"]["preview"] == "[recalled]"
    assert only(bff.conversations(bob))["unread"] == 1
    assert bff.unread(bob)["total"] == 1
    assert sender.recall(oops)[0] == 200  # recalling twice changes nothing
    assert bff.unread(bob)["total"] == 1


def test_one_sided_deletes_leave_the_other_side_alone(
    backend: str, pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    first = sender.sent(alice, bob, "first")
    second = sender.sent(alice, bob, "second")

    status, _ = bff.call("DELETE", f"/users/{bob}/conversations/{alice}/messages/{second}")
    assert status == 204
    assert texts(bff.history(bob, alice)) == ["first"]
    assert texts(bff.history(alice, bob)) == ["second", "first"]
    assert only(bff.conversations(bob))["last_message"]["msgkey"] == first
    assert only(bff.conversations(bob))["unread"] == 1
    again = bff.call("DELETE", f"/users/{bob}/conversations/{alice}/messages/{second}")
    assert again[0] == 404

    assert bff.call("DELETE", f"/users/{bob}/conversations/{alice}")[0] == 204
    assert bff.conversations(bob) == {"results": [], "next_cursor": None}
    assert bff.history(bob, alice)["results"] == []
    assert bff.unread(bob)["total"] == 0
    assert texts(bff.history(alice, bob)) == ["second", "first"]
    assert only(bff.conversations(alice))["peer_uid"] == str(bob)


def test_delete_everything_a_user_holds(
    backend: str, uids: Callable[[int], list[int]], bff: Api
) -> None:
    me, a, b = uids(3)
    api = send_api("app", [a, b, me])
    api.sent(a, me, "from a")
    api.sent(b, me, "from b")
    api.sent(me, a, "to a")

    assert bff.call("DELETE", f"/users/{me}/messages") == (200, {"conversations_deleted": 2})
    assert bff.conversations(me)["results"] == []
    assert bff.unread(me)["total"] == 0
    assert texts(bff.history(a, me)) == ["to a", "from a"]


def test_categories_followed_stranger_business(
    backend: str, uids: Callable[[int], list[int]], bff: Api
) -> None:
    me, friend, stranger, shop = uids(4)
    Follow.objects.create(follower_uid=me, followee_uid=friend, followed_at=timezone.now())
    Account.objects.create(uid=shop, kind="business", name="Shop")
    api = send_api("app", [friend, stranger, shop])
    api.sent(friend, me, "hey")
    api.sent(stranger, me, "hello?")
    api.sent(stranger, me, "anyone?")
    api.sent(shop, me, "50% off")

    by_peer = {c["peer_uid"]: c["category"] for c in bff.conversations(me)["results"]}
    assert by_peer == {str(friend): "followed", str(stranger): "stranger", str(shop): "business"}
    followed = bff.conversations(me, category="followed")["results"]
    assert [c["peer_uid"] for c in followed] == [str(friend)]
    assert bff.unread(me)["by_category"] == {
        "followed": 1,
        "stranger": 2,
        "business": 1,
        "system": 0,
        "group": 0,
    }
    assert bff.unread(me)["total"] == 4
    assert only(bff.conversations(friend))["category"] == "stranger"  # friend does not follow me


def test_conversation_list_and_history_pages_with_cursors(
    backend: str, uids: Callable[[int], list[int]], bff: Api
) -> None:
    me, *peers = uids(5)
    api = send_api("app", peers)
    originals = {peer: api.sent(peer, me, f"from {peer}") for peer in peers}

    seen, cursor = [], None
    while True:
        query = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = bff.conversations(me, **query)
        seen += [c["peer_uid"] for c in page["results"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert isinstance(cursor, str)
    assert seen == [str(p) for p in reversed(peers)]

    keys = [api.sent(peers[0], me, f"n{i}") for i in range(5)]
    first = bff.history(me, peers[0], limit=3)
    assert [m["msgkey"] for m in first["results"]] == keys[::-1][:3]
    rest = bff.history(me, peers[0], limit=3, before=first["next_cursor"])
    assert [m["msgkey"] for m in rest["results"]] == [keys[1], keys[0], originals[peers[0]]]
    assert rest["next_cursor"] is None


def test_retried_send_returns_the_original_and_stores_once(
    backend: str, pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    first = sender.send(alice, bob, "once", cmid="retry-1")
    again = sender.send(alice, bob, "once", cmid="retry-1")
    assert (first[0], again[0]) == (201, 200)
    assert again[1]["msgkey"] == first[1]["msgkey"]
    assert again[1]["content"] == {"type": "text", "text": "once"}
    assert texts(bff.history(bob, alice)) == ["once"]
    assert bff.unread(bob)["total"] == 1
    assert only(bff.conversations(bob))["unread"] == 1


def test_same_client_msg_id_with_another_body_is_a_conflict(
    pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    assert sender.send(alice, bob, "original", cmid="k")[0] == 201
    status, body = sender.send(alice, bob, "changed", cmid="k")
    assert status == 409
    assert body["error"] == "conflict"
    assert texts(bff.history(bob, alice)) == ["original"]


def test_the_same_client_msg_id_from_another_sender_is_another_message(
    pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    assert sender.send(alice, bob, "a", cmid="shared")[0] == 201
    assert sender.send(bob, alice, "b", cmid="shared")[0] == 201
    assert texts(bff.history(alice, bob)) == ["b", "a"]


def test_blocked_sender_gets_403_until_unblocked(
    backend: str, pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    assert bff.call("PUT", f"/users/{bob}/blocks/{alice}")[0] == 204
    assert bff.call("PUT", f"/users/{bob}/blocks/{alice}")[0] == 204  # idempotent
    status, body = sender.send(alice, bob, "let me in")
    assert (status, body["error"]) == (403, "blocked")
    assert bff.conversations(bob)["results"] == []
    assert sender.send(bob, alice, "one-way block")[0] == 201

    assert bff.call("DELETE", f"/users/{bob}/blocks/{alice}")[0] == 204
    assert sender.send(alice, bob, "thanks")[0] == 201
    assert texts(bff.history(bob, alice)) == ["thanks", "one-way block"]


def test_reading_or_deleting_an_unknown_conversation_is_404(
    pair: tuple[int, int], bff: Api
) -> None:
    alice, bob = pair
    status, body = bff.read(alice, bob)
    assert (status, body["error"]) == (404, "not_found")
    assert bff.call("DELETE", f"/users/{alice}/conversations/{bob}")[0] == 404
    assert bff.history(alice, bob) == {"results": [], "next_cursor": None}


def test_four_byte_emoji_round_trip_intact(
    backend: str, pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    head = "🚀 \U0001d54f 👩‍👩‍👧‍👦 🇯🇵 "  # rocket, math X, family (ZWJ), flag
    text = head + "😀" * (5000 - len(head))  # the longest text allowed, all 4-byte emoji
    assert len(text) == 5000
    status, body = sender.send(alice, bob, text)
    assert status == 201
    assert body["content"]["text"] == text
    assert bff.history(bob, alice)["results"][0]["content"]["text"] == text
    assert only(bff.conversations(bob))["last_message"]["preview"].startswith(head.strip())


# -- recall permissions ---------------------------------------------------------------------------
def test_recall_after_the_window_needs_an_operator(
    pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    key = sender.sent(alice, bob, "old news")
    Message.objects.filter(msgkey=int(key)).update(created_at=timezone.now() - timedelta(minutes=3))
    status, body = sender.recall(key)
    assert (status, body["error"]) == (403, "forbidden")
    assert bff.history(bob, alice)["results"][0]["status"] == "normal"

    operator = make_api("ops", ["inbox"], is_operator=True)
    assert operator.recall(key) == (200, {"msgkey": key, "status": "recalled"})
    assert bff.history(bob, alice)["results"][0]["status"] == "recalled"


def test_a_client_cannot_recall_another_clients_messages(
    pair: tuple[int, int], sender: Api, uids: Callable[[int], list[int]]
) -> None:
    alice, bob = pair
    key = sender.sent(alice, bob, "mine")
    other = send_api("other", uids(1))
    assert other.recall(key)[0] == 404
    assert inbox_api("bff2").recall(key)[0] == 403  # inbox scope alone cannot recall
    assert sender.recall(str(1 << 40))[0] == 404
    assert Message.objects.get(msgkey=int(key)).status == MessageStatus.NORMAL


# -- concurrency ----------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_concurrent_sends_of_one_client_msg_id_store_one_message(
    pair: tuple[int, int],
) -> None:
    alice, bob = pair
    token_api = send_api("racer", pair)
    bff = inbox_api()
    barrier = threading.Barrier(8)
    results: list[tuple[int, Any]] = []

    def race() -> None:
        api = Api(token_api.token)
        barrier.wait()
        try:
            results.append(api.send(alice, bob, "exactly once", cmid="race-1"))
        finally:
            connection.close()

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(status for status, _ in results) == [200] * 7 + [201]
    assert len({body["msgkey"] for _, body in results}) == 1
    assert texts(bff.history(bob, alice)) == ["exactly once"]
    assert bff.unread(bob)["total"] == 1
    assert only(bff.conversations(bob))["unread"] == 1
