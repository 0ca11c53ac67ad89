"""The production server as README says to run it: gunicorn with a uvicorn worker serving
``config.asgi``, on the test database and Redis. The unread route answers as the DRF view does,
from the fast path once warm; a revoked client is refused on the next request; other routes
still reach Django."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings

from api.clients import api_clients_revoke
from storage.counters.store import unread_incr_many
from tests.api.factories import inbox_api
from tests.conftest import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def database_url(host: str | None = None, port: int | None = None) -> str:
    """The test database's URL, at ``host:port`` when given (a proxy in front of it)."""
    db = settings.DATABASES["default"]
    where = f"{host or db['HOST']}:{port or db['PORT'] or 3306}"
    return f"mysql://{db['USER']}:{db['PASSWORD']}@{where}/{db['NAME']}"


@contextmanager
def api_server(**env: str) -> Iterator[int]:
    """One uvicorn worker under gunicorn (an API process) on a free port, on the test database,
    ``env`` over the test environment; yields the port, stops it on the way out."""
    port = free_port()
    cmd = [sys.executable, "-m", "gunicorn", "config.asgi:application", "-b", f"127.0.0.1:{port}"]
    cmd += ["-w", "1", "-k", "uvicorn_worker.UvicornWorker", "--log-level", "warning"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env={**os.environ, "DATABASE_URL": database_url(), **env}
    )
    try:
        wait_listening(proc, port)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def server(transactional_db: Any) -> Iterator[int]:
    with api_server() as port:
        yield port


def wait_listening(proc: subprocess.Popen[bytes], port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"gunicorn exited with {proc.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"gunicorn did not listen on {port} within {timeout}s")


def get(port: int, path: str, token: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_gunicorn_with_uvicorn_workers_serves_the_unread_fast_path(server: int, uid: int) -> None:
    bff = inbox_api("bff-server")
    unread_incr_many(owner_uids=[uid], peer_uid=7, category="followed", marker=None, delta=3)
    expected = bff.unread(uid)  # the DRF view, through Django's test client
    assert expected["total"] == 3
    for _ in range(3):  # the first warms the worker's caches through Django, the rest are fast
        assert get(server, f"/api/v1/users/{uid}/unread", bff.token) == (200, expected)
    assert get(server, "/api/v1/users/0/unread", bff.token)[0] == 400
    assert get(server, f"/api/v1/users/{uid}/conversations", bff.token)[0] == 200
    api_clients_revoke(client_ids=[bff.client.pk])
    status, body = get(server, f"/api/v1/users/{uid}/unread", bff.token)
    assert (status, body["error"]) == (401, "unauthorized")
