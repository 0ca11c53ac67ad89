"""A worker whose acknowledgement met a frozen broker goes on taking messages
(infra/broker_transport.py), on the real broker Redis frozen with SIGSTOP.

The consumer is kombu's, with the prefetch of a Celery worker of concurrency 1: one message in
hand at a time. With kombu's own Redis transport the failed ack keeps that one slot taken and the
second message is never fetched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pybreaker
import pytest
import redis
from django.conf import settings
from kombu import Connection, Consumer, Exchange, Message, Producer, Queue

from infra import breakers, broker
from infra.broker_transport import CONNECTION_ERRORS, BrokerNoAnswer
from tests.conftest import services

QUEUE = Queue("test.broker-acks", Exchange("test.broker-acks", type="direct"), "test.broker-acks")

pytestmark = pytest.mark.faults


@pytest.fixture
def connection() -> Iterator[Connection]:
    options = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0}
    with Connection(
        settings.CELERY_BROKER_URL,
        transport=settings.CELERY_BROKER_TRANSPORT,
        transport_options=options,
    ) as conn:
        QUEUE(conn.default_channel).declare()
        QUEUE(conn.default_channel).purge()
        yield conn


def received(conn: Connection, channel: Any) -> list[Message]:
    got: list[Message] = []
    with Consumer(channel, [QUEUE], callbacks=[lambda _b, m: got.append(m)]) as consumer:
        consumer.qos(prefetch_count=1)
        for _ in range(3):
            with contextlib.suppress(TimeoutError):
                conn.drain_events(timeout=1)
            if got:
                break
    return got


def test_a_failed_ack_frees_the_slot_and_is_made_once_the_broker_answers(
    connection: Connection,
) -> None:
    assert settings.CELERY_BROKER_TRANSPORT == "infra.broker_transport:Transport"
    channel = connection.channel()
    producer = Producer(connection.default_channel, exchange=QUEUE.exchange, routing_key=QUEUE.name)
    producer.publish({"n": 1}, declare=[QUEUE])
    producer.publish({"n": 2}, declare=[QUEUE])
    [first] = received(connection, channel)
    assert first.payload == {"n": 1}

    services("freeze", "redis")
    try:
        with pytest.raises(CONNECTION_ERRORS):
            first.ack()
    finally:
        services("thaw", "redis")

    [second] = received(connection, channel)  # kombu's own transport fetched nothing here
    assert second.payload == {"n": 2}
    second.ack()  # with it goes the first one's, if the frozen broker never ran it
    tags = [str(first.delivery_tag), str(second.delivery_tag)]
    unacked = broker.client().hmget("unacked", tags)
    assert unacked == [None, None]


# -- an API process's sends: the broker's breaker, no retry after no answer ------------------------
@pytest.fixture
def api_role(settings: Any) -> Iterator[None]:
    """An API process's role, set before the connection's channels are made (they read it)."""
    settings.PROCESS_ROLE = "api"
    breakers.reset()
    yield
    breakers.reset()


def publish(conn: Connection, retried: list[BaseException]) -> None:
    """One message through kombu's publish with an API process's retry policy (config/celery.py:
    one retry at once); ``retried`` gets each error kombu retried after."""
    producer = Producer(conn, exchange=QUEUE.exchange, routing_key=QUEUE.name)
    policy = {"max_retries": 1, "interval_start": 0, "errback": lambda e, _i: retried.append(e)}
    producer.publish({"n": 1}, declare=[QUEUE], retry=True, retry_policy=policy)


def test_an_api_process_gives_a_frozen_broker_one_timeout_then_its_breaker_fails_sends_at_once(
    api_role: None, connection: Connection
) -> None:
    retried: list[BaseException] = []
    failures: list[BaseException] = []
    services("freeze", "redis")
    try:
        for _ in range(4):
            with pytest.raises(BrokerNoAnswer) as caught:
                publish(connection, retried)
            failures.append(caught.value)
    finally:
        services("thaw", "redis")
    assert retried == []  # no answer is not retried: a request pays one timeout, not two
    causes = [type(f.__cause__) for f in failures]
    assert causes[0] is redis.TimeoutError, causes  # the first reached the frozen broker
    assert issubclass(causes[-1], breakers.StoreOpen), causes  # the last did not wait for it
    assert breakers.states()[("broker", breakers.target("broker"))] == pybreaker.STATE_OPEN


def test_an_api_process_still_retries_a_send_on_a_connection_the_broker_closed(
    api_role: None, connection: Connection
) -> None:
    publish(connection, [])
    broker.client().client_kill_filter(_type="normal", skipme=True)  # as a broker restart does
    publish(connection, [])  # on a new connection (redis-py's or kombu's retry)
    assert broker.client().llen(QUEUE.name) == 2  # both sent
    assert breakers.states()[("broker", breakers.target("broker"))] == pybreaker.STATE_CLOSED
