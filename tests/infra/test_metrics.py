"""The Prometheus endpoint: counters from every process, cache hits per tier, hedges, prewarms,
fan-out, and the Celery queue depths read from the broker at scrape time."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from infra import broker, metrics
from infra.redis import get_redis
from messaging import selectors, services, tasks
from storage import msgkey as keys
from tests.conftest import ROOT

Uids = Callable[[int], list[int]]


def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture(autouse=True)
def cache_on(settings: Any) -> None:
    settings.CONVCACHE_ENABLED = True
    metrics.flush()  # what earlier tests left in this process's buffer
    get_redis().delete(metrics.KEY)
    settings.METRICS_FLUSH_S = 60.0  # buffered: the scrape flushes this process itself


@pytest.fixture
def empty_queue() -> Iterator[None]:
    broker.client().delete("messaging")
    yield
    broker.client().delete("messaging")


@pytest.mark.django_db
def test_cache_hits_per_tier_and_fan_out_are_counted(uids: Uids) -> None:
    sender, *receivers = uids(4)
    services.deliver_many(
        sender_uid=sender,
        receiver_uids=receivers,
        msgkey=keys.next_msgkey(),
        category="business",
        marker="m-1",
    )
    selectors.conversation_list(receivers[0])  # a miss, filled
    selectors.conversation_list(receivers[0])  # a hit
    samples = scrape()
    assert value(samples, "missive_convcache_reads_total", tier="redis", result="miss") == 1
    assert value(samples, "missive_convcache_reads_total", tier="redis", result="hit") == 1
    assert value(samples, "missive_fanout_recipients_total") == 3


def test_counters_from_other_processes_add_up() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "METRICS_FLUSH_S": "60"}
    code = (
        "import django; django.setup()\n"
        "from infra import metrics\n"
        "for _ in range(5): metrics.inc('convcache_hedges')\n"  # flushed at exit
    )
    for _ in range(3):
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)
    metrics.inc("convcache_hedges", 2)  # this process, still buffered
    assert value(scrape(), "missive_convcache_hedges_total") == 17


@pytest.mark.django_db
def test_queue_depth_is_the_length_of_the_queue_on_the_broker(empty_queue: None) -> None:
    assert value(scrape(), "missive_celery_queue_length", queue="messaging") == 0
    for owner in (1, 2, 3):
        tasks.convcache_prewarm.delay(owner)
    samples = scrape()
    assert value(samples, "missive_celery_queue_length", queue="messaging") == 3
    assert value(samples, "missive_celery_queue_length", queue="bulk.priority") == 0


@pytest.mark.django_db
def test_prewarm_outcomes_and_failure_ratio_are_exposed(uids: Uids, settings: Any) -> None:
    settings.CONVCACHE_HBASE = False
    owner = uids(1)[0]
    from storage.convcache import prewarm

    assert prewarm.prewarm_owner(owner)
    prewarm.record("attempt")
    prewarm.record("failure")
    samples = scrape()
    assert value(samples, "missive_prewarm_total", outcome="attempt") == 2
    assert value(samples, "missive_prewarm_total", outcome="success") == 1
    assert value(samples, "missive_prewarm_total", outcome="failure") == 1
    assert value(samples, "missive_prewarm_failure_ratio") == 0.5
    assert value(samples, "missive_big_ups") == 0
