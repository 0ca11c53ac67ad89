"""Two real gateway processes (uvicorn serving ``config.asgi``) on the test database and Redis,
a real WebSocket client (``websockets``) and a small HTTP client, for the live tests.

The gateways keep at most ``LOG_MAXLEN`` events per user, so a test can outrun the log; each
test's API client is committed (``transactional_db``) so the gateways see it.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest
from django.conf import settings
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from api.models import Scope
from live.gateway_worker import GATEWAY_FLAGS
from tests.api.factories import make_api
from tests.conftest import ROOT, worker_env

LOG_MAXLEN = 5
HEARTBEAT_S = 1  # a device counts as online until 3 heartbeats are missed
BACKLOG = 50  # frames a gateway queues for one connection before it closes it with 4008
# channels-redis drops a channel from a group this long after its last add: each gateway adds
# itself again every quarter of it (live/gateway.py), which the idle tests exercise in seconds
GROUP_EXPIRY_S = 4
FRAME_TIMEOUT_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_gateway(port: int, **extra: str) -> subprocess.Popen[bytes]:
    """A gateway process on ``port``, ``extra`` over its environment."""
    env = worker_env(settings.DATABASES["default"]["NAME"])
    del env["MISSIVE_PROCESS_ROLE"]  # an API process: config.asgi sets its role
    # the tests' key: a token minted in this process (an expired one) is checked by the gateway
    env.update(DJANGO_SECRET_KEY=settings.SECRET_KEY, LIVE_LOG_MAXLEN=str(LOG_MAXLEN))
    env.update(LIVE_BACKLOG=str(BACKLOG), LIVE_HEARTBEAT_S=str(HEARTBEAT_S))
    env.update(LIVE_GROUP_EXPIRY_S=str(GROUP_EXPIRY_S), **extra)
    cmd = [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--log-level", "warning", "--timeout-graceful-shutdown", "5"]
    cmd += GATEWAY_FLAGS  # as production runs it (live.gateway_worker)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"gateway exited with {proc.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"the gateway did not listen on {port}")


@pytest.fixture(scope="module")
def gateways(django_db_setup: Any) -> Iterator[tuple[int, int]]:
    """The ports of two gateway processes."""
    ports = (free_port(), free_port())
    procs = [start_gateway(port) for port in ports]
    yield ports
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:  # a connection that never finished closing
            proc.kill()
            proc.wait(timeout=15)


@pytest.fixture
def spare_gateway(gateways: tuple[int, int]) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A third gateway process of the test's own, to kill: its port and its process."""
    port = free_port()
    proc = start_gateway(port)
    yield port, proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=15)


class Http:
    """The API on one gateway, as the consumer backend (scopes ``users`` and ``inbox``)."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        try:
            raw = None if body is None else json.dumps(body)
            conn.request(method, f"/api/v1{path}", body=raw, headers=headers)
            response = conn.getresponse()
            content = response.read()
            return response.status, json.loads(content) if content else None
        finally:
            conn.close()

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.call(method, path, body)
        assert status in (200, 201), (status, answer)
        return answer

    def token_for(self, uid: int, device_id: str) -> str:
        return str(self.ok("POST", f"/users/{uid}/live-tokens", {"device_id": device_id})["token"])

    def send(self, sender: int, receiver: int, text: str) -> str:
        body = {"sender_uid": sender, "receiver_uid": receiver, "client_msg_id": f"c-{text}"}
        answer = self.ok("POST", "/messages", {**body, "content": {"type": "text", "text": text}})
        return str(answer["msgkey"])


@dataclass
class Device:
    """One device's connection: its ``hello`` and the frames after it."""

    ws: ClientConnection
    hello: dict[str, Any]

    def next(self, timeout: float = FRAME_TIMEOUT_S) -> dict[str, Any]:
        return dict(json.loads(self.ws.recv(timeout=timeout)))

    def quiet(self, seconds: float = 0.5) -> bool:
        """True when no frame arrives within ``seconds``."""
        try:
            self.ws.recv(timeout=seconds)
        except TimeoutError:
            return True
        return False

    def close(self) -> None:
        self.ws.close()


def ws_url(port: int, token: str, since: str | None = None) -> str:
    url = f"ws://127.0.0.1:{port}/live/v1?token={token}"
    return url if since is None else f"{url}&since={since}"


Opener = Callable[..., Device]


@pytest.fixture
def open_device() -> Iterator[Opener]:
    """Opens a device's connection: ``open_device(port, token, since=None)``; each is closed
    after the test."""
    with ExitStack() as stack:

        def opener(port: int, token: str, since: str | None = None) -> Device:
            ws = stack.enter_context(connect(ws_url(port, token, since), open_timeout=10))
            return Device(ws, json.loads(ws.recv(timeout=FRAME_TIMEOUT_S)))

        yield opener


def close_code(port: int, token: str) -> int | None:
    """The close code a connection with ``token`` gets (after the handshake)."""
    with connect(ws_url(port, token), open_timeout=FRAME_TIMEOUT_S) as ws:
        try:
            ws.recv(timeout=FRAME_TIMEOUT_S)
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None
    raise AssertionError("the connection stayed open")


@pytest.fixture
def backend(transactional_db: Any, gateways: tuple[int, int]) -> tuple[Http, Http]:
    """The consumer backend's API on each gateway (one committed client)."""
    api = make_api(f"live-bff-{os.getpid()}-{time.monotonic_ns()}", [Scope.USERS, Scope.INBOX])
    return Http(gateways[0], api.token), Http(gateways[1], api.token)


def tablet_away(
    backend: tuple[Http, Http], open_device: Opener, alice: int, bob: int
) -> tuple[Device, str, list[str]]:
    """Bob's phone and tablet on the two gateways; both see one message from Alice, the tablet
    goes away with its cursor and misses two more, which the phone receives. Returns the phone,
    the tablet's cursor and the two it missed."""
    phone = open_device(backend[0].port, backend[0].token_for(bob, "phone"))
    tablet = open_device(backend[1].port, backend[0].token_for(bob, "tablet"))
    backend[0].send(alice, bob, "seen by both")
    assert phone.next()["type"] == "message"
    cursor = str(tablet.next()["cursor"])
    tablet.close()
    missed = [backend[0].send(alice, bob, f"tablet away {i}") for i in range(2)]
    assert [phone.next()["message"]["msgkey"] for _ in range(2)] == missed
    return phone, cursor, missed
