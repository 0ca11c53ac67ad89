"""A Redis that refuses writes (``OOM``: maxmemory reached; ``MISCONF``: it cannot persist) is an
outage an operator fixes, not a bug (infra/outages.py): on the real Redis, with its maxmemory set
to 1 byte (``CONFIG SET``, restored in a finally), a campaign batch waits and fails nobody, an
API write answers 503 + Retry-After, each refusal is counted in /metrics, and a WARNING says what
to do. Once memory is back the campaign finishes exactly once and the client's retry sends once.

The circuit breakers stay closed meanwhile: Redis answers (reads work), it only refuses writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bulk import fanout
from bulk.models import Campaign, CampaignBatch
from infra import breakers
from infra import redis as redis_client
from infra.outages import store_unavailable
from infra.redis import clustered, get_redis
from infra.store_errors import refused_write
from tests.api.factories import inbox_api, send_api
from tests.bulk.helpers import (
    assert_exactly_once,
    business_with_followers,
    launch,
    run_synchronously,
)
from tests.infra.test_metrics import scrape, value

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]
Uids = Callable[[int], list[int]]


@pytest.fixture
def redis_full() -> Iterator[Callable[[], None]]:
    """Redis refusing writes (maxmemory 1 byte, no eviction) until the returned function, or the
    test's end, gives its memory back."""
    client: Any = get_redis()
    every = {"target_nodes": client.ALL_NODES} if clustered() else {}  # each master, each replica
    before = int(client.config_get("maxmemory")["maxmemory"] or 0)
    client.config_set("maxmemory", 1, **every)

    def restore() -> None:
        client.config_set("maxmemory", before, **every)

    try:
        yield restore
    finally:
        restore()


def test_a_campaign_batch_waits_while_redis_refuses_writes(
    uids: Uids, redis_full: Callable[[], None], caplog: pytest.LogCaptureFixture
) -> None:
    redis_full()  # the campaign is created and planned with memory to spare
    scenario = business_with_followers(uids(51), blocked_every=10)
    campaign = launch(scenario)
    while fanout.campaign_plan_step(campaign.pk):
        pass
    batch = CampaignBatch.objects.get(campaign=campaign)
    get_redis().config_set("maxmemory", 1)
    with caplog.at_level(logging.WARNING, logger="infra.outages"):
        try:
            outcome = fanout.batch_run(batch.pk).state
        except Exception as exc:  # before the lease (its tokens): the task waits it out
            outcome = "outage" if store_unavailable(exc) else f"failed: {exc!r}"
    redis_full()
    assert outcome in ("waiting", "outage"), outcome
    assert CampaignBatch.objects.get(pk=batch.pk).attempts == 0
    assert Campaign.objects.get(pk=campaign.pk).failed == 0
    assert "Redis refuses writes: OOM" in caplog.text
    assert "raise maxmemory or free memory" in caplog.text
    assert value(scrape(), "missive_redis_refused_writes_total", reason="OOM") >= 1
    assert breakers.closed("redis")

    fanout.sweep()  # the stores answer again: resumed, re-enqueued
    run_synchronously(campaign.pk)
    assert_exactly_once(
        campaign.pk, scenario.expected, scenario.sender, skipped_blocked=len(scenario.blocked)
    )


def test_an_api_write_is_503_while_redis_refuses_writes_and_its_retry_sends_once(
    uids: Uids, redis_full: Callable[[], None]
) -> None:
    alice, bob = uids(2)
    sender, bff = send_api("shop", [alice]), inbox_api()
    body = {
        "sender_uid": alice,
        "receiver_uid": bob,
        "content": {"type": "text", "text": "while Redis is full"},
        "client_msg_id": "oom-1",
    }
    response = sender.http.post("/api/v1/messages", body, format="json")
    assert response.status_code == 503, response.content
    assert response.json()["error"] == "unavailable"
    assert int(response["Retry-After"]) >= 1

    redis_full()
    again = sender.http.post("/api/v1/messages", body, format="json")
    assert again.status_code in (200, 201), again.content
    history = bff.history(bob, alice)["results"]
    assert [m["msgkey"] for m in history] == [again.json()["msgkey"]]
    assert bff.unread(bob)["total"] == 1


def test_a_refusal_in_a_pipeline_read_reply_by_reply_is_reported_too(
    redis_full: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A send reads its pipeline's replies one by one (``execute(raise_on_error=False)``,
    storage/events.py ``unpublished``), so no error is raised through the client: each refused
    write among the replies still reaches the hook that counts it and logs what to do."""
    seen: list[str | None] = []
    hook = [lambda exc: seen.append(refused_write(exc))]
    monkeypatch.setattr(redis_client, "REFUSED_WRITE_HOOKS", hook)
    pipe = get_redis().pipeline(transaction=False)
    pipe.get("refused:probe")
    pipe.set("refused:probe", "1")
    replies = pipe.execute(raise_on_error=False)
    redis_full()
    assert (replies[0], refused_write(replies[1])) == (None, "OOM")
    assert seen == ["OOM"]


@pytest.mark.redis_cluster
def test_a_refusal_in_a_command_a_cluster_pipeline_resends_alone_is_reported_once(
    redis_full: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script every primary forgot (NOSCRIPT, as after a restart or a promotion) is loaded and
    its command resent alone, outside the pipeline; a refusal in that reply is reported when it
    comes back and must not be counted again among the pipeline's replies."""
    seen: list[str | None] = []
    hook = [lambda exc: seen.append(refused_write(exc))]
    monkeypatch.setattr(redis_client, "REFUSED_WRITE_HOOKS", hook)
    script = get_redis().register_script("return redis.call('SET', KEYS[1], ARGV[1])")
    get_redis().script_flush()
    pipe = get_redis().pipeline(transaction=False)
    pipe.evalsha(script.sha, 1, "refused:alone", "1")
    replies = pipe.execute(raise_on_error=False)
    redis_full()
    assert refused_write(replies[0]) == "OOM"
    assert seen == ["OOM"]
