"""The operator's pages through a frozen store: every admin page, ``/metrics``, ``/readyz`` and
``/healthz`` called once while one store is frozen (``scripts/services freeze``: SIGSTOP,
connections open, nothing answers), on the production server (gunicorn + uvicorn serving
``config.asgi``), logged in as an operator.

- No page answers 500 or hangs: each answers within the API's deadline, with its page or a 503
  with ``Retry-After`` that names the store (``infra.outages.StoreOutageMiddleware``).
- ``/metrics`` always answers 200, with every store's breaker state; while Redis (which holds the
  counters) is out, ``missive_metrics_counters_up`` is 0.
- ``/readyz`` answers 503 naming the frozen store; ``/healthz`` 200 (it touches no store).
- Once the store is thawed (always, in a finally), every admin page answers 200 again.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from django.contrib.auth.models import User

from tests.api.test_freezes import DEADLINE_S, SLACK_S
from tests.bulk.helpers import business_with_followers, launch
from tests.config.test_asgi import api_server
from tests.conftest import services, wait_for

pytestmark = pytest.mark.faults
Uids = Callable[[int], list[int]]
READYZ_NAME = {"redis": "redis", "mariadb": "mariadb", "hbase-thrift": "hbase"}


@pytest.fixture(
    params=["redis", "mariadb", pytest.param("hbase-thrift", marks=pytest.mark.hbase_faults)]
)
def store(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def operator_site(transactional_db: Any) -> Iterator[tuple[str, requests.Session]]:
    """A server on the HBase inbox (every store in use) and an operator's logged-in session."""
    User.objects.create_superuser("op-freeze", "op@example.com", "a-long-password-1")
    with api_server(INBOX_BACKEND="hbase") as port:
        base = f"http://127.0.0.1:{port}"
        session = requests.Session()
        session.get(f"{base}/admin/login/", timeout=10)
        form = {
            "username": "op-freeze",
            "password": "a-long-password-1",
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
            "next": "/admin/",
        }
        assert session.post(f"{base}/admin/login/", data=form, timeout=10).status_code == 200
        yield base, session


def pages(base: str, session: requests.Session, campaign: int) -> list[str]:
    """The admin's index, every model's list (from the index), a campaign's page."""
    index = session.get(f"{base}/admin/", timeout=10).text
    lists = sorted(set(re.findall(r'href="(/admin/[a-z_]+/[a-z_]+/)"', index)))
    assert len(lists) > 10, index[:500]
    return ["/admin/", *lists, f"/admin/bulk/campaign/{campaign}/change/"]


def fetch(base: str, session: requests.Session, path: str) -> tuple[int, str, float, str]:
    started = time.monotonic()
    r = session.get(base + path, timeout=15)
    return r.status_code, r.text, time.monotonic() - started, r.headers.get("Retry-After", "")


def test_the_operators_pages_answer_in_time_while_a_store_is_frozen(
    operator_site: tuple[str, requests.Session], store: str, uids: Uids
) -> None:
    base, session = operator_site
    campaign = launch(business_with_followers(uids(3))).pk
    admin = pages(base, session, campaign)
    services("freeze", store)
    try:
        answers = {path: fetch(base, session, path) for path in ["/metrics", "/readyz", *admin]}
        healthz = fetch(base, session, "/healthz")
    finally:
        services("thaw", store)
    print(f"\n{store} frozen:")
    for path, (status, _, seconds, _) in answers.items():
        print(f"  {status} {seconds:6.3f} s  {path}")
    for path, (status, text, seconds, retry_after) in answers.items():
        assert seconds < DEADLINE_S + SLACK_S, f"{path} answered after {seconds:.2f} s"
        assert status in (200, 503), (path, status, text[:300])
        if path.startswith("/admin/") and status == 503:
            assert "did not answer" in text, (path, text[:300])
            assert int(retry_after) >= 1, path
    metrics, readyz = answers["/metrics"], answers["/readyz"]
    assert metrics[0] == 200
    # its store reads run side by side: the first scrape of a Redis freeze waits for one 1-s
    # timeout, not one per read (3.0 s when they ran in turn)
    assert metrics[2] < DEADLINE_S, f"/metrics answered after {metrics[2]:.2f} s"
    assert "missive_store_breaker_state" in metrics[1]
    up = re.search(r"^missive_metrics_counters_up (\S+)$", metrics[1], re.M)
    assert up is not None
    assert float(up.group(1)) == (0.0 if store == "redis" else 1.0)
    assert readyz[0] == 503
    assert READYZ_NAME[store] in readyz[1]
    assert healthz[0] == 200
    for path in admin:
        wait_for(lambda path=path: fetch(base, session, path)[0] == 200, timeout=20)  # type: ignore[misc]
