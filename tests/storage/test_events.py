"""Delivery event streams as an operator watches a gateway's consumer group at ``/metrics``: its
lag per stream and group, and the entries trimmed before it read them (storage/events.py), on
the real Redis, with the streams' cap made small so a test can trim past a lagging group."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from infra.redis import get_redis
from storage import events

pytestmark = pytest.mark.django_db
LAG = "missive_event_stream_lag"
LOST = "missive_event_stream_trimmed_unread_total"
PEER = 7


@pytest.fixture(autouse=True)
def small_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "MAXLEN", 200)
    monkeypatch.setattr(events, "TRIM_STEP", 0)  # trim (whole nodes) as soon as past the cap


def scrape() -> dict[tuple[str, str, str], float]:
    response = Client(REMOTE_ADDR="127.0.0.1").get("/metrics")
    assert response.status_code == 200
    families = text_string_to_metric_families(response.content.decode())
    return {
        (s.name, s.labels["stream"], s.labels["group"]): s.value
        for f in families
        for s in f.samples
        if s.name in (LAG, LOST)
    }


def publish(receiver: int, first: int, last: int) -> None:
    for msgkey in range(first, last + 1):
        events.publish_deliveries(receiver_uids=[receiver], peer_uid=PEER, msgkey=msgkey)


def read(stream: str, group: str, count: int) -> list[Any]:
    replies: Any = get_redis().xreadgroup(group, "gw-1", {stream: ">"}, count=count)
    return [entry for _, entries in replies for entry in entries]


def test_no_consumer_group_means_no_series(uid: int) -> None:
    publish(uid, 1, 3)

    assert scrape() == {}


def test_the_lag_is_what_the_group_has_not_read_yet(uid: int) -> None:
    stream = events.stream_key(uid % events.SHARDS)
    get_redis().xgroup_create(stream, "gateways", id="0", mkstream=True)
    publish(uid, 1, 8)
    assert len(read(stream, "gateways", 3)) == 3

    seen = scrape()

    assert seen[(LAG, stream, "gateways")] == 5
    assert (LOST, stream, "gateways") not in seen  # nothing trimmed yet


def test_trimming_past_unread_entries_counts_them_and_keeps_the_lag_exact(uid: int) -> None:
    # ``MAXLEN ~`` trims whole stream nodes (100 entries): 420 entries past a cap of 200 trim
    # 200, of which the group, stopped after 120, had not read 80.
    stream = events.stream_key(uid % events.SHARDS)
    get_redis().xgroup_create(stream, "gateways", id="0", mkstream=True)
    publish(uid, 1, 150)
    assert len(read(stream, "gateways", 120)) == 120
    publish(uid, 151, 420)
    left = get_redis().xlen(stream)
    trimmed = 420 - left
    assert trimmed > 120

    seen = scrape()

    assert seen[(LOST, stream, "gateways")] == trimmed - 120
    assert seen[(LAG, stream, "gateways")] == left
    got = read(stream, "gateways", 1000)
    assert [int(fields[b"msgkey"]) for _, fields in got] == list(range(trimmed + 1, 421))
    assert scrape()[(LAG, stream, "gateways")] == 0


def test_a_group_that_keeps_up_loses_nothing_to_trimming(uid: int) -> None:
    stream = events.stream_key(uid % events.SHARDS)
    get_redis().xgroup_create(stream, "gateways", id="0", mkstream=True)
    for msgkey in range(1, 501):
        publish(uid, msgkey, msgkey)
        assert len(read(stream, "gateways", 10)) == 1

    seen = scrape()

    assert get_redis().xlen(stream) < 400  # it was trimmed
    assert seen.get((LOST, stream, "gateways"), 0) == 0
    assert seen[(LAG, stream, "gateways")] == 0
