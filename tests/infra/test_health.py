"""``/healthz`` and ``/readyz`` as a load balancer meets them: liveness touches no store; readiness
names each store with its latency, and a stopped Redis turns it into a 503 naming Redis, quickly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from django.test import Client, override_settings

from tests.conftest import services


def test_healthz_answers_ok_without_touching_any_store(client: Client) -> None:
    # no django_db mark: pytest-django fails the test if the view opened the database
    with override_settings(REDIS_URL="redis://127.0.0.1:1/0"):
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert client.post("/healthz").status_code == 405


def asgi_get(path: str) -> tuple[int, bytes]:
    """One GET through the production ASGI application (the unread fast path in front)."""
    from config.asgi import application

    sent: list[dict[str, Any]] = []
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost")],
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 5000),
        "http_version": "1.1",
        "asgi": {"version": "3.0"},
    }

    requests = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await asyncio.Event().wait()  # the client stays connected until the answer is sent
        return {"type": "http.disconnect"}

    async def send(message: Mapping[str, Any]) -> None:
        sent.append(dict(message))

    asyncio.run(application(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], body


@pytest.mark.django_db(transaction=True, databases=["default", "replica"])
def test_both_probes_reach_django_through_the_asgi_application() -> None:
    assert asgi_get("/healthz") == (200, b'{"status": "ok"}')
    status, body = asgi_get("/readyz")
    assert status == 200
    assert json.loads(body)["status"] == "ok"


@pytest.mark.django_db(databases=["default", "replica"])
def test_readyz_names_every_store_with_its_latency(client: Client) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"mariadb", "replica", "redis", "broker"}
    for check in body["checks"].values():
        assert check["ok"] is True
        assert check["ms"] >= 0


@pytest.mark.django_db(databases=["default", "replica"])
def test_readyz_checks_hbase_when_the_inbox_lives_there(client: Client) -> None:
    with override_settings(INBOX_BACKEND="hbase"):
        checks = client.get("/readyz").json()["checks"]
    assert checks["hbase"]["ok"] is True


@pytest.mark.django_db(databases=["default", "replica"])
def test_readyz_reports_hbase_down_by_name(client: Client) -> None:
    dead = {"HOST": "127.0.0.1", "PORT": 1, "THRIFT2_PORT": 1, "TABLE_PREFIX": "x"}
    with override_settings(GROUP_TIMELINE_BACKEND="hbase", HBASE={**dead}):
        response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["hbase"]["ok"] is False
    assert body["checks"]["mariadb"]["ok"] is True


@pytest.fixture
def redis_stopped() -> Iterator[None]:
    services("stop", "redis")
    try:
        yield
    finally:
        services("start", "redis")


@pytest.mark.faults
@pytest.mark.django_db(databases=["default", "replica"])
def test_readyz_is_503_naming_redis_while_redis_is_stopped(
    client: Client, redis_stopped: None, caplog: pytest.LogCaptureFixture
) -> None:
    response = client.get("/readyz")
    said = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert ("infra.health", "WARNING", "readyz: not ready: redis, broker did not answer") in said
    assert not [r for r in said if r[0] == "django.request"]  # no ERROR line per probe
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["redis"]["ok"] is False
    assert body["checks"]["mariadb"]["ok"] is True
    assert body["checks"]["replica"]["ok"] is True
    assert client.get("/healthz").status_code == 200  # alive, only not ready
