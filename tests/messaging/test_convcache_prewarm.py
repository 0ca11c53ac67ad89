"""Prewarming big accounts: the daily big-UP sets, the unread-request and burst triggers (once per
window), a real worker building both tiers, and the failure-rate alert in the logs and the admin.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from infra import broker as broker_redis
from infra import hbase
from infra.redis import get_redis
from messaging import selectors, tasks
from storage.convcache import hbase_tier, keys, prewarm, redis_tier
from tests.api.factories import inbox_api
from tests.conftest import wait_for
from tests.messaging.test_convcache import counter, seed, send

Uids = Callable[[int], list[int]]


@pytest.fixture(autouse=True)
def cache_on(settings: Any) -> None:
    settings.CONVCACHE_ENABLED = True
    settings.CONVCACHE_HBASE = True
    settings.METRICS_FLUSH_S = 0.0
    settings.BIG_UP_THRESHOLD = 20


@pytest.fixture
def queue() -> Iterator[Callable[[], int]]:
    """Tasks waiting on the broker's ``messaging`` queue (nothing consumes it in these tests)."""
    broker = broker_redis.client()
    broker.delete("messaging")

    def length() -> int:
        return int(broker.llen("messaging"))

    yield length
    broker.delete("messaging")


def cached(owner: int) -> bool:
    return redis_tier.read(owner, cursor="", want=1, category=None).status == "hit"


@pytest.mark.django_db
def test_the_daily_task_puts_owners_above_the_threshold_in_the_big_up_sets(uids: Uids) -> None:
    big, small = uids(2)
    seed(big, uids(21))
    seed(small, uids(20))
    assert tasks.convcache_big_ups() == 1
    assert get_redis().sismember(keys.big_ups_for(big), str(big))
    assert not get_redis().sismember(keys.big_ups_for(small), str(small))
    assert prewarm.big_ups_count() == 1
    seed(small, uids(1))  # tomorrow the small one has grown
    assert tasks.convcache_big_ups() == 2
    assert get_redis().sismember(keys.big_ups_for(small), str(small))


@pytest.mark.django_db
def test_a_big_ups_unread_request_enqueues_one_prewarm_per_window(
    uids: Uids, queue: Callable[[], int]
) -> None:
    big, small = uids(2)
    seed(big, uids(21))
    seed(small, uids(3))
    tasks.convcache_big_ups()
    bff = inbox_api("bff-prewarm")
    for _ in range(3):
        bff.unread(big)
        bff.unread(small)
    assert queue() == 1
    assert counter("prewarm_triggered", reason="unread") >= 1
    assert get_redis().ttl(keys.prewarm_marker(big)) > 0
    assert not get_redis().exists(keys.prewarm_marker(small))


@pytest.mark.django_db
def test_the_prewarm_task_builds_both_tiers(uids: Uids, django_assert_num_queries: Any) -> None:
    owner = uids(1)[0]
    seed(owner, uids(30))
    assert tasks.convcache_prewarm(owner) is True
    assert cached(owner)
    assert hbase_tier.read(owner).fill is not None
    with django_assert_num_queries(0):
        page = selectors.conversation_list(owner)
    assert len(page.results) == 20
    assert page.next_cursor


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_prewarms_a_big_up_after_their_unread_request(
    uids: Uids, workers: Any, django_assert_num_queries: Any
) -> None:
    big = uids(1)[0]
    seed(big, uids(25))
    tasks.convcache_big_ups()
    workers.start(queues="messaging", concurrency=1)
    assert not cached(big)
    inbox_api("bff-worker").unread(big)
    wait_for(lambda: cached(big) and hbase_tier.read(big).fill is not None)
    with django_assert_num_queries(0):
        assert len(selectors.conversation_list(big).results) == 20
    assert prewarm.health().successes >= 1


@pytest.mark.django_db
def test_a_burst_of_new_conversations_prewarms_an_uncached_owner_once(
    uids: Uids, settings: Any, queue: Callable[[], int]
) -> None:
    settings.BURST_NEW_CONVERSATIONS = 5
    owner, *fans = uids(9)
    for fan in fans[:5]:
        send(fan, owner)
    assert queue() == 0  # five new conversations within the minute: not a burst yet
    send(fans[0], owner)  # the same fan again is not a new conversation
    assert queue() == 0
    for fan in fans[5:]:
        send(fan, owner)
    assert queue() == 1
    assert counter("prewarm_triggered", reason="burst") >= 1


@pytest.mark.django_db
def test_a_cached_owner_never_counts_a_burst(
    uids: Uids, settings: Any, queue: Callable[[], int]
) -> None:
    settings.BURST_NEW_CONVERSATIONS = 2
    owner, *fans = uids(6)
    send(fans[0], owner)
    selectors.conversation_list(owner)  # the owner's list is cached
    for fan in fans[1:]:
        send(fan, owner)
    assert queue() == 0


@pytest.mark.django_db
def test_a_failure_rate_over_the_threshold_is_logged_and_shown_in_admin(
    uids: Uids, settings: Any, caplog: pytest.LogCaptureFixture, admin_client: Any
) -> None:
    settings.PREWARM_ALERT_MIN_ATTEMPTS = 3
    settings.PREWARM_FAILURE_ALERT_RATE = 0.5
    owner = uids(1)[0]
    seed(owner, uids(3))
    assert prewarm.prewarm_owner(owner)
    settings.HBASE = {**hbase.options(), "PORT": 1, "TIMEOUT_MS": 500}
    with caplog.at_level(logging.ERROR, logger="storage.convcache.prewarm"):
        results = [prewarm.prewarm_owner(o) for o in uids(3)]
    assert results == [False, False, False]
    health = prewarm.health()
    assert (health.attempts, health.successes, health.failures) == (4, 1, 3)
    assert health.alerting
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1  # logged once, not once per failure
    assert "exceeds 50%" in errors[0].getMessage()
    page = admin_client.get("/admin/messaging/cachehealth/")
    assert page.status_code == 200
    assert b"Prewarm failure rate 75.0%" in page.content
