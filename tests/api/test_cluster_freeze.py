"""One Redis Cluster master frozen (``scripts/services freeze redis-cluster-node:PORT``, SIGSTOP:
its connections stay open, nothing answers) under the production server (tests/api/test_freezes.py's
``server``), in ``make test``'s cluster pass (REDIS_CLUSTER=1).

The unread endpoint for a user whose slot is on the frozen master, and for a user on another master,
answers 200 or 503 + Retry-After, never 500, and both users read their exact counts after the thaw,
every answer within the API deadline plus the loaded test machine's slack, as in
tests/api/test_freezes.py; the other user is never refused: each primary has its own breaker
(infra/breakers.py), and the frozen one holds none of the keys every request reads. Measured: the
frozen master's user's first 503 in 2.0-3.0 s (the fast path's read timeout, then Django's), then
at once; the other user 200 in 2-3 ms (with one breaker for the whole cluster, a 503 at once
while it was open: it opened in one CI run). Before the cluster client stopped
retrying timeouts (infra/redis.py: ``_Cluster``, ``RETRY_ALONE``), the frozen master's user waited
4.0-5.0 s, each retry paying the read timeout again, until its replica was promoted. The
cluster-node-timeout (2 s) is shorter than the freeze, so the master's replica is promoted meanwhile
and a request can end as a 200 from it. What each user saw, and when, is printed (``-s``). In a
finally the master is thawed and ``scripts/services start redis-cluster`` brings back six nodes and
cluster_state:ok, before both users read their exact counts again.

A master that holds a key every unread read shares (the counters' epoch, the announcements'
version) frozen: users on the other masters still get 200 and their exact counts, unread and
conversation list alike, and a 1:1 send between two of them is accepted (infra/outages.py,
``global_key_unanswered``), also when the receiver's delivery-event stream (one of 16, sharded by
uid) is on that master: its event is published by a task once the master or its replica answers
(storage/events.py ``publish_later``, the last test). Measured: the first unread read
2.0 s (the fast path's timeout, then Django's read of the key), then 1-8 ms; before, that first
read was a 503 after 2.0-4.5 s (one more timeout when a new connection's handshake met the
frozen node: infra/redis.py ``_by_node`` let it escape the whole pipeline).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from django.conf import settings

from groups import keys as group_keys
from groups.services import group_create
from infra.redis import get_redis
from storage import events
from storage.counters import keys as unread_keys
from storage.counters.store import unread_incr_many
from tests.api.factories import inbox_api, send_api
from tests.api.test_freezes import (
    DEADLINE_S,
    FROZEN_S,
    SLACK_S,
    Answer,
    assert_unavailable_in_time,
    get,
    post,
    report,
    server,  # noqa: F401 - the fixture
    services,
)
from tests.conftest import wait_for
from tests.groups.helpers import users_api
from unread.fastpath import GLOBAL_SLOTS

pytestmark = [pytest.mark.redis_cluster, pytest.mark.faults]
Uids = Callable[[int], list[int]]
T = TypeVar("T")
PEER = 7
TEXT = {"type": "text", "text": "hi"}


def master_port(uid: int) -> int:
    return key_port(unread_keys.unread(uid))


def stream_port(uid: int) -> int:
    return key_port(events.stream_key(uid % events.SHARDS))


def key_port(key: str) -> int:
    node: Any = get_redis().get_node_from_key(key)  # type: ignore[attr-defined]
    return int(node.port)


def slot_port(slot: int) -> int:
    return int(get_redis().nodes_manager.get_node_from_slot(slot).port)  # type: ignore[attr-defined]


def two_users_on_two_masters(uids: Uids) -> tuple[int, int, int]:
    """(a user whose master is neither the seed node REDIS_URL names nor one that holds a key
    every unread request reads (the clients' generation, the announcements' version, the
    counters' epoch: their master's freeze is everyone's outage), its master's port, a user on
    another master)."""
    seed = int(settings.REDIS_URL.rsplit(":", 1)[1].split("/")[0])
    shared = {slot_port(slot) for slot in GLOBAL_SLOTS}
    candidates = uids(256)
    frozen_user = next(u for u in candidates if master_port(u) not in {seed, *shared})
    port = master_port(frozen_user)
    other = next(u for u in candidates if master_port(u) != port)
    return frozen_user, port, other


def test_one_frozen_master_answers_503_in_time_for_its_users_never_500(
    server: int,  # noqa: F811 - the fixture imported above
    uids: Uids,
) -> None:
    assert settings.REDIS_CLUSTER, "run with REDIS_CLUSTER=1 (make test's cluster pass)"
    frozen_user, port, other = two_users_on_two_masters(uids)
    for uid in (frozen_user, other):
        unread_incr_many(owner_uids=[uid], peer_uid=PEER, category="followed", marker=None)
    bff = inbox_api("bff-cluster-freeze")
    mine, theirs = f"/users/{frozen_user}/unread", f"/users/{other}/unread"
    assert get(server, mine, bff.token).body["total"] == 1  # warm: the principal is cached
    assert get(server, theirs, bff.token).body["total"] == 1
    services("freeze", f"redis-cluster-node:{port}")
    try:
        started, during = time.monotonic(), list[Answer]()
        with ThreadPoolExecutor(4) as pool:  # no answers enough at once to open a breaker
            burst = list(pool.map(lambda _: get(server, mine, bff.token), range(4)))
        while time.monotonic() - started < FROZEN_S or len(during) < 6:
            during += [get(server, mine, bff.token), get(server, theirs, bff.token)]
    finally:
        thaw_and_settle(port)
    report(f"Cluster master :{port} frozen: its user's unread, 4 at once", burst)
    report("  then its user's unread", during[::2])
    report("  meanwhile, a user on another master", during[1::2])
    print("  sequence:", [(a.status, round(a.seconds, 3)) for a in during][:24])
    theirs_answers = during[1::2]
    during += burst
    assert all(a.status in (200, 503) for a in during), [a.body for a in during]
    # its own master's breaker opened, not the other user's: never a 503 for them
    assert [a.status for a in theirs_answers] == [200] * len(theirs_answers)
    for path in (mine, theirs):
        wait_for(lambda: total(get(server, path, bff.token)) == 1, timeout=30, every=0.5)  # noqa: B023
    assert all(a.seconds < DEADLINE_S + SLACK_S for a in during), "answered after the deadline"
    assert_unavailable_in_time([a for a in during if a.status != 200])


def thaw_and_settle(port: int) -> None:
    """Thaw the master and bring back six nodes and cluster_state:ok (its replica may have won:
    this process's client reads the new roles, or its next FLUSHDB would meet a replica)."""
    services("thaw", f"redis-cluster-node:{port}")
    services("start", "redis-cluster")
    get_redis().nodes_manager.initialize()  # type: ignore[attr-defined]


def total(answer: Answer) -> int | None:
    return int(answer.body["total"]) if answer.status == 200 else None


GLOBAL_KEYS = {"epoch": unread_keys.EPOCH, "announcements": "ann:{ann}:ver"}


@pytest.mark.parametrize("holding", sorted(GLOBAL_KEYS))
def test_a_frozen_master_holding_a_global_key_refuses_no_user_of_another_master(
    server: int,  # noqa: F811 - the fixture imported above
    uids: Uids,
    holding: str,
) -> None:
    """The master holding a key every unread request reads (the counters' epoch, the
    announcements' version) is frozen: a user whose own keys live on another master still reads
    their unread counts and conversation list, 200 every time, and exact."""
    assert settings.REDIS_CLUSTER, "run with REDIS_CLUSTER=1 (make test's cluster pass)"
    port = slot_port(get_redis().keyslot(GLOBAL_KEYS[holding]))  # type: ignore[attr-defined]
    other, peer = [u for u in uids(256) if master_port(u) != port][:2]
    unread_incr_many(owner_uids=[other], peer_uid=PEER, category="followed", marker=None)
    bff, sender = inbox_api(f"bff-global-{holding}"), send_api(f"send-global-{holding}", [peer])
    unread, listing = f"/users/{other}/unread", f"/users/{other}/conversations"
    assert get(server, unread, bff.token).body["total"] == 1  # warm: the principal is cached
    assert get(server, listing, bff.token).status == 200
    services("freeze", f"redis-cluster-node:{port}")
    try:
        started, during = time.monotonic(), list[Answer]()
        while time.monotonic() - started < FROZEN_S or len(during) < 6:
            during += [get(server, unread, bff.token), get(server, listing, bff.token)]
        message = {"sender_uid": peer, "receiver_uid": other, "client_msg_id": "during"}
        send = post(server, "/messages", sender.token, {**message, "content": TEXT})
    finally:
        thaw_and_settle(port)
    report(f"Cluster master :{port} ({holding}) frozen: another user's unread", during[::2])
    report("  and their conversation list", during[1::2])
    print("  sequence:", [(a.status, round(a.seconds, 3)) for a in during][:24])
    assert [a.status for a in during] == [200] * len(during), [a.body for a in during]
    assert [a.body["total"] for a in during[::2]] == [1] * len(during[::2])
    assert send.status == 201, send.body  # a 1:1 send between two such users is accepted
    wait_for(lambda: total(get(server, unread, bff.token)) == 2, timeout=30, every=0.5)


def once_frozen(port: int, request: Callable[[], T]) -> T:
    """``request``'s result, made once master ``port`` is frozen; the freeze held FROZEN_S in
    all (its replica is promoted meanwhile), then thawed and the cluster settled."""
    services("freeze", f"redis-cluster-node:{port}")
    try:
        started = time.monotonic()
        result = request()
        time.sleep(max(0.0, FROZEN_S - (time.monotonic() - started)))
    finally:
        thaw_and_settle(port)
    return result


def published(receiver: int, msgkey: int) -> bool:
    shard = receiver % events.SHARDS
    return any(
        d.msgkey == msgkey and receiver in d.uids
        for d in events.read_deliveries(shard, count=100_000)
    )


def group_published(gid: int, msgkey: int) -> bool:
    shard = events.group_shard(gid)
    entries: list[Any] = get_redis().xrange(events.group_stream_key(shard), count=100_000)  # type: ignore[assignment]
    return any(int(fields[b"msgkey"]) == msgkey for _, fields in entries)


def group_streamed_on(port: int, owner: int, member: int) -> int:
    """A new group of ``owner`` and ``member`` whose event stream is on master ``port`` and
    whose head is not: its gid."""
    for _ in range(64):
        group, _ = group_create(owner_uid=owner, name="g", member_uids=[member])
        stream = key_port(events.group_stream_key(events.group_shard(group.gid)))
        if stream == port != key_port(group_keys.head(group.gid)):
            return group.gid
    raise AssertionError(f"no group with its event stream on :{port} and its head elsewhere")


def test_sends_whose_event_streams_are_on_a_frozen_master_are_accepted_and_events_follow(
    server: int,  # noqa: F811 - the fixture imported above
    uids: Uids,
    workers: Any,
) -> None:
    """The receiver's and the sender's own keys, and a group's head, on healthy masters; the
    receiver's delivery-event stream (sharded by uid) and the group's (by gid) on the frozen
    one. A 1:1 send and a group send are accepted (before, 503s until the replica took over),
    counted once, and their events reach the streams from ``messaging.events_publish`` and
    ``groups.events_publish`` once that master or its replica answers."""
    assert settings.REDIS_CLUSTER, "run with REDIS_CLUSTER=1 (make test's cluster pass)"
    candidates = uids(256)
    receiver = next(u for u in candidates if stream_port(u) != master_port(u))
    port = stream_port(receiver)
    sender = next(
        u
        for u in candidates
        if u != receiver and port not in {master_port(u), key_port(group_keys.member(u))}
    )
    gid = group_streamed_on(port, sender, receiver)
    # groups' tasks go there too; INFO: each retry of a publish left for later is logged
    workers.start(queues="messaging", concurrency=1, loglevel="INFO")
    bff, client = inbox_api("bff-events-freeze"), send_api("send-events-freeze", [sender])
    users = users_api("users-events-freeze")
    unread = f"/users/{receiver}/unread"
    assert get(server, unread, bff.token).body["total"] == 0  # warm: the principal is cached
    message = {"sender_uid": sender, "receiver_uid": receiver, "client_msg_id": "evt"}
    grouped = {"sender_uid": sender, "client_msg_id": "gevt", "content": TEXT}

    def both() -> tuple[Answer, Answer]:
        direct = post(server, "/messages", client.token, {**message, "content": TEXT})
        return direct, post(server, f"/groups/{gid}/messages", users.token, grouped)

    direct, group = once_frozen(port, both)
    report(f"Cluster master :{port} (the event streams) frozen: a 1:1 send", [direct])
    report("  then a group send", [group])
    assert (direct.status, group.status) == (201, 201), (direct.body, group.body)
    assert max(direct.seconds, group.seconds) < DEADLINE_S + SLACK_S, "answered after the deadline"
    wait_for(lambda: published(receiver, int(direct.body["msgkey"])), timeout=60, every=0.5)
    wait_for(lambda: group_published(gid, int(group.body["msgkey"])), timeout=60, every=0.5)
    # the 1:1 message and the group's, each counted once
    wait_for(lambda: total(get(server, unread, bff.token)) == 2, timeout=30, every=0.5)
    assert total(get(server, unread, bff.token)) == 2
    groups = f"/users/{receiver}/groups"  # once this process's breaker of that master closes
    listed = wait_for(lambda: ok(get(server, groups, users.token)), timeout=30, every=0.5)
    assert {g["gid"]: g["unread"] for g in listed.body["results"]}[str(gid)] == 1


def ok(answer: Answer) -> Answer | None:
    return answer if answer.status == 200 else None
