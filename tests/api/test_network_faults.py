"""A network fault between Missive and MariaDB, from toxiproxy (``scripts/services start
toxiproxy``): the production server (tests/api/test_freezes.py's ``server``) reaches the test
database through a proxy, and a ``timeout`` toxic turns that path into a black hole (nothing
passes, nothing is closed), what a partition looks like. Sends answer 503 within the API's
deadline, then at once once MariaDB's breaker is open; history reads answer 200 from the read
replica, which is not behind the proxy (api/fallback.py); the unread fast path, which needs no
SQL, still answers 200; with the toxic removed sends are accepted again.

The same with ``reset_peer`` (every connection to the store closed with a RST as soon as it
carries data) on MariaDB's path and on Redis's, ``limit_data`` (each connection closed once it
carried 100 bytes from the store: replies cut in the middle) on every store's path, and a 1 ms
``latency`` on Redis's: a reset or cut path answers 503 (or 200/201 when a retry got through, or
the replica answered), never 500 and never after the deadline; 1 ms changes no answer. HBase's
Thrift gateway on the HBase inbox, black-holed: history reads answer 503 within the deadline,
then at once (HBase's breaker), unread still 200, and the same history afterwards; reset or cut:
503 or 200/201, never 500, and every send accepted is in the history after.
Each test removes its toxics (and the fixtures their proxies) in a finally.
"""

from __future__ import annotations

import http.client
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from infra.dbrouter import PRIMARY, REPLICA
from tests.api.factories import ClientApi, inbox_api, send_api
from tests.api.test_freezes import (
    DEADLINE_S,
    SLACK_S,
    Answer,
    assert_unavailable_in_time,
    get,
    post,
    report,
    services,
)
from tests.config.test_asgi import api_server, database_url, free_port
from tests.conftest import wait_for
from tests.dbreplica import wait_for_replica

pytestmark = pytest.mark.faults
Uids = Callable[[int], list[int]]
TOXIPROXY = ("127.0.0.1", 8474)


def toxiproxy(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    conn = http.client.HTTPConnection(*TOXIPROXY, timeout=5)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None)
        response = conn.getresponse()
        raw = response.read()
        assert response.status < 300, raw
        return json.loads(raw) if raw else None
    finally:
        conn.close()


@contextmanager
def toxic(proxy: str, kind: str, stream: str = "upstream", **attributes: int) -> Iterator[None]:
    """One toxic on a stream of ``proxy`` (client-to-store unless said), removed on the way out;
    ``timeout`` with 0 on ``downstream`` is a black hole: nothing passes, nothing is closed."""
    body = {"name": kind, "type": kind, "stream": stream, "attributes": attributes}
    toxiproxy("POST", f"/proxies/{proxy}/toxics", body)
    try:
        yield
    finally:
        toxiproxy("DELETE", f"/proxies/{proxy}/toxics/{kind}")


@contextmanager
def proxy(kind: str, upstream: str) -> Iterator[tuple[str, int]]:
    """A toxiproxy proxy to ``upstream`` on a free loopback port: (its name, its port)."""
    services("start", "toxiproxy")
    name, port = f"{kind}-{os.getpid()}", free_port()
    toxiproxy(
        "POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{port}", "upstream": upstream}
    )
    try:
        yield name, port
    finally:
        toxiproxy("DELETE", f"/proxies/{name}")


