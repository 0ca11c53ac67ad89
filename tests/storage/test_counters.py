"""Unread counters through their Lua scripts: idempotent, never negative, totals equal parts."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from infra.redis import by_user_slot, clustered, get_redis, primaries
from storage.counters import keys
from storage.counters.store import (
    SERIES_TTL_S,
    SLICES,
    Replaced,
    Sequenced,
    unread_add,
    unread_clear_all,
    unread_for_peers,
    unread_incr,
    unread_incr_many,
    unread_replace,
    unread_set,
    unread_summary,
)

Uids = Callable[[int], list[int]]


def counters(uid: int) -> dict[str, int]:
    """The raw unread hash of ``uid`` (categories as ``c:<name>``, peers as ``p:<uid>``)."""
    raw = cast("dict[bytes, bytes]", get_redis().hgetall(keys.unread(uid)))
    return {k.decode(): int(v) for k, v in raw.items() if not k.startswith(keys.KIND_PREFIX)}


def assert_consistent(uid: int) -> dict[str, int]:
    """``t`` == sum of ``p:`` fields == sum of ``c:`` fields, nothing negative, no zero fields."""
    fields = counters(uid)
    peers = sum(v for k, v in fields.items() if k.startswith("p:"))
    categories = sum(v for k, v in fields.items() if k.startswith("c:"))
    assert fields.get("t", 0) == peers == categories, fields
    assert all(v > 0 for v in fields.values()), fields
    return fields


def test_incr_many_counts_one_message_for_every_owner(uids: Uids) -> None:
    sender, *owners = uids(4)

    changed = unread_incr_many(owner_uids=owners, peer_uid=sender, category="business", marker="b1")

    assert changed == 3
    for owner in owners:
        assert assert_consistent(owner) == {"t": 1, "c:business": 1, f"p:{sender}": 1}


def test_incr_many_with_a_marker_applies_once(uids: Uids) -> None:
    sender, *owners = uids(3)
    unread_incr_many(owner_uids=owners, peer_uid=sender, category="stranger", marker="batch-7")
    before = [counters(o) for o in owners]

    again = unread_incr_many(
        owner_uids=owners, peer_uid=sender, category="stranger", marker="batch-7"
    )

    assert again == 0
    assert [counters(o) for o in owners] == before
    assert unread_summary(owners[0]).total == 1


def test_a_series_of_batches_counts_each_batch_once_in_one_bitmap_a_slot(uids: Uids) -> None:
    """A campaign's batches as ``Sequenced`` markers: each batch counts once however often it
    is replayed, and the whole series keeps one marker key per slot (per slice on one Redis),
    not one per batch, each living 30 days from the series' first batch."""
    sender, *owners = uids(401)
    series = f"b:test{sender}"
    for seq in (0, 1, 2, 1000, 0, 2, 1000):  # four batches to the same owners, three replayed
        unread_incr_many(
            owner_uids=owners, peer_uid=sender, category="business", marker=Sequenced(series, seq)
        )
    assert {unread_summary(o).total for o in owners} == {4}
    marker_keys = _keys(f"unread:appliedbits:*{series}*")
    slots_or_slices = len(by_user_slot(owners)) if clustered() else SLICES
    assert len(marker_keys) == slots_or_slices
    ttl = get_redis().ttl(marker_keys[0])
    assert SERIES_TTL_S - 60 < ttl <= SERIES_TTL_S
    assert [
        unread_incr_many(
            owner_uids=owners, peer_uid=sender, category="business", marker=Sequenced(series, n)
        )
        for n in (1000, 1001)
    ] == [0, 400]


def _keys(pattern: str) -> list[bytes]:
    client = get_redis()
    if clustered():
        found: list[bytes] = []
        for node in primaries():
            found += node.redis_connection.keys(pattern)
        return found
    return cast("list[bytes]", client.keys(pattern))


def test_incr_without_a_marker_counts_every_call(uids: Uids) -> None:
    owner, peer = uids(2)
    for _ in range(3):
        unread_incr(owner_uid=owner, peer_uid=peer, category="followed", marker=None)

    assert unread_for_peers(owner, [peer]) == {peer: 3}
    assert assert_consistent(owner)["t"] == 3


def test_counts_never_go_below_zero(uids: Uids) -> None:
    owner, peer, other = uids(3)
    unread_incr(owner_uid=owner, peer_uid=peer, category="stranger", marker=None)
    unread_incr(owner_uid=owner, peer_uid=other, category="stranger", marker=None)

    unread_incr_many(owner_uids=[owner], peer_uid=peer, category="stranger", marker=None, delta=-5)
    unread_add(owner_uid=owner, peer_uid=other, category="stranger", delta=-3)
    unread_add(owner_uid=owner, peer_uid=other, category="stranger", delta=-1)
    unread_set(owner_uid=owner, peer_uid=peer, category="stranger", count=-2)

    assert unread_for_peers(owner, [peer, other]) == {peer: 0, other: 0}
    assert assert_consistent(owner) == {}
    assert unread_summary(owner).by_category["stranger"] == 0


