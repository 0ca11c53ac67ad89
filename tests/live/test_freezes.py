"""A frozen Redis never leaves a device waiting: with Redis stopped by ``scripts/services freeze``
(SIGSTOP: connections open, nothing answers), a device that connects is closed with 1013 ("try
again later") within the opening's deadline (``LIVE_OPEN_TIMEOUT_S``, 2 s) instead of waiting
for a ``hello`` Redis cannot give. Once Redis is thawed (always, in a finally), the same token
opens the connection, and a device that stayed connected through the freeze gets the next
message.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from live.consumers import CLOSE_TRY_LATER
from tests.conftest import services, wait_for
from tests.live.conftest import FRAME_TIMEOUT_S, Http, Opener, ws_url

pytestmark = [pytest.mark.live, pytest.mark.faults]
Backend = tuple[Http, Http]
OPEN_DEADLINE_S = 2.0  # LIVE_OPEN_TIMEOUT_S' default
SLACK_S = 2.0  # a loaded 2-core test machine


def opening(port: int, token: str) -> tuple[str, float]:
    """What a connection gets first: ``hello`` or ``closed <code>``, and after how long."""
    started = time.monotonic()
    with connect(ws_url(port, token), open_timeout=FRAME_TIMEOUT_S) as ws:
        try:
            first = ws.recv(timeout=FRAME_TIMEOUT_S)
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
            return f"closed {code}", time.monotonic() - started
        except TimeoutError:
            return "nothing", time.monotonic() - started
    return ("hello" if '"hello"' in str(first) else str(first)), time.monotonic() - started


def test_a_device_connecting_while_redis_is_frozen_is_told_to_try_later_in_time(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    alice, bob = uids(2)
    phone = open_device(backend[0].port, backend[0].token_for(bob, "phone"))
    tablet = backend[1].token_for(bob, "tablet")  # minted before: tokens need no store
    backend[0].send(alice, bob, "before")
    assert phone.next()["message"]["content"]["text"] == "before"
    services("freeze", "redis")
    try:
        during = [opening(backend[1].port, tablet) for _ in range(3)]
    finally:
        services("thaw", "redis")
    print(f"\nRedis frozen: openings {[(what, round(s, 3)) for what, s in during]}")
    assert [what for what, _ in during] == [f"closed {CLOSE_TRY_LATER}"] * 3
    assert all(seconds < OPEN_DEADLINE_S + SLACK_S for _, seconds in during)
    wait_for(lambda: opening(backend[1].port, tablet)[0] == "hello", timeout=20, every=0.5)
    after = {"sender_uid": alice, "receiver_uid": bob, "client_msg_id": "c-after"}
    after["content"] = {"type": "text", "text": "after"}
    # the API's breaker for Redis may still be open for a second: the client retries its send
    accepted = (200, 201)  # 200: a retry of a send stored already
    wait_for(lambda: backend[0].call("POST", "/messages", after)[0] in accepted, timeout=20)
    frame = phone.next()
    while frame["type"] != "message":  # a resync may come first, if Redis lost nothing: none
        frame = phone.next()
    assert frame["message"]["content"]["text"] == "after"
