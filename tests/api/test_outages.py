"""A store that does not answer is a 503 with ``Retry-After``, never a 500, and names no internals;
the client's retry with the same ``client_msg_id`` then finishes the send exactly once.

The outages are real: the settings point HBase's Thrift gateway, or Redis, at a loopback port where
nothing listens (connection refused), exactly what a stopped gateway looks like to a client.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import OperationalError
from django.test import override_settings
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ResponseError

from api.exceptions import api_exception_handler
from infra import breakers, hbase
from infra.redis import get_redis
from messaging import services
from storage.inbox import _cached
from tests.api.factories import API, Api, inbox_api, send_api

pytestmark = pytest.mark.django_db
INTERNALS = ("hbase", "redis", "mysql", "thrift", "127.0.0.1", "9090", "6379")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def hbase_inbox() -> Iterator[None]:
    with override_settings(INBOX_BACKEND="hbase"):
        _cached.cache_clear()
        yield
    _cached.cache_clear()


def outage(**dead: Any) -> Iterator[Callable[[], None]]:
    """The settings in ``dead`` until the returned function brings the store back."""
    override = override_settings(**dead)
    override.enable()
    reconnect()
    state = {"down": True}

    def back() -> None:
        if state["down"]:
            override.disable()
            reconnect()
            state["down"] = False

    yield back
    back()


def reconnect() -> None:
    hbase.reset_pools()
    get_redis.cache_clear()
    breakers.reset()  # the store is back (or newly gone): no breaker remembers the other


@pytest.fixture
def hbase_down(hbase_inbox: None) -> Iterator[Callable[[], None]]:
    """HBase unreachable until the returned function brings it back."""
    yield from outage(HBASE={**settings.HBASE, "PORT": closed_port(), "TIMEOUT_MS": 2000})


@pytest.fixture
def redis_down() -> Iterator[Callable[[], None]]:
    """Redis unreachable until the returned function brings it back."""
    yield from outage(REDIS_URL=f"redis://127.0.0.1:{closed_port()}/2")


def call(api: Api, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any], str]:
    response = api.http.generic(
        method, API + path, json.dumps(body) if body is not None else "", "application/json"
    )
    return response.status_code, json.loads(response.content), response.get("Retry-After", "")


def assert_unavailable(status: int, body: dict[str, Any], retry_after: str) -> None:
    assert status == 503, body
    assert body["error"] == "unavailable"
    assert int(retry_after) >= 1
    assert not any(word in body["detail"].lower() for word in INTERNALS), body["detail"]


def send_body(alice: int, bob: int) -> dict[str, Any]:
    content = {"type": "text", "text": "through the outage"}
    return {"sender_uid": alice, "receiver_uid": bob, "content": content, "client_msg_id": "o-1"}


def test_a_send_while_hbase_is_down_is_503_and_its_retry_delivers_once(
    uids: Callable[[int], list[int]], hbase_down: Callable[[], None]
) -> None:
    alice, bob = uids(2)
    sender, bff = send_api("shop", [alice]), inbox_api()
    assert_unavailable(*call(sender, "POST", "/messages", send_body(alice, bob)))
    hbase_down()
    status, first, _ = call(sender, "POST", "/messages", send_body(alice, bob))
    assert status == 200, first  # the original, finished now
    status, again, _ = call(sender, "POST", "/messages", send_body(alice, bob))
    assert (status, again["msgkey"]) == (200, first["msgkey"])
    history = bff.history(bob, alice)["results"]
    assert [m["msgkey"] for m in history] == [first["msgkey"]]
    assert [m["msgkey"] for m in bff.history(alice, bob)["results"]] == [first["msgkey"]]
    assert bff.unread(bob)["total"] == 1


def test_a_send_the_outage_interrupted_is_finished_without_the_client(
    uids: Callable[[int], list[int]], hbase_down: Callable[[], None]
) -> None:
    alice, bob = uids(2)
    sender, bff = send_api("shop", [alice]), inbox_api()
    assert call(sender, "POST", "/messages", send_body(alice, bob))[0] == 503
    assert bff.conversations(bob)["results"] == []  # stored content, no copy yet
    hbase_down()
    assert services.sends_complete_stalled(older_than_s=0) == 1
    assert services.sends_complete_stalled(older_than_s=0) == 0  # finished for good
    [copy] = bff.history(bob, alice)["results"]
    assert bff.unread(bob)["total"] == 1
    status, replay, _ = call(sender, "POST", "/messages", send_body(alice, bob))
    assert (status, replay["msgkey"]) == (200, copy["msgkey"])
    assert bff.unread(bob)["total"] == 1


def test_reading_history_while_hbase_is_down_is_503(
    uids: Callable[[int], list[int]], hbase_inbox: None
) -> None:
    alice, bob = uids(2)
    send_api("shop", [alice]).sent(alice, bob)
    bff = inbox_api()
    with override_settings(HBASE={**settings.HBASE, "PORT": closed_port(), "TIMEOUT_MS": 2000}):
        hbase.reset_pools()
        assert_unavailable(*call(bff, "GET", f"/users/{bob}/conversations/{alice}/messages"))
    reconnect()
    assert len(bff.history(bob, alice)["results"]) == 1


def test_unread_while_redis_is_down_is_503_then_exact(
    uids: Callable[[int], list[int]], redis_down: Callable[[], None]
) -> None:
    alice, bob = uids(2)
    bff = inbox_api()
    assert_unavailable(*call(bff, "GET", f"/users/{bob}/unread"))
    redis_down()
    send_api("shop", [alice]).sent(alice, bob)
    assert bff.unread(bob)["total"] == 1


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (RedisConnectionError("Connection refused"), 503),
        (OperationalError(2006, "MySQL server has gone away"), 503),
        (OperationalError(2013, "Lost connection to MySQL server during query"), 503),
        (OperationalError("database is locked"), 503),
        (OperationalError(1054, "Unknown column 'x' in 'field list'"), None),  # a bug: 500
        (ResponseError("ERR Error running script"), None),  # a bug: 500
        (OutOfMemoryError("command not allowed when used memory > 'maxmemory'."), 503),
        (ResponseError("MISCONF Redis is configured to save RDB snapshots, but ..."), 503),
    ],
)
def test_only_store_outages_become_503(exc: Exception, status: int | None) -> None:
    response = api_exception_handler(exc, {})
    assert (response.status_code if response is not None else None) == status
