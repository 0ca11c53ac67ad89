"""A network fault between Missive and MariaDB, from toxiproxy (``scripts/services start
toxiproxy``): the production server (tests/api/test_freezes.py's ``server``) reaches the test
database through a proxy, and a ``timeout`` toxic turns that path into a black hole (nothing
passes, nothing is closed), what a partition looks like. History reads answer 503 within the
API's deadline, then at once once MariaDB's breaker is open; the unread fast path, which needs no
SQL, still answers 200; with the toxic removed history answers 200 again.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings

from tests.api.factories import inbox_api, send_api
from tests.api.test_freezes import assert_unavailable_in_time, get, report, services
from tests.config.test_asgi import free_port, wait_listening
from tests.conftest import ROOT, wait_for

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


@pytest.fixture
def mariadb_proxy() -> Iterator[tuple[str, int]]:
    """A proxy to the primary on a free loopback port: (proxy name, port)."""
    services("start", "toxiproxy")
    name, port = f"mariadb-{os.getpid()}", free_port()
    toxiproxy(
        "POST",
        "/proxies",
        {"name": name, "listen": f"127.0.0.1:{port}", "upstream": "127.0.0.1:3306"},
    )
    try:
        yield name, port
    finally:
        toxiproxy("DELETE", f"/proxies/{name}")


@pytest.fixture
def proxied_server(transactional_db: Any, mariadb_proxy: tuple[str, int]) -> Iterator[int]:
    """An API process (gunicorn + uvicorn) whose primary database is behind the proxy."""
    db = settings.DATABASES["default"]
    url = f"mysql://{db['USER']}:{db['PASSWORD']}@127.0.0.1:{mariadb_proxy[1]}/{db['NAME']}"
    port = free_port()
    cmd = [sys.executable, "-m", "gunicorn", "config.asgi:application", "-b", f"127.0.0.1:{port}"]
    cmd += ["-w", "1", "-k", "uvicorn_worker.UvicornWorker", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "DATABASE_URL": url})
    try:
        wait_listening(proc, port)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_black_holed_mariadb_path_is_503_in_time_and_unread_still_answers(
    proxied_server: int, mariadb_proxy: tuple[str, int], uids: Uids
) -> None:
    alice, bob = uids(2)
    send_api("shop", [alice]).sent(alice, bob)
    bff = inbox_api("bff-toxic")
    history, unread = f"/users/{bob}/conversations/{alice}/messages", f"/users/{bob}/unread"
    assert get(proxied_server, history, bff.token).status == 200
    assert get(proxied_server, unread, bff.token).status == 200  # warm: the fast path answers
    toxic = {"name": "blackhole", "type": "timeout", "stream": "downstream"}
    toxiproxy(
        "POST", f"/proxies/{mariadb_proxy[0]}/toxics", {**toxic, "attributes": {"timeout": 0}}
    )
    try:
        reads = [get(proxied_server, history, bff.token) for _ in range(4)]
        counts = [get(proxied_server, unread, bff.token) for _ in range(3)]
    finally:
        toxiproxy("DELETE", f"/proxies/{mariadb_proxy[0]}/toxics/blackhole")
    report("MariaDB black-holed (toxiproxy timeout): history", reads)
    assert_unavailable_in_time(reads)
    assert reads[-1].seconds < 0.5  # MariaDB's breaker is open: fail fast
    assert [(a.status, a.body["total"]) for a in counts] == [(200, 1)] * 3
    wait_for(lambda: get(proxied_server, history, bff.token).status == 200, timeout=15, every=0.5)
