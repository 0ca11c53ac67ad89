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
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.conf import settings

from infra.redis import get_redis
from storage.counters import keys as unread_keys
from storage.counters.store import unread_incr_many
from tests.api.factories import inbox_api
from tests.api.test_freezes import (
    DEADLINE_S,
    FROZEN_S,
    SLACK_S,
    Answer,
    assert_unavailable_in_time,
    get,
    report,
    server,  # noqa: F401 - the fixture
    services,
)
from tests.conftest import wait_for
from unread.fastpath import GLOBAL_SLOTS

pytestmark = [pytest.mark.redis_cluster, pytest.mark.faults]
Uids = Callable[[int], list[int]]
PEER = 7


def master_port(uid: int) -> int:
    node: Any = get_redis().get_node_from_key(unread_keys.unread(uid))  # type: ignore[attr-defined]
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
        services("thaw", f"redis-cluster-node:{port}")
        services("start", "redis-cluster")  # six nodes, cluster_state:ok (a replica may have won)
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


def total(answer: Answer) -> int | None:
    return int(answer.body["total"]) if answer.status == 200 else None
