"""A frozen store never hangs the API: on the production server (gunicorn + uvicorn serving
``config.asgi``, so the API's timeouts, config/settings.py STORE_TIMEOUTS) and the real services,
a store stopped with ``scripts/services freeze`` (SIGSTOP: connections stay open, nothing answers)
and resumed with ``thaw`` (always, in a finally).

- Redis frozen: the unread endpoint and a campaign's status answer 503 + ``Retry-After``, each
  within the API deadline; once Redis' circuit breaker is open, at once. After the thaw both
  answer 200 again.
- MariaDB frozen (REPLICA_FALLBACK off): a history read answers 503 within the deadline, while
  the unread fast path, which needs no SQL, still answers 200; so does the unread of a user whose
  counters are due a repair (the counters' epoch moved), which waits for MariaDB.
- MariaDB's primary frozen with the read replica up: the conversation list, history and a
  campaign's status answer 200 from the replica (api/fallback.py), a send 503.

Latencies are printed (``-s``), not asserted beyond "answered within the deadline plus slack".
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from infra.dbrouter import PRIMARY, REPLICA
from infra.redis import get_redis
from storage.counters import keys as counter_keys
from storage.counters.store import unread_incr_many
from tests.api.factories import inbox_api, send_api
from tests.bulk.helpers import business_with_followers, campaigns_api, launch
from tests.config.test_asgi import api_server
from tests.conftest import services, wait_for
from tests.dbreplica import wait_for_replica

pytestmark = pytest.mark.faults
Uids = Callable[[int], list[int]]
FROZEN_S = 4.0
DEADLINE_S = 2.5  # the API's: about 2 s (a store's connect + read timeouts), plus scheduling
SLACK_S = 2.0  # a loaded 2-core test machine


@pytest.fixture
def server(transactional_db: Any) -> Iterator[int]:
    """One uvicorn worker under gunicorn (an API process) on the test database; its port."""
    with api_server() as port:
        yield port


@pytest.fixture
def server_without_fallback(transactional_db: Any) -> Iterator[int]:
    """The same, with REPLICA_FALLBACK off: a read the primary fails answers 503 (the replica
    would answer it otherwise: test_mariadb_primary_frozen_reads_are_served_by_the_replica...)."""
    with api_server(REPLICA_FALLBACK="0") as port:
        yield port


class Answer:
    def __init__(self, status: int, body: Any, retry_after: str | None, seconds: float) -> None:
        self.status, self.body, self.retry_after, self.seconds = status, body, retry_after, seconds


def get(port: int, path: str, token: str) -> Answer:
    return call(port, "GET", path, token)


def post(port: int, path: str, token: str, body: dict[str, Any]) -> Answer:
    return call(port, "POST", path, token, body)


def call(port: int, method: str, path: str, token: str, body: Any = None) -> Answer:
    """One API request to the server on ``port``: its status, body, Retry-After and seconds."""
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Authorization": f"Bearer {token}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, "/api/v1" + path, None if body is None else json.dumps(body), headers)
        response = conn.getresponse()
        raw = response.read()
        answer = json.loads(raw) if raw else None  # a 204 has no body
        seconds = time.monotonic() - started
        return Answer(response.status, answer, response.getheader("Retry-After"), seconds)
    finally:
        conn.close()


def assert_unavailable_in_time(answers: list[Answer]) -> None:
    for a in answers:
        assert (a.status, a.body["error"]) == (503, "unavailable"), a.body
        assert int(a.retry_after or 0) >= 1
        assert a.seconds < DEADLINE_S + SLACK_S, f"answered after {a.seconds:.2f} s"


def report(what: str, answers: list[Answer]) -> None:
    statuses = sorted({a.status for a in answers})
    first = ", ".join(f"{a.seconds:.3f}" for a in answers[:4])
    rest = max((a.seconds for a in answers[4:]), default=0.0)
    print(f"\n{what}: {len(answers)} answers {statuses}, first [{first}] s, then max {rest:.3f} s")


def test_redis_frozen_the_unread_and_campaign_status_answer_503_in_time(
    server: int, uids: Uids
) -> None:
    uid, *shop = uids(3)
    bff = inbox_api("bff-freeze")
    campaign = launch(business_with_followers(shop))
    manager = campaigns_api(shop[0])
    unread, status = f"/users/{uid}/unread", f"/campaigns/{campaign.pk}"
    assert get(server, unread, bff.token).status == 200  # warm: the principal is cached
    assert get(server, status, manager.token).status == 200
    services("freeze", "redis")
    try:
        started = time.monotonic()
        during = []
        while time.monotonic() - started < FROZEN_S:
            during += [get(server, unread, bff.token), get(server, status, manager.token)]
    finally:
        services("thaw", "redis")
    report("Redis frozen: unread, campaign status alternately", during)
    assert_unavailable_in_time(during[::2])
    # a campaign's status degrades to its ledger's counts (bulk/live.py) or is 503, never a 500
    assert {a.status for a in during[1::2]} <= {200, 503}
    assert all(a.seconds < DEADLINE_S + SLACK_S for a in during[1::2])
    assert max(a.seconds for a in during[-4:]) < 0.5  # the breaker is open: fail fast
    unread_incr_many(owner_uids=[uid], peer_uid=shop[0], category="followed", marker=None, delta=2)
    wait_for(lambda: get(server, unread, bff.token).status == 200, timeout=15, every=0.5)
    assert get(server, unread, bff.token).body["total"] == 2
    assert get(server, status, manager.token).body["id"] == str(campaign.pk)


def test_mariadb_frozen_history_is_503_in_time_and_unread_still_answers(
    server_without_fallback: int, uids: Uids
) -> None:
    server = server_without_fallback
    alice, bob = uids(2)
    send_api("shop", [alice]).sent(alice, bob)
    bff = inbox_api("bff-freeze-db")
    history, unread = f"/users/{bob}/conversations/{alice}/messages", f"/users/{bob}/unread"
    assert get(server, history, bff.token).status == 200
    assert get(server, unread, bff.token).body["total"] == 1  # warm: the fast path answers
    services("freeze", "mariadb")
    try:
        reads = [get(server, history, bff.token) for _ in range(4)]
        counts = [get(server, unread, bff.token) for _ in range(3)]
    finally:
        services("thaw", "mariadb")
    report("MariaDB frozen: history", reads)
    report("MariaDB frozen: unread", counts)
    assert_unavailable_in_time(reads)
    assert reads[-1].seconds < 0.5  # MariaDB's breaker is open: fail fast
    assert [(a.status, a.body["total"]) for a in counts] == [(200, 1)] * 3
    wait_for(lambda: get(server, history, bff.token).status == 200, timeout=15, every=0.5)


def test_mariadb_frozen_past_the_breakers_reset_no_request_waits_for_its_pings(
    transactional_db: Any, uids: Uids
) -> None:
    """With the breaker's reset time at 1 s, a 5-s freeze holds several pings (BREAKER_PING_S,
    0.5 s) that MariaDB does not answer. They run off the requests' path: every request after
    the two that opened the breaker answers 503 at once, none waits for a ping or a timeout, and
    the breaker stays open. After the thaw the next ping answers and the probe closes it: 200
    again within about a second (the reset time), not after the whole reset time and a probe's
    timeout."""
    alice, bob = uids(2)
    send_api("shop", [alice]).sent(alice, bob)
    bff = inbox_api("bff-freeze-ping")
    history = f"/users/{bob}/conversations/{alice}/messages"
    with api_server(REPLICA_FALLBACK="0", BREAKER_RESET_S="1") as server:
        assert get(server, history, bff.token).status == 200
        services("freeze", "mariadb")
        try:
            opening = [get(server, history, bff.token) for _ in range(2)]
            started, probed = time.monotonic(), []
            while time.monotonic() - started < 5:
                probed.append(get(server, history, bff.token))
        finally:
            services("thaw", "mariadb")
        thawed, after = time.monotonic(), list[Answer]()
        while not after or after[-1].status != 200:
            after.append(get(server, history, bff.token))
            assert time.monotonic() - thawed < 15, after[-1].body
        back_s = time.monotonic() - thawed
        report("MariaDB frozen: the two that open the breaker", opening)
        report("MariaDB frozen: the breaker open, pinged every 1 s", probed)
        report(f"MariaDB thawed: until the first 200 ({back_s:.2f} s)", after)
        assert_unavailable_in_time(opening + probed)
        assert min(a.seconds for a in opening) > 0.9  # each waited: read timeout 2 s, connect 1 s
        assert len(probed) > 20
        assert max(a.seconds for a in probed) < 0.4  # not one ping's 0.5 s, no timeout
        assert all(a.status == 503 for a in after[:-1])
        assert back_s < 2.5  # the reset time (1 s), a ping and the probe; never a timeout


@pytest.fixture
def server_putting_repairs_off_2_s(transactional_db: Any) -> Iterator[int]:
    """An API process that puts unread repairs off 2 s after one met an outage (30 by default)."""
    with api_server(UNREAD_REPAIRS_PUT_OFF_S="2") as port:
        yield port


def test_mariadb_frozen_a_user_due_a_repair_still_gets_their_unread_then_is_repaired(
    server_putting_repairs_off_2_s: int, uids: Uids
) -> None:
    """After the counters' epoch moved (a Redis restart), a user's first read repairs their
    counters from MariaDB and the inbox; with MariaDB frozen the repair is put off and the read
    answers the counters Redis holds, not 503; a read once the put-off time is over repairs."""
    server = server_putting_repairs_off_2_s
    alice, bob, carol = uids(3)
    send_api("shop-epoch", [alice]).sent(alice, bob)
    bff = inbox_api("bff-freeze-epoch")
    moved = f"moved-{bob}"
    get_redis().set(counter_keys.EPOCH, moved)  # what check_restart does after a restart
    assert get(server, f"/users/{carol}/unread", bff.token).status == 200  # the token is cached
    services("freeze", "mariadb")
    try:
        counts = [get(server, f"/users/{bob}/unread", bff.token) for _ in range(3)]
    finally:
        services("thaw", "mariadb")
    report("MariaDB frozen: unread of a user due a repair", counts)
    assert [(a.status, a.body.get("total")) for a in counts] == [(200, 1)] * 3, counts[0].body
    assert all(a.seconds < DEADLINE_S + SLACK_S for a in counts)
    assert get_redis().get(counter_keys.verified(bob)) is None  # still due its repair

    def repaired() -> bool:
        get(server, f"/users/{bob}/unread", bff.token)  # a read tries the put-off repair
        return get_redis().get(counter_keys.verified(bob)) == moved.encode()

    wait_for(repaired, timeout=15, every=0.5)
    assert get(server, f"/users/{bob}/unread", bff.token).body["total"] == 1


def reads_while_the_primary_is_frozen(port: int, uids: Uids) -> tuple[list[Answer], Answer]:
    """Bob has a message from Alice, a shop a campaign: their reads (conversation list, history,
    campaign status) for FROZEN_S with MariaDB's primary frozen, and one send meanwhile."""
    alice, bob, *shop = uids(4)
    send_api("shop-fallback", [alice]).sent(alice, bob, "before the freeze")
    campaign = launch(business_with_followers(shop))
    bff, manager, sender = inbox_api("bff-fallback"), campaigns_api(shop[0]), send_api("s", [bob])
    paths = [
        (f"/users/{bob}/conversations", bff.token),
        (f"/users/{bob}/conversations/{alice}/messages", bff.token),
        (f"/campaigns/{campaign.pk}", manager.token),
    ]
    assert [get(port, path, token).status for path, token in paths] == [200] * 3  # principals
    wait_for_replica()
    services("freeze", "mariadb")
    try:
        started, during = time.monotonic(), list[Answer]()
        while time.monotonic() - started < FROZEN_S or len(during) < 2 * len(paths):
            during += [get(port, path, token) for path, token in paths]
        message = {"sender_uid": bob, "receiver_uid": alice, "client_msg_id": "during"}
        send = post(port, "/messages", sender.token, {**message, "content": {"text": "x"}})
    finally:
        services("thaw", "mariadb")
    return during, send