def redis_upstream(url: str) -> tuple[str, str]:
    """A Redis URL's ``host:port`` and database number (``make test`` runs these tests on a
    Redis of their own, not on :6379)."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 6379}", parts.path.strip("/") or "0"


@pytest.fixture
def mariadb_proxy() -> Iterator[tuple[str, int]]:
    """A proxy to the primary on a free loopback port: (proxy name, port)."""
    db = settings.DATABASES[PRIMARY]
    with proxy("mariadb", f"{db['HOST']}:{db['PORT'] or 3306}") as found:
        yield found


@pytest.fixture
def proxied_server(transactional_db: Any, mariadb_proxy: tuple[str, int]) -> Iterator[int]:
    """An API process (gunicorn + uvicorn) whose primary database is behind the proxy."""
    with api_server(DATABASE_URL=database_url("127.0.0.1", mariadb_proxy[1])) as port:
        yield port


@pytest.mark.django_db(transaction=True, databases=[PRIMARY, REPLICA])
def test_a_black_holed_mariadb_path_sends_are_503_in_time_reads_come_from_the_replica(
    proxied_server: int, mariadb_proxy: tuple[str, int], uids: Uids
) -> None:
    """Only the primary is behind the proxy: its black hole makes a send 503 within the
    deadline, while history is read from the replica (api/fallback.py) and unread from Redis."""
    alice, bob = uids(2)
    send_api("shop", [alice]).sent(alice, bob)
    bff, shop = inbox_api("bff-toxic"), send_api("shop-toxic", [bob])
    history, unread = f"/users/{bob}/conversations/{alice}/messages", f"/users/{bob}/unread"
    assert get(proxied_server, history, bff.token).status == 200
    assert get(proxied_server, unread, bff.token).status == 200  # warm: the fast path answers
    wait_for_replica()
    with toxic(mariadb_proxy[0], "timeout", "downstream", timeout=0):
        sends = [
            post(proxied_server, "/messages", shop.token, message(bob, alice, f"b{n}"))
            for n in range(3)
        ]
        reads = [get(proxied_server, history, bff.token) for _ in range(4)]
        counts = [get(proxied_server, unread, bff.token) for _ in range(3)]
    report("MariaDB black-holed (toxiproxy timeout): sends", sends)
    report("MariaDB black-holed (toxiproxy timeout): history", reads)
    assert_unavailable_in_time(sends)
    assert sends[-1].seconds < 0.5  # MariaDB's breaker is open: fail fast
    assert [a.status for a in reads] == [200] * 4
    assert all(a.seconds < 0.5 for a in reads)  # the primary fails at once: the replica reads
    assert [m["msgkey"] for m in reads[-1].body["results"]] != []
    assert [(a.status, a.body["total"]) for a in counts] == [(200, 1)] * 3
    wait_for(
        lambda: (
            post(proxied_server, "/messages", shop.token, message(bob, alice, "b2")).status == 201
        ),
        timeout=15,
        every=0.5,
    )


# -- reset_peer and latency: MariaDB's path and Redis's ----------------------------------------
def message(sender: int, receiver: int, cmid: str) -> dict[str, Any]:
    content = {"type": "text", "text": "hi"}
    return {
        "sender_uid": sender,
        "receiver_uid": receiver,
        "content": content,
        "client_msg_id": cmid,
    }


@dataclass(frozen=True)
class Fault:
    """A toxic for a scene: its kind, the stream it acts on, its attributes, how it is named."""

    kind: str
    stream: str
    attributes: dict[str, int]
    label: str


RESET = Fault("reset_peer", "upstream", {"timeout": 0}, "reset (toxiproxy reset_peer)")
# each connection closed once it has carried 100 bytes from the store: the first reply longer
# than that is cut in the middle (a handshake too: MariaDB's greeting is about that long)
CUT = Fault("limit_data", "downstream", {"bytes": 100}, "cut after 100 bytes (limit_data)")


def reset_scene(
    store: str,
    server: int,
    proxy: str,
    read: tuple[str, str, int],
    sender_token: str,
    alice: int,
    bob: int,
    fault: Fault = RESET,
) -> int:
    """With every connection to ``store`` reset (toxiproxy ``reset_peer``), or another ``fault``:
    ``read[2]`` reads of ``read[0]`` with token ``read[1]``, then two 1:1 sends from alice to
    bob; each answered in time, never 500. Returns how many sends were accepted (201)."""
    path, token, count = read
    with toxic(proxy, fault.kind, fault.stream, **fault.attributes):
        reads = [get(server, path, token) for _ in range(count)]
        tag = f"{store.split()[0].lower()}-"
        sends = [
            post(server, "/messages", sender_token, message(alice, bob, f"{tag}{i}"))
            for i in (1, 2)
        ]
    report(f"{store} path {fault.label}: {path.rsplit('/', 1)[-1]}", reads)
    report(f"{store} path {fault.label}: 1:1 send", sends)
    assert_never_500_nor_late(reads, 200)
    assert_never_500_nor_late(sends, 201)
    return sum(a.status == 201 for a in sends)


def assert_never_500_nor_late(answers: list[Answer], ok: int) -> None:
    for a in answers:
        assert a.status in (ok, 503), a.body
        assert a.status == ok or a.body["error"] == "unavailable"
        assert a.seconds < DEADLINE_S + SLACK_S, f"answered after {a.seconds:.2f} s"


@pytest.fixture
def redis_proxy() -> Iterator[tuple[str, int]]:
    """A proxy to the data Redis on a free loopback port: (proxy name, port)."""
    with proxy("redis", redis_upstream(settings.REDIS_URL)[0]) as found:
        yield found


@pytest.fixture
def redis_proxied_server(transactional_db: Any, redis_proxy: tuple[str, int]) -> Iterator[int]:
    """An API process whose data Redis (same database number as the tests') is behind the proxy."""
    number = redis_upstream(settings.REDIS_URL)[1]
    with api_server(REDIS_URL=f"redis://127.0.0.1:{redis_proxy[1]}/{number}") as port:
        yield port


@pytest.mark.parametrize("fault", [RESET, CUT], ids=["reset", "cut"])
def test_a_reset_or_cut_redis_path_answers_503_never_500_and_counts_every_send_it_accepted(
    redis_proxied_server: int, redis_proxy: tuple[str, int], uids: Uids, fault: Fault
) -> None:
    alice, bob = uids(2)
    shop = send_api("shop-reset", [alice])
    bff = inbox_api("bff-reset")
    unread = f"/users/{bob}/unread"
    assert (
        post(redis_proxied_server, "/messages", shop.token, message(alice, bob, "r0")).status == 201
    )
    assert get(redis_proxied_server, unread, bff.token).body["total"] == 1
    accepted = reset_scene(
        "Redis",
        redis_proxied_server,
        redis_proxy[0],
        (unread, bff.token, 4),
        shop.token,
        alice,
        bob,
        fault,
    )
    wait_for(lambda: get(redis_proxied_server, unread, bff.token).status == 200, timeout=15)
    assert get(redis_proxied_server, unread, bff.token).body["total"] >= 1 + accepted


def test_one_ms_more_to_redis_changes_no_answer(
    redis_proxied_server: int, redis_proxy: tuple[str, int], uids: Uids
) -> None:
    alice, bob = uids(2)
    shop = send_api("shop-latency", [alice])
    bff = inbox_api("bff-latency")
    with toxic(redis_proxy[0], "latency", latency=1, jitter=0):
        sends = [
            post(redis_proxied_server, "/messages", shop.token, message(alice, bob, f"l{i}"))
            for i in range(3)
        ]
        counts = [get(redis_proxied_server, f"/users/{bob}/unread", bff.token) for _ in range(3)]
    report("Redis path +1 ms (toxiproxy latency): 1:1 send", sends)
    report("Redis path +1 ms (toxiproxy latency): unread", counts)
    assert [a.status for a in sends] == [201] * 3
    assert [(a.status, a.body["total"]) for a in counts] == [(200, 3)] * 3


def test_a_reset_mariadb_path_answers_503_never_500_and_unread_still_answers(
    proxied_server: int, mariadb_proxy: tuple[str, int], uids: Uids
) -> None:
    alice, bob = uids(2)
    send_api("shop", [alice]).sent(alice, bob)
    bff = inbox_api("bff-reset-db")
    history, unread = f"/users/{bob}/conversations/{alice}/messages", f"/users/{bob}/unread"
    assert get(proxied_server, history, bff.token).status == 200
    assert get(proxied_server, unread, bff.token).status == 200
    with toxic(mariadb_proxy[0], "reset_peer", timeout=0):
        reads = [get(proxied_server, history, bff.token) for _ in range(4)]
        counts = [get(proxied_server, unread, bff.token) for _ in range(3)]
    report("MariaDB path reset (toxiproxy reset_peer): history", reads)
    assert_never_500_nor_late(reads, 200)
    assert [(a.status, a.body["total"]) for a in counts] == [(200, 1)] * 3
    wait_for(lambda: get(proxied_server, history, bff.token).status == 200, timeout=15, every=0.5)


@pytest.mark.django_db(transaction=True, databases=[PRIMARY, REPLICA])
def test_a_cut_mariadb_path_answers_503_never_500_reads_come_from_the_replica(
    proxied_server: int, mariadb_proxy: tuple[str, int], uids: Uids
) -> None:
    """Each connection to the primary closed after 100 bytes (a reply cut in the middle, a new
    connection's handshake cut): sends answer 201 or 503, never 500; the history answers 200
    (from the replica when the primary's reply was cut); the sends accepted are all in it, and
    each send retried with its client_msg_id afterwards is there once."""
    alice, bob = uids(2)
    shop, bff = send_api("shop-cut-db", [alice]), inbox_api("bff-cut-db")
    history = f"/users/{bob}/conversations/{alice}/messages"
    assert post(proxied_server, "/messages", shop.token, message(alice, bob, "c0")).status == 201
    wait_for_replica()
    assert get(proxied_server, history, bff.token).status == 200
    accepted = reset_scene(
        "MariaDB",
        proxied_server,
        mariadb_proxy[0],
        (history, bff.token, 4),
        shop.token,
        alice,
        bob,
        CUT,
    )
    wait_for(lambda: get(proxied_server, history, bff.token).status == 200, timeout=15, every=0.5)
    assert len(get(proxied_server, history, bff.token).body["results"]) >= 1 + accepted
    for i in (1, 2):  # the client retries each send with its client_msg_id until accepted
        body = message(alice, bob, f"mariadb-{i}")
        wait_for(
            lambda: post(proxied_server, "/messages", shop.token, body).status in (200, 201),  # noqa: B023
            timeout=15,
            every=0.5,
        )
    wait_for_replica()
    assert len(get(proxied_server, history, bff.token).body["results"]) == 3  # each stored once


# -- HBase's Thrift gateway behind the proxy (the HBase inbox) ----------------------------------
@pytest.fixture
def hbase_proxy() -> Iterator[tuple[str, int]]:
    """A proxy to the HBase Thrift gateway on a free loopback port: (proxy name, port)."""
    with proxy("hbase", f"{settings.HBASE['HOST']}:{settings.HBASE['PORT']}") as found:
        yield found


@pytest.fixture
def hbase_proxied_server(transactional_db: Any, hbase_proxy: tuple[str, int]) -> Iterator[int]:
    """An API process on the HBase inbox whose Thrift gateway is behind the proxy."""
    env = {"INBOX_BACKEND": "hbase", "HBASE_THRIFT_HOST": "127.0.0.1"}
    with api_server(**env, HBASE_THRIFT_PORT=str(hbase_proxy[1])) as port:
        yield port


@dataclass
class Conversation:
    """Alice's shop has sent Bob one message through the server; the history's path."""

    alice: int
    bob: int
    shop: ClientApi
    bff: ClientApi
    history: str


def first_message(server: int, uids: Uids, name: str) -> Conversation:
    alice, bob = uids(2)
    shop, bff = send_api(f"shop-{name}", [alice]), inbox_api(f"bff-{name}")
    assert post(server, "/messages", shop.token, message(alice, bob, f"{name}-0")).status == 201
    return Conversation(alice, bob, shop, bff, f"/users/{bob}/conversations/{alice}/messages")


def test_a_black_holed_hbase_path_is_503_in_time_and_unread_still_answers(
    hbase_proxied_server: int, hbase_proxy: tuple[str, int], uids: Uids
) -> None:
    server, c = hbase_proxied_server, first_message(hbase_proxied_server, uids, "hbase")
    before = get(server, c.history, c.bff.token)
    assert [m["content"]["text"] for m in before.body["results"]] == ["hi"]
    with toxic(hbase_proxy[0], "timeout", "downstream", timeout=0):
        reads = [get(server, c.history, c.bff.token) for _ in range(4)]
        counts = [get(server, f"/users/{c.bob}/unread", c.bff.token) for _ in range(3)]
    report("HBase Thrift black-holed (toxiproxy timeout): history", reads)
    assert_unavailable_in_time(reads)
    assert reads[-1].seconds < 0.5  # HBase's breaker is open: fail fast
    assert [(a.status, a.body["total"]) for a in counts] == [(200, 1)] * 3
    wait_for(lambda: get(server, c.history, c.bff.token).status == 200, timeout=15, every=0.5)
    assert get(server, c.history, c.bff.token).body["results"] == before.body["results"]


@pytest.mark.parametrize("fault", [RESET, CUT], ids=["reset", "cut"])
def test_a_reset_or_cut_hbase_path_answers_503_never_500_and_loses_no_accepted_send(
    hbase_proxied_server: int, hbase_proxy: tuple[str, int], uids: Uids, fault: Fault
) -> None:
    server = hbase_proxied_server
    c = first_message(server, uids, f"hbase-{fault.kind}")
    read = (c.history, c.bff.token, 3)
    accepted = reset_scene(
        "HBase Thrift", server, hbase_proxy[0], read, c.shop.token, c.alice, c.bob, fault
    )
    wait_for(lambda: get(server, c.history, c.bff.token).status == 200, timeout=15, every=0.5)
    assert len(get(server, c.history, c.bff.token).body["results"]) >= 1 + accepted
