"""The WebSocket gateway end to end: real gateway processes, a real WebSocket client, devices of
one user on different processes, every event pushed by the API those processes serve."""

from __future__ import annotations

import base64
import os
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from django.test import override_settings

from infra.redis import get_redis
from live import keys, services
from tests.live.conftest import GROUP_EXPIRY_S, LOG_MAXLEN, Device, Http, Opener, close_code

pytestmark = pytest.mark.live
Backend = tuple[Http, Http]


def devices(open_device: Opener, backend: Backend, uid: int, *names: str) -> list[Device]:
    """Devices of ``uid`` named ``names``, alternately on the first and the second gateway."""
    return [
        open_device(backend[i % 2].port, backend[0].token_for(uid, name))
        for i, name in enumerate(names)
    ]


def test_hello_then_a_message_reaches_the_receiver_and_the_senders_other_device(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    alice, bob = uids(2)
    (phone,) = devices(open_device, backend, bob, "bob-phone")
    (laptop,) = devices(open_device, backend[1:] + backend[:1], alice, "alice-laptop")
    assert phone.hello["type"] == "hello"
    assert (phone.hello["uid"], phone.hello["device_id"]) == (str(bob), "bob-phone")
    assert phone.hello["resumed"] is False
    assert phone.hello["cursor"]

    msgkey = backend[0].send(alice, bob, "hello bob")

    got = phone.next()
    assert got["type"] == "message"
    assert got["cursor"]
    assert got["conversation"] == {"kind": "direct", "peer_uid": str(alice)}
    assert got["message"]["msgkey"] == msgkey
    assert got["message"]["content"] == {"type": "text", "text": "hello bob"}
    assert (got["message"]["sender_uid"], got["message"]["status"]) == (str(alice), "normal")
    mine = laptop.next()
    assert mine["conversation"] == {"kind": "direct", "peer_uid": str(bob)}
    assert mine["message"]["msgkey"] == msgkey


def test_every_device_of_a_user_gets_each_event_whichever_gateway_holds_it(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    alice, bob = uids(2)
    phone, tablet, watch = devices(open_device, backend, bob, "phone", "tablet", "watch")
    msgkey = backend[1].send(alice, bob, "to every device")
    for device in (phone, tablet, watch):
        assert device.next()["message"]["msgkey"] == msgkey


def test_reading_on_one_device_moves_the_badge_on_the_others(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    alice, bob = uids(2)
    phone, tablet = devices(open_device, backend, bob, "phone", "tablet")
    first, second = backend[0].send(alice, bob, "one"), backend[0].send(alice, bob, "two")
    for device in (phone, tablet):
        assert [device.next()["message"]["msgkey"] for _ in range(2)] == [first, second]

    backend[0].ok("POST", f"/users/{bob}/conversations/{alice}/read", {"upto_msgkey": first})

    for device in (phone, tablet):
        read = device.next()
        assert read["type"] == "read"
        assert read["conversation"] == {"kind": "direct", "peer_uid": str(alice)}
        assert (read["read_upto"], read["unread"]) == (first, 1)


def test_a_recall_and_a_delete_for_me_reach_the_devices(
    open_device, backend: Backend, uids: Any
) -> None:
    alice, bob = uids(2)
    (phone,) = devices(open_device, backend, bob, "phone")
    (laptop,) = devices(open_device, backend, alice, "laptop")
    msgkey = backend[0].send(alice, bob, "oops")
    assert phone.next()["type"] == laptop.next()["type"] == "message"

    backend[1].ok("POST", f"/messages/{msgkey}/recall")
    for device, peer in ((phone, alice), (laptop, bob)):
        recall = device.next()
        assert recall["type"] == "recall"
        assert recall["msgkey"] == msgkey
        assert recall["conversation"] == {"kind": "direct", "peer_uid": str(peer)}

    kept = backend[0].send(alice, bob, "keep?")
    assert phone.next()["message"]["msgkey"] == kept
    assert laptop.next()
    status, _ = backend[0].call("DELETE", f"/users/{bob}/conversations/{alice}/messages/{kept}")
    assert status == 204
    deleted = phone.next()
    assert (deleted["type"], deleted["msgkey"]) == ("delete", kept)
    assert laptop.quiet()  # a delete for me is bob's alone


def test_a_device_that_resumes_gets_every_missed_event_once_in_order_then_live_ones(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    alice, bob = uids(2)
    (phone,) = devices(open_device, backend, bob, "phone")
    first = backend[0].send(alice, bob, "before")
    cursor = phone.next()["cursor"]
    phone.close()
    missed = [backend[0].send(alice, bob, f"away {i}") for i in range(3)]

    token = backend[1].token_for(bob, "phone")
    back = open_device(backend[1].port, token, since=cursor)

    assert back.hello["resumed"] is True
    assert [back.next()["message"]["msgkey"] for _ in missed] == missed
    live = backend[0].send(alice, bob, "live again")
    assert back.next()["message"]["msgkey"] == live
    assert back.quiet()
    assert first not in missed


def test_a_burst_from_several_senders_reaches_every_device_once_in_log_order(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    """Four senders push 400 events to two users at once: each gateway takes what waits on its
    channel many messages at a time; every device gets every event of its user, each once, in
    the order of the user's log."""
    alice, bob = uids(2)
    alices = devices(open_device, backend, alice, "phone", "tablet")
    bobs = devices(open_device, backend, bob, "phone", "tablet")
    sent: dict[int, set[str]] = {alice: set(), bob: set()}

    def sender(n: int) -> None:
        for i in range(100):
            uid = (alice, bob)[i % 2]
            note = f"s{n}-{i}"
            sent[uid].add(note)
            services.publish(uid, {"type": "note", "text": note})

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(sender, range(4)))

    for uid, device in [(alice, d) for d in alices] + [(bob, d) for d in bobs]:
        frames = [device.next() for _ in range(200)]
        positions = [int(f["cursor"].split(".")[1]) for f in frames]
        assert positions == list(range(positions[0], positions[0] + 200))  # no gap, no repeat
        assert {f["text"] for f in frames} == sent[uid]
        assert device.quiet()


def test_a_cursor_older_than_the_log_gets_resync_too_old(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    alice, bob = uids(2)
    (phone,) = devices(open_device, backend, bob, "phone")
    backend[0].send(alice, bob, "seen")
    cursor = phone.next()["cursor"]
    phone.close()
    for i in range(LOG_MAXLEN + 2):  # the log keeps LOG_MAXLEN: the oldest missed are gone
        backend[0].send(alice, bob, f"flood {i}")

    back = open_device(backend[1].port, backend[1].token_for(bob, "phone"), since=cursor)

    assert back.hello["resumed"] is False
    assert back.next() == {"type": "resync", "reason": "too_old"}
    newer = backend[0].send(alice, bob, "after the resync")
    assert back.next()["message"]["msgkey"] == newer


def test_a_log_redis_lost_gets_resync_lost(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    alice, bob = uids(2)
    (phone,) = devices(open_device, backend, bob, "phone")
    backend[0].send(alice, bob, "seen")
    cursor = phone.next()["cursor"]
    phone.close()
    get_redis().delete(keys.meta(bob), keys.log(bob))  # as a Redis restarted without its data

    back = open_device(backend[0].port, backend[0].token_for(bob, "phone"), since=cursor)

    assert back.hello["resumed"] is False
    assert back.next() == {"type": "resync", "reason": "lost"}


def test_a_bad_or_expired_token_is_closed_with_4001(
    backend: Backend, uids: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (bob,) = uids(1)
    good = backend[0].token_for(bob, "phone")
    assert close_code(backend[0].port, good[:-3] + "xyz") == 4001
    assert close_code(backend[0].port, "not-a-token") == 4001
    monkeypatch.setattr("django.core.signing.time.time", lambda: 1_000_000.0)  # minted long ago
    expired = services.token_mint(uid=bob, device_id="phone").token
    assert close_code(backend[1].port, expired) == 4001


def test_a_connection_idle_past_the_layers_poll_and_its_group_expiry_still_receives(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    alice, bob = uids(2)
    (phone,) = devices(open_device, backend, bob, "phone")
    # the channel layer polls Redis for 5 s at a time, and forgets a group member GROUP_EXPIRY_S
    # after its last add (a day in production): the gateway adds itself again meanwhile
    assert phone.quiet(max(7.0, GROUP_EXPIRY_S + 3.0))
    msgkey = backend[0].send(alice, bob, "still there?")
    assert phone.next()["message"]["msgkey"] == msgkey


def test_a_ping_is_answered_with_a_pong(backend: Backend, uids: Any, open_device: Opener) -> None:
    (bob,) = uids(1)
    (phone,) = devices(open_device, backend, bob, "phone")
    phone.ws.send('{"type": "ping"}')
    assert phone.next() == {"type": "pong"}


def test_a_device_too_slow_to_read_is_closed_with_4008(backend: Backend, uids: Any) -> None:
    (bob,) = uids(1)
    token = backend[0].token_for(bob, "slow-phone")
    with stalled_socket(backend[0].port, token) as sock:
        with override_settings(LIVE_LOG_MAXLEN=LOG_MAXLEN):
            for n in range(150):  # ~9 MB of frames: past the socket buffers and the backlog
                services.publish(bob, {"type": "read", "n": n, "pad": "x" * 60_000})
        assert read_until(sock, CLOSE_4008)


CLOSE_4008 = b"\x88\x02\x0f\xa8"  # a close frame, code 4008, no reason


@contextmanager
def stalled_socket(port: int, token: str) -> Iterator[socket.socket]:
    """A WebSocket that opens and then does not read (a 4 KB receive buffer): its frames back
    up in the gateway."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
        sock.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        head = f"GET /live/v1?token={token} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket"
        head += f"\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}"
        sock.sendall(f"{head}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
        yield sock


def read_until(sock: socket.socket, marker: bytes, timeout: float = 30.0) -> bool:
    """Read the socket to its end, or until ``marker`` arrives."""
    sock.settimeout(timeout)
    tail = b""
    while chunk := sock.recv(1 << 20):
        tail = tail[-len(marker) :] + chunk
        if marker in tail:
            return True
    return False
