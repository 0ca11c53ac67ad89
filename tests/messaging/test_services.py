"""Messaging actions end to end on both inbox backends: what each side sees after each action.

Every test runs once with the SQL inbox and once with the HBase inbox (``backend`` fixture).
Unread counters are checked through the selectors users read and directly in the Redis hash.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from api.errors import Blocked, Conflict, Forbidden, InvalidInput, NotFound
from messaging import selectors, services
from messaging.models import Account, ClientMessage, Conversation, Follow, Message
from storage import events
from storage import msgkey as keys
from storage.inbox import _cached, get_inbox
from storage.inbox.base import FLAG_RECALLED, RECEIVED, SENT
from tests.storage.test_counters import assert_consistent
from unread.rebuild import unread_rebuild_many
from unread.selectors import unread_summary

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]


@pytest.fixture(params=["sql", "hbase"], autouse=True)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    with override_settings(INBOX_BACKEND=request.param):
        _cached.cache_clear()
        yield request.param
    _cached.cache_clear()


_client_ids = iter(range(1, 1 << 62))


def send(sender: int, receiver: int, text: str = "hello", client_msg_id: str | None = None) -> int:
    result = services.message_send(
        sender_uid=sender,
        receiver_uid=receiver,
        content={"type": "text", "text": text},
        client_msg_id=client_msg_id or f"c-{next(_client_ids)}",
    )
    return result.message.msgkey


def unread(owner: int, peer: int | None = None) -> int:
    summary = unread_summary(owner)
    return summary.total if peer is None else summary.by_peer.get(peer, 0)


def history(owner: int, peer: int) -> list[tuple[int, str, Any]]:
    page = selectors.history(owner, peer, limit=200)
    return [(i.msgkey, i.status, i.content and i.content.get("text")) for i in page.results]


def peers_listed(owner: int) -> list[int]:
    return [item.peer_uid for item in selectors.conversation_list(owner, limit=100).results]


def category(owner: int, peer: int) -> str:
    return Conversation.objects.get(owner_uid=owner, peer_uid=peer).category


# -- send -----------------------------------------------------------------------------------------
def test_a_send_writes_one_copy_and_one_conversation_per_side(uids: Uids) -> None:
    alice, bob = uids(2)

    key = send(alice, bob, "hi bob")

    inbox = get_inbox()
    assert inbox.get(bob, alice, key).direction == RECEIVED  # type: ignore[union-attr]
    assert inbox.get(alice, bob, key).direction == SENT  # type: ignore[union-attr]
    assert Conversation.objects.filter(owner_uid__in=[alice, bob]).count() == 2
    assert history(bob, alice) == history(alice, bob) == [(key, "normal", "hi bob")]
    assert (unread(bob, alice), unread(alice)) == (1, 0)
    assert peers_listed(bob) == [alice]
    assert peers_listed(alice) == [bob]


def test_conversation_list_puts_the_newest_conversation_first(uids: Uids) -> None:
    bob, alice, carol = uids(3)
    send(alice, bob)
    send(carol, bob)
    assert peers_listed(bob) == [carol, alice]
    send(alice, bob)
    assert peers_listed(bob) == [alice, carol]
    assert unread(bob) == 3


def test_categories_follow_the_receivers_follows_and_the_senders_account(uids: Uids) -> None:
    bob, friend, stranger, shop, system = uids(5)
    Follow.objects.create(follower_uid=bob, followee_uid=friend, followed_at=timezone.now())
    Account.objects.create(uid=shop, kind="business", name="shop")
    Account.objects.create(uid=system, kind="system", name="notices")

    for sender in (friend, stranger, shop, system):
        send(sender, bob)

    assert [category(bob, p) for p in (friend, stranger, shop, system)] == [
        "followed",
        "stranger",
        "business",
        "system",
    ]
    assert unread_summary(bob).by_category == {
        "followed": 1,
        "stranger": 1,
        "business": 1,
        "system": 1,
    }
    assert category(friend, bob) == "stranger"  # the friend does not follow bob back


def test_following_the_sender_later_moves_the_conversation_and_its_unread(uids: Uids) -> None:
    bob, alice = uids(2)
    send(alice, bob)
    Follow.objects.create(follower_uid=bob, followee_uid=alice, followed_at=timezone.now())
    send(alice, bob)

    assert category(bob, alice) == "followed"
    assert unread_summary(bob).by_category["followed"] == 2
    services.conversation_mark_read(owner_uid=bob, peer_uid=alice)
    assert set(unread_summary(bob).by_category.values()) == {0}


def test_a_replayed_send_returns_the_original_and_stores_nothing_twice(uids: Uids) -> None:
    alice, bob = uids(2)
    first = send(alice, bob, "once", client_msg_id="tap-1")

    again = services.message_send(
        sender_uid=alice,
        receiver_uid=bob,
        content={"type": "text", "text": "once"},
        client_msg_id="tap-1",
    )

    assert (again.message.msgkey, again.created) == (first, False)
    assert Message.objects.filter(sender_uid=alice).count() == 1
    assert ClientMessage.objects.filter(sender_uid=alice).count() == 1
    assert get_inbox().count(bob, alice) == get_inbox().count(alice, bob) == 1
    assert unread(bob) == 1


def test_the_same_client_msg_id_with_another_body_is_a_conflict(uids: Uids) -> None:
    alice, bob, carol = uids(3)
    send(alice, bob, "first", client_msg_id="tap-1")

    with pytest.raises(Conflict):
        send(alice, bob, "second", client_msg_id="tap-1")
    with pytest.raises(Conflict):
        send(alice, carol, "first", client_msg_id="tap-1")
    assert history(bob, alice)[0][2] == "first"
    assert peers_listed(carol) == []


def test_a_blocked_sender_cannot_send_and_nothing_is_stored(uids: Uids) -> None:
    alice, bob = uids(2)
    services.block_set(owner_uid=bob, blocked_uid=alice, blocked=True)

    with pytest.raises(Blocked):
        send(alice, bob)

    assert peers_listed(bob) == peers_listed(alice) == []
    assert unread(bob) == 0
    services.block_set(owner_uid=bob, blocked_uid=alice, blocked=False)
    send(alice, bob)
    assert unread(bob) == 1


def test_a_user_cannot_message_themselves(uid: int) -> None:
    with pytest.raises(InvalidInput):
        send(uid, uid)


# -- recall ----------------------------------------------------------------------------------------
def test_the_sender_recalls_within_the_window_and_both_sides_see_it(uids: Uids) -> None:
    alice, bob = uids(2)
    kept = send(alice, bob, "kept")
    gone = send(alice, bob, "oops")

    services.message_recall(msgkey=gone, actor_uid=alice)

    assert unread(bob, alice) == 1
    expected = [(gone, "recalled", None), (kept, "normal", "kept")]
    assert history(bob, alice) == history(alice, bob) == expected
    last = selectors.conversation_list(bob).results[0].last_message
    assert last is not None
    assert last["preview"] == "[recalled]"


def test_recalling_a_message_already_read_leaves_unread_at_zero(uids: Uids) -> None:
    alice, bob = uids(2)
    key = send(alice, bob)
    services.conversation_mark_read(owner_uid=bob, peer_uid=alice)

    services.message_recall(msgkey=key, actor_uid=alice)
    services.message_recall(msgkey=key, actor_uid=alice)  # twice: no change

    assert unread(bob) == 0
    assert_consistent(bob)


def test_only_the_sender_may_recall_and_only_within_the_window(
    uids: Uids, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = uids(2)
    key = send(alice, bob)
    with pytest.raises(Forbidden):
        services.message_recall(msgkey=key, actor_uid=bob)

    later = timezone.now() + services.RECALL_WINDOW + timedelta(seconds=1)
    monkeypatch.setattr(timezone, "now", lambda: later)
    with pytest.raises(Forbidden):
        services.message_recall(msgkey=key, actor_uid=alice)
    assert history(bob, alice)[0][1] == "normal"
    assert unread(bob) == 1

    services.message_recall(msgkey=key, actor_uid=None, operator=True)
    assert history(bob, alice)[0][1] == history(alice, bob)[0][1] == "recalled"
    assert unread(bob) == 0


def test_recalling_an_unknown_message_is_not_found() -> None:
    with pytest.raises(NotFound):
        services.message_recall(msgkey=12345, actor_uid=1)


# -- read position --------------------------------------------------------------------------------
def test_mark_read_up_to_a_message_then_all(uids: Uids) -> None:
    alice, bob = uids(2)
    keys = [send(alice, bob, f"m{i}") for i in range(3)]
    send(bob, alice, "reply")  # bob's own message never counts for bob

    assert services.conversation_mark_read(owner_uid=bob, peer_uid=alice, upto_msgkey=keys[1]) == 1
    assert unread(bob, alice) == 1
    assert selectors.conversation_list(bob).results[0].unread == 1
    assert services.conversation_mark_read(owner_uid=bob, peer_uid=alice) == 0
    assert unread(bob) == 0
    assert unread(alice) == 1


def test_mark_read_of_an_unknown_conversation_is_not_found(uids: Uids) -> None:
    alice, bob = uids(2)
    with pytest.raises(NotFound):
        services.conversation_mark_read(owner_uid=bob, peer_uid=alice)


# -- one-sided deletes ----------------------------------------------------------------------------
def test_deleting_one_message_touches_one_side_only(uids: Uids) -> None:
    alice, bob = uids(2)
    first = send(alice, bob, "one")
    second = send(alice, bob, "two")

    services.message_delete(owner_uid=bob, peer_uid=alice, msgkey=second)

    assert history(bob, alice) == [(first, "normal", "one")]
    assert [k for k, _, _ in history(alice, bob)] == [second, first]
    assert unread(bob, alice) == 1
    last = selectors.conversation_list(bob).results[0].last_message
    assert last is not None
    assert last["msgkey"] == first
    with pytest.raises(NotFound):
        services.message_delete(owner_uid=bob, peer_uid=alice, msgkey=second)


def test_deleting_the_only_message_removes_that_sides_conversation(uids: Uids) -> None:
    alice, bob = uids(2)
    key = send(alice, bob)

    services.message_delete(owner_uid=alice, peer_uid=bob, msgkey=key)

    assert peers_listed(alice) == []
    assert peers_listed(bob) == [alice]
    assert unread(bob) == 1


def test_deleting_a_conversation_touches_one_side_only(uids: Uids) -> None:
    alice, bob = uids(2)
    send(alice, bob, "a")
    send(bob, alice, "b")
    send(alice, bob, "c")

    services.conversation_delete(owner_uid=bob, peer_uid=alice)

    assert peers_listed(bob) == []
    assert history(bob, alice) == []
    assert unread(bob) == 0
    assert [text for _, _, text in history(alice, bob)] == ["c", "b", "a"]
    assert unread(alice, bob) == 1


def test_deleting_everything_touches_one_user_only(uids: Uids) -> None:
    alice, bob, carol = uids(3)
    send(alice, bob)
    send(carol, bob)
    send(bob, carol)

    assert services.messages_delete_all(owner_uid=bob) == 2

    assert peers_listed(bob) == []
    assert unread(bob) == 0
    assert history(bob, alice) == history(bob, carol) == []
    assert len(history(alice, bob)) == 1
    assert len(history(carol, bob)) == 2
    assert unread(carol, bob) == 1


# -- bugs in services.py found by this suite (see the report) -------------------------------------
def test_a_send_replayed_after_a_recall_stays_recalled(uids: Uids) -> None:
    alice, bob = uids(2)
    key = send(alice, bob, "oops", client_msg_id="tap-9")
    services.message_recall(msgkey=key, actor_uid=alice)

    send(alice, bob, "oops", client_msg_id="tap-9")  # the client retries a timed-out request

    entry = get_inbox().get(bob, alice, key)
    assert entry is not None
    assert entry.flags & FLAG_RECALLED
    assert services.conversation_mark_read(owner_uid=bob, peer_uid=alice, upto_msgkey=0) == 0
    assert unread_rebuild_many([bob]).total_drift == 0


def test_a_send_replayed_after_the_receiver_deleted_it_stays_deleted(uids: Uids) -> None:
    alice, bob = uids(2)
    send(alice, bob, "hi", client_msg_id="tap-5")
    services.conversation_delete(owner_uid=bob, peer_uid=alice)

    send(alice, bob, "hi", client_msg_id="tap-5")  # the client retries a timed-out request

    assert peers_listed(bob) == []
    assert history(bob, alice) == []
    assert unread_rebuild_many([bob]).total_drift == 0


# -- concurrency -----------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)  # real commits: every thread has its own connection
def test_sends_both_ways_and_retries_at_once_store_each_message_once(uids: Uids) -> None:
    alice, bob = uids(2)
    per_thread = 60
    errors: list[str] = []

    def sender(frm: int, to: int, tag: str) -> None:
        try:
            for i in range(per_thread):
                send(frm, to, f"{tag}{i}", client_msg_id=f"{tag}-{i}")
        except Exception as exc:  # collected and asserted below, in the test's thread
            errors.append(repr(exc))
        finally:
            connection.close()

    jobs = [(alice, bob, "ab"), (alice, bob, "ab"), (bob, alice, "ba"), (bob, alice, "ba")]
    threads = [threading.Thread(target=sender, args=job) for job in jobs]  # pairs retry each other
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert Message.objects.filter(sender_uid__in=[alice, bob]).count() == 2 * per_thread
    assert get_inbox().count(alice, bob) == get_inbox().count(bob, alice) == 2 * per_thread
    assert (unread(alice), unread(bob)) == (per_thread, per_thread)
    assert unread_rebuild_many([alice, bob]).total_drift == 0


def test_a_send_whose_new_msgkey_clashes_is_stored_again_and_the_old_message_is_untouched(
    uids: Uids, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob, carol = uids(3)
    taken = send(carol, bob, "already here")
    fresh = iter([taken])  # the send's first msgkey is one that is stored already
    real = keys.next_msgkey
    monkeypatch.setattr(keys, "next_msgkey", lambda: next(fresh, None) or real())

    key = send(alice, bob, "new", client_msg_id="clash-1")

    assert key != taken
    assert Message.objects.get(msgkey=taken).body["text"] == "already here"
    assert Message.objects.get(msgkey=key).body["text"] == "new"
    assert ClientMessage.objects.get(sender_uid=alice, client_msg_id="clash-1").msgkey == key
    assert unread(bob) == 2


# -- counters stay exact under any sequence of actions --------------------------------------------
def test_unread_totals_equal_their_parts_and_the_truth_after_random_actions(uids: Uids) -> None:
    users = uids(4)
    rng = random.Random(20261122)
    sent: list[tuple[int, int, int]] = []  # (sender, receiver, msgkey)

    def act() -> None:
        a, b = rng.sample(users, 2)
        roll = rng.random()
        if roll < 0.5 or not sent:
            sent.append((a, b, send(a, b, f"r{len(sent)}")))
        elif roll < 0.65:
            convs = list(Conversation.objects.filter(owner_uid=a).order_by("peer_uid"))
            if convs:
                conv = rng.choice(convs)
                upto = rng.choice(
                    [None, conv.last_msgkey, (conv.read_upto + conv.last_msgkey) // 2]
                )
                services.conversation_mark_read(
                    owner_uid=a, peer_uid=conv.peer_uid, upto_msgkey=upto
                )
        elif roll < 0.75:
            sender, receiver, key = rng.choice(sent)
            owner, peer = rng.choice([(sender, receiver), (receiver, sender)])
            if get_inbox().get(owner, peer, key) is not None:
                services.message_delete(owner_uid=owner, peer_uid=peer, msgkey=key)
        elif roll < 0.85:
            sender, _, key = rng.choice(sent)
            services.message_recall(msgkey=key, actor_uid=sender)
        elif roll < 0.92:
            Follow.objects.get_or_create(
                follower_uid=a, followee_uid=b, defaults={"followed_at": timezone.now()}
            )
        elif roll < 0.97:
            if Conversation.objects.filter(owner_uid=a, peer_uid=b).exists():
                services.conversation_delete(owner_uid=a, peer_uid=b)
        else:
            services.messages_delete_all(owner_uid=a)

    for _ in range(120):
        act()
        for user in users:
            fields = assert_consistent(user)
            listed = {
                i.peer_uid: i.unread for i in selectors.conversation_list(user, limit=10).results
            }
            assert {p: n for p, n in listed.items() if n} == {
                int(k[2:]): v for k, v in fields.items() if k.startswith("p:")
            }

    assert unread_rebuild_many(users).total_drift == 0


# -- the write paths, pinned by query count ----------------------------------------------------
# Inside a test the transaction's BEGIN/COMMIT show as SAVEPOINT/RELEASE, and count.
def text(body: str) -> dict[str, str]:
    return {"type": "text", "text": body}


def inbox_queries(backend: str) -> int:
    """The SQL inbox writes its rows in one statement; HBase takes them over Thrift."""
    return 1 if backend == "sql" else 0


def test_a_send_costs_nine_queries_plus_the_inbox_and_a_replay_two(
    backend: str, uids: Uids, django_assert_num_queries: Any
) -> None:
    alice, bob = uids(2)
    services.message_send(
        sender_uid=alice, receiver_uid=bob, content=text("warm"), client_msg_id="w"
    )
    # one read of what the send must know (the idempotency lookup, the block, both accounts'
    # kinds, the follows both ways: messaging.selectors.send_facts), savepoint, ledger row,
    # content row, release, savepoint, [inbox rows of both sides, one statement], conversations
    # (both sides, one upsert), release, ledger marked delivered
    with django_assert_num_queries(9 + inbox_queries(backend)):
        services.message_send(
            sender_uid=alice, receiver_uid=bob, content=text("hi"), client_msg_id="c"
        )
    with django_assert_num_queries(2):  # the send's facts and its content: nothing is re-sent
        replay = services.message_send(
            sender_uid=alice, receiver_uid=bob, content=text("hi"), client_msg_id="c"
        )
    assert not replay.created


@pytest.mark.parametrize("receivers", [10, 500])
def test_deliver_many_costs_three_queries_plus_the_inbox_whatever_the_batch_size(
    backend: str, receivers: int, uids: Uids, django_assert_num_queries: Any
) -> None:
    sender, *owners = uids(receivers + 1)
    msgkey = keys.next_msgkey()
    # savepoint, [one INSERT of every inbox row], one upsert of every conversation, release;
    # owners with no cached list cost the cache tiers no SQL
    with django_assert_num_queries(3 + inbox_queries(backend)):
        services.deliver_many(
            sender_uid=sender, receiver_uids=owners, msgkey=msgkey, category="business", marker="q"
        )
    assert Conversation.objects.filter(peer_uid=sender, last_msgkey=msgkey).count() == receivers
    assert unread_summary(owners[-1]).by_category["business"] == 1


def test_a_bulk_delivery_publishes_one_event_per_shard_naming_every_receiver(
    uids: Uids,
) -> None:
    sender, *owners = uids(201)
    msgkey = keys.next_msgkey()
    services.deliver_many(
        sender_uid=sender, receiver_uids=owners, msgkey=msgkey, category="business", marker="e"
    )

    ours = [
        d
        for shard in range(events.SHARDS)
        for d in events.read_deliveries(shard, count=10_000)
        if d.msgkey == msgkey
    ]
    assert sorted(u for d in ours for u in d.uids) == sorted(owners)
    assert {d.peer for d in ours} == {sender}
    assert len(ours) == len({o % events.SHARDS for o in owners})  # one entry per shard
    assert all(len({u % events.SHARDS for u in d.uids}) == 1 for d in ours)


def test_a_1to1_send_publishes_one_event_for_the_receiver(uids: Uids) -> None:
    alice, bob = uids(2)
    msgkey = send(alice, bob)

    ours = [d for d in events.read_deliveries(bob % events.SHARDS) if d.msgkey == msgkey]
    assert [(d.uids, d.peer) for d in ours] == [([bob], alice)]


def test_a_bulk_delivery_writes_the_same_conversations_as_one_by_one_sends(uids: Uids) -> None:
    sender, *owners = uids(1301)
    old = keys.next_msgkey()
    services.deliver_many(  # a conversation that exists already moves forward
        sender_uid=sender, receiver_uids=owners[:5], msgkey=old, category="business", marker="a"
    )
    msgkey = keys.next_msgkey()
    for _ in range(2):  # a redelivered batch changes nothing
        services.deliver_many(
            sender_uid=sender, receiver_uids=owners, msgkey=msgkey, category="business", marker="b"
        )
    rows = Conversation.objects.filter(peer_uid=sender).values_list(
        "owner_uid", "category", "last_msgkey", "sort_key", "read_upto"
    )
    assert sorted(rows) == [(o, "business", msgkey, msgkey, 0) for o in sorted(owners)]
    assert [unread(o, sender) for o in (owners[0], owners[6], owners[-1])] == [2, 1, 1]
    assert get_inbox().get_for_owners(owners[:3], sender, msgkey)[0].direction == RECEIVED