@pytest.mark.django_db(transaction=True, databases=[PRIMARY, REPLICA])
def test_mariadb_primary_frozen_reads_are_served_by_the_replica_and_writes_are_503(
    uids: Uids,
) -> None:
    with api_server() as port:
        during, send = reads_while_the_primary_is_frozen(port, uids)
    report("primary frozen: conversation list, history, campaign status in turn", during)
    assert [a.status for a in during] == [200] * len(during)
    assert all(a.seconds < DEADLINE_S + SLACK_S for a in during)
    assert max(a.seconds for a in during[-3:]) < 0.5  # the primary's breaker open: at once
    conversations, history, status = during[-3:]
    assert [item["kind"] for item in conversations.body["results"]] == ["direct"]
    assert [m["content"]["text"] for m in history.body["results"]] == ["before the freeze"]
    assert status.body["status"] in ("running", "finished", "paused")
    assert (send.status, send.body["error"]) == (503, "unavailable")


@pytest.mark.django_db(transaction=True, databases=[PRIMARY, REPLICA])
def test_replica_frozen_reads_answer_200_in_time_from_the_primary(uids: Uids) -> None:
    """The replica frozen (SIGSTOP: its connections open, nothing answers), not killed: every
    read the API would send it (conversation list, history, campaign status) answers 200 within
    the deadline, from the primary, and sends are accepted."""
    alice, bob = uids(2)
    shop = send_api("shop-replica-freeze", [alice])
    shop.sent(alice, bob, "before the freeze")
    bff = inbox_api("bff-replica-freeze")
    scenario = business_with_followers(uids(3))
    campaign = launch(scenario)
    owner = campaigns_api(scenario.sender)
    wait_for_replica()
    reads = [
        (bff.token, f"/users/{bob}/conversations"),
        (bff.token, f"/users/{bob}/conversations/{alice}/messages"),
        (owner.token, f"/campaigns/{campaign.pk}"),
    ]
    with api_server() as port:
        for token, path in reads:  # warm: the replica serves them
            assert get(port, path, token).status == 200
        services("freeze", "mariadb-replica")
        try:
            during = [get(port, path, token) for _ in range(3) for token, path in reads]
            message = {"sender_uid": alice, "receiver_uid": bob, "client_msg_id": "during"}
            text = {"type": "text", "text": "x"}
            send = post(port, "/messages", shop.token, {**message, "content": text})
        finally:
            services("thaw", "mariadb-replica")
    report("replica frozen: conversation list, history, campaign status in turn", during)
    assert [a.status for a in during] == [200] * len(during)
    assert all(a.seconds < DEADLINE_S + SLACK_S for a in during)
    assert max(a.seconds for a in during[3:]) < 0.5  # the replica's breaker open: the primary
    history = during[-2].body["results"]
    assert [m["content"]["text"] for m in history] == ["before the freeze"]
    assert send.status == 201, send.body
