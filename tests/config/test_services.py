"""One round trip per service through the project's own code (the foundation's smoke suite)."""

from __future__ import annotations

import socket

import pytest
from django.conf import settings
from django.core.checks import run_checks
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from infra import hbase
from infra.redis import get_redis
from messaging import selectors
from messaging.models import Follow, Message
from tests.conftest import manage, wait_for


@pytest.mark.django_db
def test_orm_round_trip_on_mariadb_keeps_four_byte_emoji() -> None:
    assert connection.vendor == "mysql"
    Message.objects.create(
        msgkey=42,
        sender_uid=1,
        type="text",
        body={"type": "text", "text": "🚀 ok"},
        created_at=timezone.now(),
    )
    assert Message.objects.get(msgkey=42).body["text"] == "🚀 ok"
    Follow.objects.create(follower_uid=1, followee_uid=2, followed_at=timezone.now())
    assert list(Follow.objects.filter(followee_uid=2).values_list("follower_uid", flat=True)) == [1]


def test_redis_round_trip_through_configured_client() -> None:
    client = get_redis()
    client.set("foundation:probe", "v")
    assert client.get("foundation:probe") == b"v"
    assert client.eval("return redis.call('INCRBY', KEYS[1], ARGV[1])", 1, "foundation:n", 5) == 5


def test_hbase_put_and_scan_through_connection_helper(uid: int) -> None:
    row = b"\x00probe" + str(uid).encode()

    def put_then_scan(conn):
        table = conn.table("inbox")
        table.put(row, {b"d:v": b"\x01\x00"})
        found = list(table.scan(row_prefix=row))
        table.delete(row)
        return found

    assert hbase.call(put_then_scan) == [(row, {b"d:v": b"\x01\x00"})]


def test_hbase_helper_retries_once_after_the_gateway_dropped_the_connection(uid: int) -> None:
    def drop_then_list(conn):
        return conn.tables()

    calls = []

    def counted(conn):
        calls.append(conn)
        return conn.tables()

    hbase.call(drop_then_list)
    # Kill every pooled socket the way an idle timeout on the gateway does: the client still
    # believes it is open, and its next call fails with a transport error.
    pool = hbase.pool()
    with pool.connection() as conn:
        conn.transport.sock.shutdown(socket.SHUT_RDWR)
    assert b"inbox" in hbase.call(counted)
    assert len(calls) == 2  # the first attempt hit the dead socket, the retry succeeded


@override_settings(INBOX_BACKEND="hbase", HBASE={**hbase.options(), "PORT": 1})
def test_system_check_names_the_missing_hbase_in_one_sentence() -> None:
    errors = [e for e in run_checks(tags=["missive"]) if e.id == "missive.E002"]
    assert [e.msg for e in errors] == [
        "INBOX_BACKEND=hbase but no HBase Thrift server answers at 127.0.0.1:1"
    ]


def test_a_primary_database_that_does_not_answer_stops_a_command_in_one_sentence() -> None:
    """A closed port: ``manage.py campaign_list`` stops at its start-up check, no traceback."""
    done = manage("campaign_list", DATABASE_URL="mysql://missive:missive@127.0.0.1:1/missive")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "(missive.E006) DATABASE_URL names 127.0.0.1:1 but cannot connect there" in done.stderr
    assert "Can't connect to server" in done.stderr  # the driver's own code and text


def test_a_wrong_database_password_is_one_line_that_says_so() -> None:
    db = settings.DATABASES["default"]
    url = f"mysql://{db['USER']}:not-the-password@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    done = manage("check", DATABASE_URL=url)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "(missive.E006)" in done.stderr
    assert "OperationalError 1045: Access denied for user" in done.stderr
    assert "not-the-password" not in done.stderr


def test_a_replica_that_does_not_answer_is_a_warning_not_a_stop() -> None:
    done = manage("check", DATABASE_REPLICA_URL="mysql://missive:missive@127.0.0.1:1/missive")
    assert done.returncode == 0, done.stderr
    assert "(missive.W006) DATABASE_REPLICA_URL names 127.0.0.1:1" in done.stderr
    assert "its reads go to the primary" in done.stderr


def test_a_broker_that_does_not_answer_stops_a_command_in_one_sentence() -> None:
    done = manage("campaign_list", CELERY_BROKER_URL="redis://127.0.0.1:1/3")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "(missive.E007) CELERY_BROKER_URL names 127.0.0.1:1 but no broker answers there" in (
        done.stderr
    )


@override_settings(INBOX_BACKEND="cassandra")
def test_system_check_rejects_an_unknown_inbox_backend() -> None:
    errors = run_checks(tags=["missive"])
    assert any(e.id == "missive.E001" and "cassandra" in e.msg for e in errors)


def test_celery_task_runs_in_a_real_worker_process(workers, uids) -> None:
    from messaging import tasks

    alice, bob = uids(2)
    workers.start(queues="messaging", concurrency=1)
    content = {"type": "text", "text": "via worker"}
    sent = tasks.send.apply_async((alice, bob, content, "c-1"), ignore_result=False)
    msgkey = sent.get(timeout=120)  # Missive ignores results; this test asks for this one
    page = wait_for(lambda: selectors.conversation_list(bob).results)
    assert page[0].peer_uid == alice
    assert page[0].last_message is not None
    assert page[0].last_message["msgkey"] == int(msgkey)
    assert page[0].unread == 1


def test_each_channel_queue_gets_only_its_own_messages() -> None:
    import redis
    from django.conf import settings

    from config.celery import QUEUES, app

    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    app.control.purge()
    app.send_task("bulk.daily.run_batch", args=[0])
    app.send_task("bulk.priority.run_batch", args=[0])
    app.send_task("bulk.priority.plan", args=[0])
    app.send_task("bulk.recall_batch", args=[0])  # a recall never waits behind a channel
    app.send_task("messaging.convcache_prewarm", args=[0])
    depths = {name: broker.llen(name) for name in QUEUES}
    app.control.purge()
    assert depths == {"bulk.daily": 1, "bulk.priority": 2, "messaging": 2}


def test_beat_runs_every_periodic_task_the_platform_relies_on() -> None:
    from config.celery import app

    app.loader.import_default_modules()
    schedule = {entry["task"] for entry in app.conf.beat_schedule.values()}
    # the lease sweep (dead-worker recovery, schedules, budget resumes) and the daily big-UP set
    assert {"bulk.sweep", "messaging.convcache_big_ups"} <= schedule
    assert schedule <= set(app.tasks), "beat names a task no worker would know"
