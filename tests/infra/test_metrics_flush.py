"""Counters leave a process by themselves, off the requests' path (infra/metrics.py ``_Flusher``):
a process's increments reach the shared hash without another increment or a scrape, and a forked
child (a Celery pool process) flushes its own, never what it inherited from its parent."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from infra import metrics
from infra.redis import get_redis
from tests.conftest import wait_for

SERIES = metrics.series("fanout_recipients", {})


def stored() -> int:
    return int(get_redis().hget(metrics.KEY, SERIES) or 0)


@pytest.fixture(autouse=True)
def empty(settings: Any) -> None:
    metrics.flush()  # what earlier tests left in this process's buffer
    get_redis().delete(metrics.KEY)
    settings.METRICS_FLUSH_S = 0.2


def test_increments_reach_the_shared_hash_with_nothing_else_happening() -> None:
    metrics.inc("fanout_recipients", 3)
    metrics.inc("fanout_recipients", 4)  # within the interval: it used to wait for a next one
    wait_for(lambda: stored() == 7, timeout=10)
    time.sleep(0.5)  # a few more of the thread's turns: nothing counted twice
    assert stored() == 7


def test_a_forked_child_flushes_its_own_increments_and_not_its_parents(settings: Any) -> None:
    settings.METRICS_FLUSH_S = 60.0  # the parent's 5 stay pending through the fork
    metrics.inc("fanout_recipients", 5)
    child = os.fork()
    if child == 0:  # the child: one increment, flushed by its own thread, then gone without atexit
        code = 1
        try:
            settings.METRICS_FLUSH_S = 0.2
            metrics.inc("fanout_recipients", 1)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not stored():
                time.sleep(0.05)
            code = 0 if stored() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's thread did not flush"
    metrics.flush()
    assert stored() == 6  # 11 had the child flushed what it inherited too
