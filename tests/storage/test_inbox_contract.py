"""The inbox contract (storage.inbox.base.Inbox): one suite, every backend passes it unchanged.

The HBase tables are shared between tests and runs, so every test writes under fresh uids; the
64-bit boundary test owns the largest uid and clears it first.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from storage.inbox import Inbox, InboxEntry, inbox_for
from storage.inbox.base import FLAG_RECALLED, RECEIVED, SENT
from storage.inbox.hbase import salt

pytestmark = pytest.mark.django_db

MAX_ID = (1 << 63) - 1
Uids = Callable[[int], list[int]]


@pytest.fixture(params=["sql", "hbase"])
def inbox(request: pytest.FixtureRequest) -> Inbox:
    return inbox_for(request.param)


def received(owner: int, peer: int, msgkeys: range | list[int]) -> list[InboxEntry]:
    return [InboxEntry(owner, peer, k, RECEIVED) for k in msgkeys]


def all_pages(inbox: Inbox, owner: int, peer: int, limit: int) -> list[list[int]]:
    pages, before = [], None
    while True:
        page = inbox.page(owner, peer, before, limit)
        pages.append([e.msgkey for e in page.entries])
        if page.next_before is None:
            return pages
        before = page.next_before


def test_the_same_entry_written_twice_is_one_entry(inbox: Inbox, uids: Uids) -> None:
    owner, peer = uids(2)
    entry = InboxEntry(owner, peer, 1000, RECEIVED)
    inbox.add_many([entry, entry])
    inbox.add(entry)
    inbox.add_many([])

    assert inbox.count(owner, peer) == 1
    assert inbox.page(owner, peer).entries == [entry]


def test_pages_run_newest_first_and_cover_every_entry_exactly_once(
    inbox: Inbox, uids: Uids
) -> None:
    owner, peer = uids(2)
    msgkeys = [7 * i + 3 for i in range(237)]
    inbox.add_many(received(owner, peer, msgkeys))

    pages = all_pages(inbox, owner, peer, limit=50)

    assert [len(p) for p in pages] == [50, 50, 50, 50, 37]
    assert [k for p in pages for k in p] == sorted(msgkeys, reverse=True)


def test_the_last_full_page_says_there_is_nothing_more(inbox: Inbox, uids: Uids) -> None:
    owner, peer = uids(2)
    inbox.add_many(received(owner, peer, range(1, 101)))

    pages = all_pages(inbox, owner, peer, limit=50)

    assert [len(p) for p in pages] == [50, 50]
    assert inbox.page(owner, peer, None, 100).next_before is None


def test_before_returns_strictly_older_entries(inbox: Inbox, uids: Uids) -> None:
    owner, peer = uids(2)
    inbox.add_many(received(owner, peer, [10, 20, 30, 40]))

    def keys(before: int | None) -> list[int]:
        return [e.msgkey for e in inbox.page(owner, peer, before, 10).entries]

    assert keys(None) == [40, 30, 20, 10]
    assert keys(30) == [20, 10]
    assert keys(31) == [30, 20, 10]
    assert keys(10) == []
    assert keys(1 << 62) == [40, 30, 20, 10]


def test_count_and_count_after_count_only_unread_received_entries(inbox: Inbox, uids: Uids) -> None:
    owner, peer = uids(2)
    inbox.add_many(
        [
            InboxEntry(owner, peer, 10, RECEIVED),
            InboxEntry(owner, peer, 20, SENT),
            InboxEntry(owner, peer, 30, RECEIVED),
            InboxEntry(owner, peer, 40, RECEIVED, FLAG_RECALLED),
            InboxEntry(owner, peer, 50, RECEIVED),
            InboxEntry(owner, peer, 60, SENT),
        ]
    )

    assert inbox.count(owner, peer) == 6
    assert inbox.count_after(owner, peer, 0) == 3
    assert inbox.count_after(owner, peer, 10) == 2
    assert inbox.count_after(owner, peer, 30) == 1
    assert inbox.count_after(owner, peer, 50) == 0
    assert inbox.count(owner, peer + 1) == 0
    assert inbox.count_after(owner, peer + 1, 0) == 0
    # bounded above, inclusive (a rebuild counts up to the conversation's last message)
    assert inbox.count_after(owner, peer, 0, upto=30) == 2
    assert inbox.count_after(owner, peer, 0, upto=29) == 1
    assert inbox.count_after(owner, peer, 10, upto=50) == 2
    assert inbox.count_after(owner, peer, 30, upto=30) == 0
    # many at once, as a recount asks: each as count_after counts it, a repeat included
    spans = [
        (owner, peer, 0, 30),
        (owner, peer, 10, 50),
        (owner, peer + 1, 0, 99),
        (owner, peer, 0, 30),
    ]
    assert inbox.count_after_many(spans) == [2, 2, 0, 2]
    assert inbox.count_after_many([]) == []


def test_recall_many_flags_copies_recalled_in_one_write_and_keeps_them(
    inbox: Inbox, uids: Uids
) -> None:
    owner, other, peer = uids(3)
    mine = InboxEntry(owner, peer, 10, RECEIVED)
    theirs = InboxEntry(other, peer, 10, RECEIVED)
    inbox.add_many([mine, theirs, InboxEntry(owner, peer, 11, RECEIVED)])

    inbox.recall_many([mine, theirs])

    assert inbox.count(owner, peer) == 2  # still there, shown as recalled
    assert inbox.count_after(owner, peer, 0) == 1  # only the other message counts as unread
    got = inbox.get_for_owners([owner, other], peer, 10)
    assert {(e.owner, e.flags & FLAG_RECALLED) for e in got} == {(owner, 1), (other, 1)}


def test_set_flags_rewrites_flags_and_keeps_direction(inbox: Inbox, uids: Uids) -> None:
    owner, peer = uids(2)
    mine, theirs = InboxEntry(owner, peer, 10, SENT), InboxEntry(peer, owner, 10, RECEIVED)
    inbox.add_many([mine, theirs, InboxEntry(peer, owner, 20, RECEIVED)])

    inbox.set_flags([mine, theirs], FLAG_RECALLED)

    assert inbox.get(owner, peer, 10) == InboxEntry(owner, peer, 10, SENT, FLAG_RECALLED)
    assert inbox.get(peer, owner, 10) == InboxEntry(peer, owner, 10, RECEIVED, FLAG_RECALLED)
    assert inbox.count_after(peer, owner, 0) == 1
    assert inbox.count(peer, owner) == 2


def test_get_finds_exactly_one_entry(inbox: Inbox, uids: Uids) -> None:
    owner, peer = uids(2)
    inbox.add_many(received(owner, peer, [10, 12]))

    assert inbox.get(owner, peer, 10) == InboxEntry(owner, peer, 10, RECEIVED)
    assert inbox.get(owner, peer, 11) is None
    assert inbox.get(owner, peer, 13) is None
    assert inbox.get(peer, owner, 10) is None


def test_get_for_owners_returns_only_the_copies_that_exist(inbox: Inbox, uids: Uids) -> None:
    peer, *owners = uids(1201)  # more owners than one write chunk
    holders = owners[::3]
    inbox.add_many(InboxEntry(o, peer, 77, RECEIVED) for o in holders)
    inbox.add(InboxEntry(owners[1], peer, 78, RECEIVED))  # another message: not a copy of 77
    inbox.set_flags([InboxEntry(holders[0], peer, 77, RECEIVED)], FLAG_RECALLED)

    found = inbox.get_for_owners(owners, peer, 77)

    assert sorted(e.owner for e in found) == sorted(holders)
    assert {(e.peer, e.msgkey) for e in found} == {(peer, 77)}
    assert [e.flags for e in found if e.owner == holders[0]] == [FLAG_RECALLED]
    assert inbox.get_for_owners([], peer, 77) == []


def test_newest_many_gives_each_owners_newest_entry_from_the_peer(inbox: Inbox, uids: Uids) -> None:
    peer, other, *owners = uids(1202)  # more owners than one write chunk
    inbox.add_many(
        e for n, o in enumerate(owners[::2]) for e in received(o, peer, [10, 20 + n % 7])
    )
    inbox.add_many(InboxEntry(o, other, 99, RECEIVED) for o in owners)  # another peer's
    inbox.add_many([InboxEntry(owners[0], peer, 50, SENT)])  # a sent entry counts too

    newest = inbox.newest_many(owners, peer)

    expected = {o: 20 + n % 7 for n, o in enumerate(owners[::2])} | {owners[0]: 50}
    assert newest == expected  # owners holding nothing from the peer are absent
    assert inbox.newest_many([owners[1]], peer) == {}
    assert inbox.newest_many([], peer) == {}


def test_remove_deletes_the_given_messages_only(inbox: Inbox, uids: Uids) -> None:
    owner, peer, other = uids(3)
    inbox.add_many(received(owner, peer, [10, 20, 30]) + received(owner, other, [20]))
    inbox.add_many([InboxEntry(peer, owner, 20, SENT)])

    inbox.remove(owner, peer, [20, 25])  # 25 was never there: ignored

    assert [e.msgkey for e in inbox.page(owner, peer).entries] == [30, 10]
    assert inbox.get(owner, other, 20) is not None
    assert inbox.get(peer, owner, 20) is not None


def test_remove_conversation_leaves_other_conversations_and_the_peer_side(
    inbox: Inbox, uids: Uids
) -> None:
    owner, peer, other = uids(3)
    inbox.add_many(received(owner, peer, range(1, 2501)) + received(owner, other, [5]))
    inbox.add_many([InboxEntry(peer, owner, k, SENT) for k in (1, 2)])

    inbox.remove_conversation(owner, peer)

    assert inbox.count(owner, peer) == 0
    assert inbox.page(owner, peer).entries == []
    assert inbox.count(owner, other) == 1
    assert inbox.count(peer, owner) == 2
    assert inbox.peers(owner) == [other]


def test_remove_all_returns_the_peers_and_leaves_other_owners_untouched(
    inbox: Inbox, uids: Uids
) -> None:
    owner, a, b, c = uids(4)
    inbox.add_many(received(owner, a, [1, 2]) + received(owner, b, [3]) + received(owner, c, [4]))
    inbox.add_many([InboxEntry(a, owner, 1, SENT), InboxEntry(b, c, 9, RECEIVED)])

    assert sorted(inbox.remove_all(owner)) == [a, b, c]

    assert inbox.peers(owner) == []
    assert all(inbox.count(owner, p) == 0 for p in (a, b, c))
    assert inbox.get(a, owner, 1) is not None
    assert inbox.get(b, c, 9) is not None
    assert inbox.remove_all(owner) == []


def test_peers_lists_each_peer_once(inbox: Inbox, uids: Uids) -> None:
    owner, a, b = uids(3)
    inbox.add_many(received(owner, a, range(1, 40)) + received(owner, b, [7]))

    assert sorted(inbox.peers(owner)) == [a, b]
    assert inbox.peers(a) == []


def test_a_big_batch_is_written_in_one_call(inbox: Inbox, uids: Uids) -> None:
    owner, peer = uids(2)
    entries = [InboxEntry(owner, peer, k, RECEIVED if k % 3 else SENT) for k in range(1, 5001)]
    inbox.add_many(entries)

    assert inbox.count(owner, peer) == 5000
    assert inbox.count_after(owner, peer, 0) == sum(1 for e in entries if e.direction == RECEIVED)
    assert [k for p in all_pages(inbox, owner, peer, 1000) for k in p] == list(range(5000, 0, -1))


def test_owners_that_share_a_salt_byte_stay_apart(inbox: Inbox, uids: Uids) -> None:
    owner, *candidates = uids(200)
    neighbour = next(u for u in candidates if salt(u) == salt(owner))
    peer = candidates[0] if candidates[0] != neighbour else candidates[1]
    inbox.add_many(received(owner, peer, [1, 2, 3]) + received(owner, peer + 1, [4]))
    inbox.add_many(received(neighbour, peer, [5, 6]))

    assert [e.msgkey for e in inbox.page(owner, peer).entries] == [3, 2, 1]
    assert sorted(inbox.peers(owner)) == [peer, peer + 1]
    assert inbox.peers(neighbour) == [peer]
    assert sorted(inbox.remove_all(owner)) == [peer, peer + 1]
    assert [e.msgkey for e in inbox.page(neighbour, peer).entries] == [6, 5]


def test_ids_at_the_top_of_the_64_bit_range(inbox: Inbox, uid: int) -> None:
    inbox.remove_all(MAX_ID)
    top_keys = [MAX_ID, MAX_ID - 1, MAX_ID - (1 << 22)]
    inbox.add_many(received(MAX_ID, uid, [*top_keys, 1]))
    inbox.add_many([InboxEntry(uid, MAX_ID, k, SENT) for k in top_keys])
    inbox.add_many(received(MAX_ID, MAX_ID - 1, [MAX_ID]))

    assert [e.msgkey for e in inbox.page(MAX_ID, uid).entries] == [*top_keys, 1]
    assert inbox.get(MAX_ID, uid, MAX_ID) == InboxEntry(MAX_ID, uid, MAX_ID, RECEIVED)
    assert inbox.get(MAX_ID, MAX_ID - 1, MAX_ID) is not None
    assert inbox.page(MAX_ID, uid, MAX_ID, 1).entries[0].msgkey == MAX_ID - 1
    assert inbox.count_after(MAX_ID, uid, 1) == 3
    assert inbox.count_after(MAX_ID, uid, MAX_ID - 1) == 1
    assert inbox.count_after(MAX_ID, uid, MAX_ID) == 0
    assert [e.msgkey for e in inbox.page(uid, MAX_ID).entries] == top_keys
    assert sorted(inbox.peers(MAX_ID)) == [uid, MAX_ID - 1]

    inbox.remove(MAX_ID, uid, [MAX_ID])
    assert inbox.get(MAX_ID, uid, MAX_ID) is None
    assert sorted(inbox.remove_all(MAX_ID)) == [uid, MAX_ID - 1]
    assert inbox.count(uid, MAX_ID) == 3


def test_add_received_writes_one_received_entry_per_owner_idempotently(
    inbox: Inbox, uids: Uids
) -> None:
    peer, *owners = uids(2501)  # spans several write chunks
    inbox.add_received(owners, peer, 777)
    inbox.add_received(owners[:10], peer, 777)  # a redelivered batch
    inbox.add_received([], peer, 778)

    assert inbox.get_for_owners(owners, peer, 777) == [
        InboxEntry(o, peer, 777, RECEIVED) for o in owners
    ]
    assert [inbox.count(o, peer) for o in (owners[0], owners[1234], owners[-1])] == [1, 1, 1]
    assert inbox.count_after(owners[0], peer, 0) == 1
    assert inbox.peers(peer) == []  # no outbox copy


def test_add_received_keeps_other_messages_of_the_conversation(inbox: Inbox, uids: Uids) -> None:
    owner, other, peer = uids(3)
    inbox.add_many([InboxEntry(owner, peer, 5, SENT), *received(owner, peer, [6])])
    inbox.add_received([owner, other], peer, 9)

    assert [(e.msgkey, e.direction) for e in inbox.page(owner, peer).entries] == [
        (9, RECEIVED),
        (6, RECEIVED),
        (5, SENT),
    ]
    assert [e.msgkey for e in inbox.page(other, peer).entries] == [9]


# -- retention primitives ------------------------------------------------------------------------
def test_remove_before_many_empties_only_the_older_range_of_each_conversation(
    inbox: Inbox, uids: Uids
) -> None:
    owner, peer, other = uids(3)
    inbox.add_many(received(owner, peer, range(1, 2601)))  # spans several chunks
    inbox.add_many(received(owner, other, [5, 3000]))

    removed = inbox.remove_before_many([(owner, peer), (owner, other)], 2500)

    assert removed == 2499 + 1
    assert [e.msgkey for e in inbox.page(owner, peer, None, 200).entries] == list(
        range(2600, 2499, -1)
    )
    assert [e.msgkey for e in inbox.page(owner, other).entries] == [3000]
    assert inbox.remove_before(owner, peer, 2500) == 0  # idempotent


def test_count_before_counts_the_older_entries_only(inbox: Inbox, uids: Uids) -> None:
    owner, peer = uids(2)
    inbox.add_many(received(owner, peer, range(1, 1201)))

    assert inbox.count_before(owner, peer, 1101) == 1100
    assert inbox.count_before(owner, peer, 1) == 0


def test_remove_many_deletes_copies_across_conversations(inbox: Inbox, uids: Uids) -> None:
    peer, *owners = uids(1201)
    inbox.add_received(owners, peer, 42)
    inbox.add_many(received(owners[0], peer, [41]))

    inbox.remove_many(e.key for e in inbox.get_for_owners(owners, peer, 42))

    assert inbox.get_for_owners(owners, peer, 42) == []
    assert [e.msgkey for e in inbox.page(owners[0], peer).entries] == [41]
