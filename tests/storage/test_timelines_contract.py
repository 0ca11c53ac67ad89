"""The group-timeline contract (storage.timelines.base.GroupTimeline): one suite, every
backend passes it unchanged. HBase tables are shared between tests and runs, so every test writes
under fresh gids."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from storage.timelines import GroupEntry, GroupTimeline, timeline_for
from storage.timelines.base import FLAG_RECALLED
from storage.timelines.hbase import group_prefix

pytestmark = pytest.mark.django_db

Uids = Callable[[int], list[int]]


@pytest.fixture(params=["sql", "hbase"])
def timeline(request: pytest.FixtureRequest) -> GroupTimeline:
    return timeline_for(request.param)


def entries(gid: int, seqs: range | list[int], sender: int = 7) -> list[GroupEntry]:
    return [GroupEntry(gid, s, 1_000_000 + s, sender) for s in seqs]


def all_pages(timeline: GroupTimeline, gid: int, limit: int) -> list[list[int]]:
    pages, before = [], None
    while True:
        page = timeline.page(gid, before, limit)
        pages.append([e.seq for e in page.entries])
        if page.next_before is None:
            return pages
        before = page.next_before


def test_the_same_entry_written_twice_is_one_entry(timeline: GroupTimeline, uid: int) -> None:
    entry = GroupEntry(uid, 1, 42, 9)
    timeline.add_many([entry, entry])
    timeline.add(entry)
    timeline.add_many([])

    assert timeline.count(uid) == 1
    assert timeline.page(uid).entries == [entry]


def test_pages_run_newest_first_and_cover_every_entry_exactly_once(
    timeline: GroupTimeline, uid: int
) -> None:
    timeline.add_many(entries(uid, range(1, 238)))

    pages = all_pages(timeline, uid, limit=50)

    assert [len(p) for p in pages] == [50, 50, 50, 50, 37]
    flat = [s for p in pages for s in p]
    assert flat == list(range(237, 0, -1))


def test_a_page_before_a_seq_starts_just_below_it(timeline: GroupTimeline, uid: int) -> None:
    timeline.add_many(entries(uid, range(1, 11)))

    assert [e.seq for e in timeline.page(uid, 6, 3).entries] == [5, 4, 3]
    assert timeline.page(uid, 1, 10).entries == []
    assert timeline.page(uid, 0, 10).entries == []
    page = timeline.page(uid, 4, 3)
    assert ([e.seq for e in page.entries], page.next_before) == ([3, 2, 1], None)


def test_get_finds_one_entry_and_nothing_else(timeline: GroupTimeline, uids: Uids) -> None:
    gid, other = uids(2)
    timeline.add_many(entries(gid, [1, 2, 5]))
    timeline.add_many(entries(other, [3]))

    assert timeline.get(gid, 2) == GroupEntry(gid, 2, 1_000_002, 7)
    assert timeline.get(gid, 3) is None
    assert timeline.get(other, 3) is not None
    assert timeline.get(uids(1)[0], 1) is None


def test_flags_rewrite_an_entry_in_place(timeline: GroupTimeline, uid: int) -> None:
    timeline.add_many(entries(uid, range(1, 4)))
    target = timeline.get(uid, 2)
    assert target is not None
    assert not target.recalled

    timeline.set_flags([target], FLAG_RECALLED)

    found = timeline.get(uid, 2)
    assert found is not None
    assert found.recalled
    assert (found.msgkey, found.sender_uid) == (target.msgkey, target.sender_uid)
    assert timeline.count(uid) == 3


def test_groups_are_apart_even_in_one_salt_region(timeline: GroupTimeline, uids: Uids) -> None:
    candidates = uids(64)
    salt = group_prefix(candidates[0])[0]
    same = [g for g in candidates if group_prefix(g)[0] == salt][:2]
    if len(same) < 2:
        same = candidates[:2]
    first, second = same
    timeline.add_many(entries(first, range(1, 6)))
    timeline.add_many(entries(second, range(1, 3)))

    assert [e.seq for e in timeline.page(first).entries] == [5, 4, 3, 2, 1]
    assert [e.seq for e in timeline.page(second).entries] == [2, 1]


def test_remove_and_remove_group(timeline: GroupTimeline, uid: int) -> None:
    timeline.add_many(entries(uid, range(1, 2501)))

    timeline.remove(uid, [2500, 3])
    assert timeline.count(uid) == 2498
    assert timeline.get(uid, 3) is None

    timeline.remove_group(uid)
    assert timeline.count(uid) == 0
    assert timeline.page(uid).entries == []


def test_the_largest_ids_round_trip(timeline: GroupTimeline) -> None:
    gid, seq, big = (1 << 63) - 1, (1 << 62), (1 << 63) - 1
    timeline.remove_group(gid)
    entry = GroupEntry(gid, seq, big, big, FLAG_RECALLED)
    timeline.add(entry)

    assert timeline.get(gid, seq) == entry
    assert timeline.page(gid).entries == [entry]
    timeline.remove_group(gid)
