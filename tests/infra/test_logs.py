"""Log lines as an operator reads them: JSON with time, level, logger and the request id a proxy
put in ``X-Request-ID`` (sent back in the response), the same id on the lines of a Celery task
the request started, and plain text when a person asks for it."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from infra.logs import RequestIdFilter
from tests.bulk.helpers import Uids, body, campaigns_api, follow, progress, shop
from tests.config.test_asgi import database_url, free_port, wait_listening
from tests.conftest import ROOT, wait_for


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """What the configured console handler writes, with the access log at INFO."""
    handler = next(
        h
        for h in logging.getLogger().handlers
        if any(isinstance(f, RequestIdFilter) for f in h.filters)
    )
    assert isinstance(handler, logging.StreamHandler)
    access = logging.getLogger("missive.request")
    buffer, level = io.StringIO(), access.level
    previous = handler.setStream(buffer)
    access.setLevel(logging.INFO)
    yield buffer
    handler.setStream(previous)
    access.setLevel(level)


def records(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines() if line.startswith("{")]


def test_a_request_logs_a_json_line_with_the_id_the_proxy_gave(
    client: Client, log_lines: io.StringIO
) -> None:
    response = client.get("/healthz", HTTP_X_REQUEST_ID="lb-4f1c-9")
    assert response["X-Request-ID"] == "lb-4f1c-9"
    (line,) = [r for r in records(log_lines) if r["logger"] == "missive.request"]
    assert line["request_id"] == "lb-4f1c-9"
    assert line["level"] == "INFO"
    assert line["message"] == "GET /healthz 200 " + line["message"].rsplit(" ", 1)[1]
    assert line["time"].endswith("+00:00")


def test_djangos_line_for_a_refused_request_carries_the_requests_id(
    client: Client, log_lines: io.StringIO
) -> None:
    """django.request logs a 4xx after every middleware returned: the id still comes along."""
    response = client.get("/api/v1/campaigns/1", HTTP_X_REQUEST_ID="lb-77aa")
    assert response.status_code == 401
    (line,) = [r for r in records(log_lines) if r["logger"] == "django.request"]
    assert line["level"] == "WARNING"
    assert line["request_id"] == "lb-77aa"


def test_a_request_without_a_usable_id_gets_a_new_one(
    client: Client, log_lines: io.StringIO
) -> None:
    forged = client.get("/healthz", HTTP_X_REQUEST_ID='x" level=ERROR')
    fresh = client.get("/healthz")
    ids = [forged["X-Request-ID"], fresh["X-Request-ID"]]
    assert all(len(i) == 32 for i in ids)
    assert ids[0] != ids[1]
    assert [r["request_id"] for r in records(log_lines)] == ids


def run_logging(**env: str) -> str:
    """stderr of a command that logs one warning (stderr a pipe, as under a supervisor)."""
    code = "import logging; logging.getLogger('missive.demo').warning('disk at %d%%', 91)"
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env={**_env(), **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stderr.strip().splitlines()[-1]


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "LOG_FORMAT"}


def test_a_command_logs_json_lines_by_default_and_text_on_request() -> None:
    line = json.loads(run_logging())
    assert (line["level"], line["logger"], line["message"]) == (
        "WARNING",
        "missive.demo",
        "disk at 91%",
    )
    assert line["request_id"] == "-"
    text = run_logging(LOG_FORMAT="text")
    assert text.endswith(" WARNING missive.demo [-] disk at 91%")


@pytest.mark.worker
@pytest.mark.django_db
def test_a_task_the_request_started_logs_the_requests_id(
    workers: Any, uids: Uids, capfd: pytest.CaptureFixture[str]
) -> None:
    sender, *fans = uids(4)
    shop(sender)
    follow(sender, fans)
    api = campaigns_api(sender)
    workers.env.update(LOG_LEVEL="INFO", LOG_FORMAT="json")
    workers.start(concurrency=1)
    response = api.http.post(
        "/api/v1/campaigns",
        json.dumps(body(sender, {"type": "followers"})),
        content_type="application/json",
        HTTP_X_REQUEST_ID="campaign-req-77",
    )
    assert response.status_code == 201, response.content
    wait_for(lambda: progress(api, response.json()["id"])["status"] == "finished")
    workers.stop_all()
    lines = [json.loads(x) for x in capfd.readouterr().err.splitlines() if x.startswith("{")]
    traced = [r for r in lines if r["request_id"] == "campaign-req-77"]
    assert any("succeeded" in r["message"] for r in traced), lines[-5:]


def test_gunicorns_own_lines_are_json_lines_under_a_supervisor() -> None:
    """gunicorn reads gunicorn.conf.py from the project root: the master's lines (booting a
    worker, signals, shutting down) and each worker's own (its application started: what a
    supervisor or a benchmark waits for) leave as JSON like the application's (stderr is a
    pipe)."""
    port = free_port()
    cmd = [sys.executable, "-m", "gunicorn", "config.asgi:application", "-b", f"127.0.0.1:{port}"]
    cmd += ["-w", "1", "-k", "uvicorn_worker.UvicornWorker", "--no-control-socket"]
    env = {k: v for k, v in os.environ.items() if k != "LOG_FORMAT"}
    env["DATABASE_URL"] = database_url()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE)
    try:
        wait_listening(proc, port)
        wait_for(lambda: _healthz(port))  # a worker booted and serves
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    lines = [json.loads(line) for line in err.decode().splitlines() if line.strip()]  # all JSON
    own = [line for line in lines if line["logger"] == "gunicorn.error"]
    assert {"Booting worker", "Shutting down: Master"} <= {
        line["message"].split(" with ")[0] for line in own
    }
    assert all(line["request_id"] == "-" and line["time"].endswith("+00:00") for line in own)
    worker = [line["message"] for line in lines if line["logger"] == "uvicorn.error"]
    assert "Application startup complete." in worker, lines


def _healthz(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False
