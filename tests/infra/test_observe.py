"""``/metrics`` as a Prometheus server and an outsider meet it: request durations by URL pattern
and status (never the raw path), Celery task durations and failures per task, the build, and a
403 for anyone the settings do not name."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

from bulk import services
from infra import metrics
from infra.redis import get_redis
from tests.api.factories import inbox_api
from tests.bulk.helpers import drive, shop
from unread import tasks

pytestmark = pytest.mark.django_db
HTTP = "missive_http_request_duration_seconds"
TASK = "missive_celery_task_duration_seconds"


@pytest.fixture(autouse=True)
def fresh_series(settings: Any) -> None:
    metrics.flush()
    get_redis().delete(metrics.KEY)
    settings.METRICS_FLUSH_S = 60.0  # buffered: the scrape flushes this process itself


def scrape(**headers: Any) -> list[Any]:
    response = Client(**headers).get("/metrics")
    assert response.status_code == 200
    return [s for f in text_string_to_metric_families(response.content.decode()) for s in f.samples]


def sample(samples: list[Any], name: str, **labels: str) -> float:
    found = [s.value for s in samples if s.name == name and labels.items() <= s.labels.items()]
    assert len(found) == 1, (name, labels, found)
    return float(found[0])


def test_request_durations_are_counted_by_route_and_status(uid: int) -> None:
    bff = inbox_api("bff-metrics")
    bff.unread(uid)
    bff.unread(uid + 1)
    Client().get("/healthz")
    Client().get("/no/such/page/12345")
    samples = scrape()
    unread = {"route": "api/v1/users/<str:uid>/unread", "method": "GET", "status": "200"}
    assert sample(samples, HTTP + "_count", **unread) == 2
    assert sample(samples, HTTP + "_bucket", **unread, le="+Inf") == 2
    assert sample(samples, HTTP + "_sum", **unread) > 0
    assert sample(samples, HTTP + "_count", route="healthz", status="200") == 1
    assert sample(samples, HTTP + "_count", route="unmatched", status="404") == 1
    assert not [s for s in samples if str(uid) in str(s.labels) or "12345" in str(s.labels)]


def test_task_runs_are_timed_and_failures_counted_per_task() -> None:
    tasks.counters_check.apply()
    tasks.counters_check.apply(args=("unexpected",))  # raises TypeError: a failure
    samples = scrape()
    done = {"task": "unread.counters_check", "state": "SUCCESS"}
    assert sample(samples, TASK + "_count", **done) == 1
    failed = {"task": "unread.counters_check", "state": "FAILURE"}
    assert sample(samples, TASK + "_count", **failed) == 1
    assert sample(samples, "missive_celery_task_failures_total", task=failed["task"]) == 1


def test_the_build_is_named() -> None:
    build = [s for s in scrape() if s.name == "missive_build_info"]
    assert len(build) == 1
    assert build[0].value == 1
    assert set(build[0].labels) == {"version", "python", "django"}


def test_metrics_are_refused_to_an_address_the_settings_do_not_name() -> None:
    outsider = Client(REMOTE_ADDR="203.0.113.9").get("/metrics")
    assert outsider.status_code == 403
    assert outsider.json()["error"] == "forbidden"
    with override_settings(METRICS_ALLOWED_IPS="10.0.0.0/8, 203.0.113.9"):
        assert scrape(REMOTE_ADDR="203.0.113.9")
        assert Client(REMOTE_ADDR="198.51.100.1").get("/metrics").status_code == 403


def test_a_scraper_with_the_token_reads_from_anywhere() -> None:
    with override_settings(METRICS_TOKEN="s3cret-scrape"):
        assert scrape(REMOTE_ADDR="198.51.100.1", HTTP_AUTHORIZATION="Bearer s3cret-scrape")
        wrong = Client(REMOTE_ADDR="198.51.100.1", HTTP_AUTHORIZATION="Bearer guess")
        assert wrong.get("/metrics").status_code == 403


def test_each_stage_of_a_completed_campaign_batch_is_timed(uids: Any) -> None:
    sender, *fans = uids(4)
    shop(sender)
    campaign, _ = services.campaign_submit(
        sender_uid=sender,
        content={"type": "text", "text": "Spring sale"},
        audience_spec={"type": "uids", "uids": [str(u) for u in fans]},
        channel="daily",
    )
    drive(campaign.pk)
    samples = scrape()
    stage = "missive_bulk_batch_stage_seconds"
    assert sample(samples, stage + "_count", stage="inbox write") == 1
    assert sample(samples, stage + "_count", stage="ledger") == 1
    assert sample(samples, stage + "_sum", stage="lease") > 0
