"""Group services (groups/services.py): the send's cost does not grow with the group,
seqs have no gaps under concurrent senders, an interrupted send is finished exactly once, and the
Redis head and positions are rebuilt from MySQL when Redis lost them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from api.errors import NotFound
from groups import services, state
from groups.models import GroupMessage
from groups.selectors import group_history, group_unread, user_groups
from infra.redis import get_redis
from storage.events import SHARDS, group_shard, group_stream_key
from storage.timelines import get_timeline
from tests.groups.helpers import backend

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]
__all__ = ["backend"]
TEXT = {"type": "text", "text": "hello"}


def group_of(uids: Uids, size: int) -> tuple[int, list[int]]:
    owner, *members = uids(size)
    group, _ = services.group_create(owner_uid=owner, name="g", member_uids=members)
    return group.gid, [owner, *members]


def send(gid: int, sender: int, cmid: str, **extra: Any) -> services.GroupSendResult:
    return services.group_message_send(
        gid=gid, sender_uid=sender, content=TEXT, client_msg_id=cmid, **extra
    )


def cost(gid: int, members: list[int], sender: int, cmid: str) -> tuple[int, int]:
    """(SQL queries, Redis keys added that name the group or one of its members) of one send.
    Keys are told apart by name, not counted with DBSIZE: a background fill an earlier test
    asked for may still write some other owner's cached list meanwhile."""
    redis = get_redis()
    keys_before = set(redis.scan_iter(count=10_000))
    with CaptureQueriesContext(connection) as queries:
        send(gid, sender, cmid)
    added = {k.decode() for k in set(redis.scan_iter(count=10_000)) - keys_before}
    names = [str(gid), *map(str, members)]
    return len(queries), sum(any(n in key for n in names) for key in added)


def test_a_send_costs_the_same_into_10_and_1000_members(backend: str, uids: Uids) -> None:
    small, small_members = group_of(uids, 10)
    large, large_members = group_of(uids, 1000)
    send(small, small_members[0], "warm-s")  # the delivery stream exists from here on
    send(large, large_members[0], "warm-l")

    small_cost = cost(small, small_members, small_members[1], "s")
    large_cost = cost(large, large_members, large_members[1], "l")

    assert small_cost == large_cost
    assert small_cost[1] == 0  # nothing per member: no key appears for anyone
    assert small_cost[0] <= 12, small_cost
    assert group_unread(large_members[-1]).unread == 2


def test_a_send_publishes_one_delivery_event_whatever_the_size(uids: Uids) -> None:
    gid, members = group_of(uids, 300)
    stream = group_stream_key(group_shard(gid))
    before = get_redis().xlen(stream)
    sent = send(gid, members[5], "e")
    send(gid, members[5], "e")  # a replay publishes nothing more

    events: list[tuple[bytes, dict[bytes, bytes]]] = get_redis().xrange(stream)  # type: ignore[assignment]
    assert len(events) == before + 1
    fields = events[-1][1]
    assert (fields[b"gid"], fields[b"seq"]) == (str(gid).encode(), b"1")
    assert fields[b"msgkey"] == str(sent.row.msgkey).encode()


def test_a_mention_writes_one_marker_per_mentioned_member(uids: Uids) -> None:
    gid, members = group_of(uids, 50)
    send(gid, members[0], "m", mentions=members[1:4])

    mentioned = [group_unread(u).mentions for u in members[1:6]]
    assert mentioned == [1, 1, 1, 0, 0]


@pytest.mark.django_db(transaction=True)  # the senders' threads commit for real
def test_concurrent_senders_get_every_seq_once(backend: str, uids: Uids) -> None:
    gid, members = group_of(uids, 4)
    seqs: list[int] = []
    errors: list[BaseException] = []

    def worker(sender: int) -> None:
        try:
            for i in range(10):
                seqs.append(send(gid, sender, f"{sender}-{i}").row.seq)
                send(gid, sender, f"{sender}-{i}")  # a retry in between takes nothing
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(m,)) for m in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    assert sorted(seqs) == list(range(1, 41))
    page = group_history(members[0], gid, limit=100)
    assert [i.seq for i in page.results] == list(range(40, 0, -1))


def test_groups_made_one_after_another_spread_their_events_over_the_streams(uids: Uids) -> None:
    """gids are msgkeys, whose low bits are 0 for nearly every group made a millisecond or more
    after the last: sharded by ``gid % 16``, 300 of 300 such groups shared one stream."""
    made = []
    for _ in range(48):
        gid, (owner, _member) = group_of(uids, 2)
        time.sleep(0.002)  # groups made a few at a time, as users make them
        made.append(send(gid, owner, "s").row.msgkey)
    shards = set()
    for shard in range(SHARDS):
        entries: list[Any] = get_redis().xrange(group_stream_key(shard))  # type: ignore[assignment]
        if any(int(fields[b"msgkey"]) in made for _, fields in entries):
            shards.add(shard)
    assert len(shards) >= 8, shards  # 16 streams; a CRC-32 of 48 gids fills ~15


def test_a_send_interrupted_after_its_commit_is_finished_once(
    backend: str, uids: Uids, monkeypatch: pytest.MonkeyPatch
) -> None:
    gid, (owner, member) = group_of(uids, 2)

    def redis_down(sent: state.Sent) -> None:
        raise ConnectionError("redis went away")

    monkeypatch.setattr(state, "apply_send", redis_down)
    with pytest.raises(ConnectionError):
        send(gid, owner, "c-1")
    monkeypatch.undo()
    assert GroupMessage.objects.get(gid=gid, seq=1).completed is False

    assert services.sends_complete_stalled(older_than_s=-60) == 1
    assert services.sends_complete_stalled(older_than_s=-60) == 0
    assert group_unread(member).unread == 1
    assert send(gid, owner, "c-1").created is False
    assert send(gid, owner, "c-2").row.seq == 2
    assert [i.seq for i in group_history(member, gid).results] == [2, 1]