def test_set_and_add_keep_totals_equal_to_their_parts(uids: Uids) -> None:
    owner, a, b = uids(3)
    assert unread_set(owner_uid=owner, peer_uid=a, category="followed", count=4) == 4
    assert unread_add(owner_uid=owner, peer_uid=b, category="stranger", delta=2) == 2
    assert unread_add(owner_uid=owner, peer_uid=a, category="followed", delta=-1) == 3

    summary = unread_summary(owner)

    assert summary.total == 5
    assert summary.by_category == {"followed": 3, "stranger": 2, "business": 0, "system": 0}
    assert summary.by_peer == {a: 3, b: 2}
    assert_consistent(owner)


def test_a_conversation_that_changes_category_moves_its_whole_count(uids: Uids) -> None:
    owner, peer = uids(2)
    unread_incr(owner_uid=owner, peer_uid=peer, category="stranger", marker="m1")
    unread_incr(owner_uid=owner, peer_uid=peer, category="stranger", marker="m2")
    # the owner follows the peer: the next message files the conversation under "followed"
    unread_incr(owner_uid=owner, peer_uid=peer, category="followed", marker="m3")

    assert unread_summary(owner).by_category == {
        "followed": 3,
        "stranger": 0,
        "business": 0,
        "system": 0,
    }
    unread_set(owner_uid=owner, peer_uid=peer, category="followed", count=0)
    assert unread_summary(owner).by_category == dict.fromkeys(
        ("followed", "stranger", "business", "system"), 0
    )
    assert assert_consistent(owner) == {}


def test_reading_everything_leaves_no_hash_behind(uids: Uids) -> None:
    owner, peer = uids(2)
    unread_incr(owner_uid=owner, peer_uid=peer, category="system", marker=None)

    unread_set(owner_uid=owner, peer_uid=peer, category="system", count=0)

    assert get_redis().exists(keys.unread(owner)) == 0


def test_clear_all_forgets_every_count(uids: Uids) -> None:
    owner, a, b = uids(3)
    unread_incr(owner_uid=owner, peer_uid=a, category="stranger", marker=None)
    unread_incr(owner_uid=owner, peer_uid=b, category="business", marker=None)

    unread_clear_all(owner_uid=owner)

    assert unread_summary(owner).total == 0
    assert unread_for_peers(owner, [a, b]) == {a: 0, b: 0}


def test_replace_installs_the_new_counts_and_reports_the_drift(uids: Uids) -> None:
    owner, a, b, c = uids(4)
    unread_set(owner_uid=owner, peer_uid=a, category="stranger", count=5)
    unread_set(owner_uid=owner, peer_uid=b, category="followed", count=2)

    replaced = unread_replace(
        owner_uid=owner,
        counts=[(a, "stranger", 3, 0), (b, "followed", 2, 0), (c, "business", 4, 0)],
    )

    # a: 5 -> 3 (drift 2), b unchanged, c: 0 -> 4 (drift 4)
    assert replaced == Replaced(old_total=7, new_total=9, conversations_changed=2, drift=6)
    assert unread_summary(owner).by_peer == {a: 3, b: 2, c: 4}
    assert unread_summary(owner).by_category == {
        "followed": 2,
        "stranger": 3,
        "business": 4,
        "system": 0,
    }
    assert_consistent(owner)


def test_replace_with_nothing_unread_clears_stale_counts(uids: Uids) -> None:
    owner, a = uids(2)
    unread_set(owner_uid=owner, peer_uid=a, category="stranger", count=3)

    replaced = unread_replace(owner_uid=owner, counts=[(a, "stranger", 0, 0)])

    assert replaced == Replaced(old_total=3, new_total=0, conversations_changed=1, drift=3)
    assert get_redis().exists(keys.unread(owner)) == 0
    assert unread_replace(owner_uid=owner, counts=[]) == Replaced(0, 0, 0, 0)


def test_counters_stay_exact_after_replace_then_more_changes(uids: Uids) -> None:
    owner, a = uids(2)
    unread_replace(owner_uid=owner, counts=[(a, "stranger", 2, 0)])

    unread_incr(owner_uid=owner, peer_uid=a, category="followed", marker="after-rebuild")
    unread_add(owner_uid=owner, peer_uid=a, category="followed", delta=-1)

    assert assert_consistent(owner) == {"t": 2, "c:followed": 2, f"p:{a}": 2}