def test_stalled_group_sends_never_block_each_other(
    backend: str, uids: Uids, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep visits every stalled send a page at a time: one it cannot finish this pass is
    left for the next, and the sends behind a full page of such ones are still finished."""
    gid, (owner, member) = group_of(uids, 2)

    def redis_down(sent: state.Sent) -> None:
        raise ConnectionError("redis went away")

    monkeypatch.setattr(state, "apply_send", redis_down)
    for cmid in ("broken-1", "broken-2", "fine-3", "fine-4"):
        with pytest.raises(ConnectionError):
            send(gid, owner, cmid)
    monkeypatch.undo()
    complete = services._complete

    def fails_for_broken(row: GroupMessage, message: Any, *, timeline_done: bool) -> None:
        if row.client_msg_id.startswith("broken"):  # cannot be finished this pass, whatever why
            raise RuntimeError("cannot be finished this pass")
        complete(row, message, timeline_done=timeline_done)

    monkeypatch.setattr(services, "_complete", fails_for_broken)
    # pages of 2: the two broken sends fill the first, the two fine ones the second
    assert services.sends_complete_stalled(older_than_s=-60, limit=2) == 2
    pending = GroupMessage.objects.filter(gid=gid, completed=False)
    assert sorted(pending.values_list("seq", flat=True)) == [1, 2]
    monkeypatch.undo()
    assert services.sends_complete_stalled(older_than_s=-60, limit=2) == 2
    assert services.sends_complete_stalled(older_than_s=-60, limit=2) == 0
    assert group_unread(member).unread == 4
    assert [i.seq for i in group_history(member, gid).results] == [4, 3, 2, 1]


def test_a_history_read_shows_sends_the_timeline_lacks_and_writes_nothing(
    backend: str, uids: Uids, monkeypatch: pytest.MonkeyPatch
) -> None:
    gid, (owner, member) = group_of(uids, 2)
    send(gid, owner, "a")

    def redis_down(sent: state.Sent) -> None:
        raise ConnectionError("redis went away")

    monkeypatch.setattr(state, "apply_send", redis_down)
    for cmid in ("b", "c", "d"):
        with pytest.raises(ConnectionError):
            send(gid, owner, cmid)
    monkeypatch.undo()
    get_timeline().remove(gid, [2, 4])  # the timeline outside SQL is written after the commit
    services.group_message_hide(gid=gid, uid=member, seq=3)

    assert [i.seq for i in group_history(member, gid).results] == [4, 2, 1]
    assert [i.seq for i in group_history(member, gid, limit=2).results] == [4, 2]
    page = group_history(member, gid, before_seq=4, limit=1)
    assert ([i.seq for i in page.results], page.next_cursor) == ([2], "2")
    assert [e.seq for e in get_timeline().page(gid).entries] == [3, 1]  # the read wrote nothing
    assert services.sends_complete_stalled(older_than_s=-60) == 3
    assert [e.seq for e in get_timeline().page(gid).entries] == [4, 3, 2, 1]


def test_heads_and_positions_come_back_after_redis_loses_them(backend: str, uids: Uids) -> None:
    gid, (owner, member, other) = group_of(uids, 3)
    send(gid, owner, "a")
    send(gid, owner, "b", mentions=[member])
    recalled = send(gid, owner, "c")
    services.group_message_recall(gid=gid, seq=recalled.row.seq, actor_uid=owner)
    services.group_mark_read(gid=gid, uid=other, upto_seq=1)
    before = {u: group_unread(u) for u in (member, other)}

    get_redis().flushdb()

    after = {u: group_unread(u) for u in (member, other)}
    assert after == before
    assert (after[member].unread, after[member].mentions) == (2, 1)
    assert after[other].unread == 1
    item = user_groups(member)[0]
    assert (item.max_seq, item.last_message and item.last_message["preview"]) == (3, "[recalled]")


def test_joins_retried_after_redis_failed_still_give_positions(
    uids: Uids, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner, member, late = uids(3)
    real = state.positions_set

    def redis_down(*args: object, **kwargs: object) -> None:
        raise ConnectionError("redis went away")

    monkeypatch.setattr(state, "positions_set", redis_down)
    with pytest.raises(ConnectionError):
        services.group_create(
            owner_uid=owner, name="g", member_uids=[member], client_id=1, idempotency_key="k"
        )
    monkeypatch.setattr(state, "positions_set", real)
    group, created = services.group_create(
        owner_uid=owner, name="g", member_uids=[member], client_id=1, idempotency_key="k"
    )
    assert not created
    monkeypatch.setattr(state, "positions_set", redis_down)
    with pytest.raises(ConnectionError):
        services.group_members_add(gid=group.gid, actor_uid=owner, uids=[late])
    monkeypatch.setattr(state, "positions_set", real)
    again = services.group_members_add(gid=group.gid, actor_uid=owner, uids=[late])
    assert (again.added, again.already_members) == (0, 1)

    send(group.gid, owner, "hello")
    assert [group_unread(u).unread for u in (member, late)] == [1, 1]


def test_dissolve_takes_the_group_from_everyone(uids: Uids) -> None:
    gid, members = group_of(uids, 3)
    send(gid, members[0], "bye")
    services.group_dissolve(gid=gid)

    assert user_groups(members[1]) == []
    assert group_unread(members[1]).unread == 0
    with pytest.raises(NotFound):
        send(gid, members[0], "more")
