"""MariaDB connections kept between requests (``infra/mysql``, ENGINE ``infra.mysql``).

The production server (gunicorn + a uvicorn worker) answers a run of requests on the
connections it already has instead of opening one per request; a connection the server killed
while it sat idle is not handed out again (the next request answers 200, not 500 or 503); one
given back after a database error is closed, not reused; a forked child (a Celery pool process)
never uses its parent's; a transaction opened on a kept connection commits or rolls back as
Django's always did.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import MySQLdb
import pytest
from django.conf import settings
from django.db import DatabaseError, OperationalError, connection, connections, transaction

from messaging.models import Account
from tests.api.factories import inbox_api
from tests.config.test_asgi import api_server, get

HISTORY = "/api/v1/users/{uid}/conversations/{peer}/messages"


def opened() -> int:
    """Connections the primary and the replica have accepted since they started (their own
    ``Connections`` counters; this count's own connections included)."""
    total = 0
    for alias in ("default", "replica"):
        db = settings.DATABASES.get(alias)
        if db is None:
            continue
        conn = MySQLdb.connect(
            host=db["HOST"], port=int(db["PORT"]), user=db["USER"], password=db["PASSWORD"]
        )
        try:
            cur = conn.cursor()
            cur.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
            total += int(cur.fetchone()[1])
        finally:
            conn.close()
    return total


def redis_address() -> tuple[str, int]:
    url = urlsplit(settings.REDIS_URL)
    return url.hostname or "127.0.0.1", url.port or 6379


def connection_id(alias: str = "default") -> int:
    """The server-side id of the connection a new wrapper (a new request's) gets."""
    wrapper = connections.create_connection(alias)
    try:
        return server_id(wrapper)
    finally:
        wrapper.close()


@pytest.fixture
def server(transactional_db: Any) -> Iterator[int]:
    with api_server() as port:
        yield port


def test_a_run_of_requests_reuses_the_servers_connections(server: int, uid: int) -> None:
    bff = inbox_api("bff-pool")
    path = HISTORY.format(uid=uid, peer=uid + 1)
    assert get(server, path, bff.token)[0] == 200  # the worker's first connections
    before = opened()
    for _ in range(20):
        assert get(server, path, bff.token)[0] == 200
    # two for the counting itself before and after; one per request without the pool (22+)
    assert opened() - before <= 4


def test_a_connection_killed_while_idle_is_not_handed_out_again(server: int, uid: int) -> None:
    bff = inbox_api("bff-pool-kill")
    path = HISTORY.format(uid=uid, peer=uid + 1)
    assert get(server, path, bff.token)[0] == 200
    with connection.cursor() as cur:  # every other session of the test database: the server's
        cur.execute(
            "SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> "
            "CONNECTION_ID()"
        )
        for (session,) in cur.fetchall():
            cur.execute(f"KILL CONNECTION {int(session)}")
    assert get(server, path, bff.token)[0] == 200


@pytest.mark.django_db(transaction=True)
def test_a_connection_given_back_after_an_error_is_closed_not_reused() -> None:
    wrapper = connections.create_connection("default")
    with wrapper.cursor() as cur:
        cur.execute("SELECT CONNECTION_ID()")
        first = int(cur.fetchone()[0])
        with pytest.raises(DatabaseError):
            cur.execute("SELECT * FROM no_such_table")
    wrapper.close()
    assert connection_id() != first
    kept = connection_id()
    assert connection_id() == kept  # a clean one is


@pytest.mark.django_db(transaction=True)
def test_a_query_a_failed_request_left_open_never_touches_its_connection_once_given_back(
    uids: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Request A fails while it iterates a query; its traceback keeps the query's generator,
    which the garbage collector finalises later, on whatever thread it runs. Meanwhile A's
    connection was given back and request B is using it: the late close must not reach it."""
    for uid in uids(3):
        Account.objects.create(uid=uid, kind="business", name=f"pool-{uid}")
    left: list[Any] = []
    ids: dict[str, int] = {}

    def request_a() -> None:
        rows = Account.objects.order_by("uid").iterator(chunk_size=1)
        next(rows)  # then the request fails: the generator outlives it
        left.append(rows)
        ids["a"] = server_id(connection)
        connection.close()  # the request's end: its connection is given back

    answers: list[Any] = []

    def request_b() -> None:
        try:
            with connection.cursor() as cur:
                ids["b"] = server_id(connection)
                cur.execute("SELECT SLEEP(1), 42")
                answers.append(cur.fetchone()[1])
        except Exception as exc:
            answers.append(exc)
        finally:
            connection.close()

    run(request_a)
    b = threading.Thread(target=request_b)
    b.start()
    time.sleep(0.3)  # B is in its query
    unraisable: list[Any] = []  # what a finaliser raises is printed, and lost, by Python
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    left[0].close()  # the garbage collector reaches A's generator, on another thread
    b.join()
    assert ids["a"] == ids["b"]  # B got A's connection (the pool's freshest)
    assert answers == [42]
    assert [str(u.exc_value) for u in unraisable] == []  # the late close left B's connection be


def server_id(wrapper: Any) -> int:
    """The server-side id of the connection ``wrapper`` holds (opened if need be)."""
    with wrapper.cursor() as cur:
        cur.execute("SELECT CONNECTION_ID()")
        return int(cur.fetchone()[0])


def run(target: Any) -> None:
    thread = threading.Thread(target=target)
    thread.start()
    thread.join()


@pytest.mark.django_db(transaction=True)
def test_a_forked_child_never_uses_its_parents_connections() -> None:
    busy = connections.create_connection("default")  # in use when the child is forked
    busy.ensure_connection()
    parents = connection_id()  # another one, now idle in this process
    pid = os.fork()
    if pid == 0:  # the child, out without pytest's teardown
        try:
            # as Celery's pool processes start: the inherited connection's descriptor closed,
            # then the wrapper closed; it must not wait for reuse (its number may be reused)
            number = busy.connection.fileno()
            os.close(number)
            busy.close()
            quiet = socket.create_connection(redis_address())  # takes the number, says nothing
            os.dup2(quiet.fileno(), number)
            fresh = {connection_id(), connection_id()}
            os._exit(0 if parents not in fresh and len(fresh) == 1 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert connection_id() == parents  # still open, and still the parent's to reuse
    with busy.cursor() as cur:  # the parent's busy one too
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
    busy.close()


@transaction.atomic
def create_then_fail(uid: int) -> None:
    Account.objects.create(uid=uid, kind="business", name="lost")
    raise RuntimeError("rolled back")


@pytest.mark.django_db(transaction=True)
def test_transactions_on_kept_connections_commit_and_roll_back(uids: Any) -> None:
    kept, lost = uids(2)
    connection_id()  # a kept connection waits; the next wrapper takes it
    connection.close()
    with transaction.atomic():
        Account.objects.create(uid=kept, kind="business", name="kept")
    with pytest.raises(RuntimeError):
        create_then_fail(lost)
    Account.objects.filter(uid=kept).update(name="autocommitted")  # outside any transaction
    other = connections.create_connection("default")  # another connection: only what committed
    try:
        with other.cursor() as cur:
            table = Account._meta.db_table
            cur.execute(f"SELECT uid, name FROM {table} WHERE uid IN (%s, %s)", [kept, lost])
            assert cur.fetchall() == ((kept, "autocommitted"),)
    finally:
        other.close()


@pytest.mark.django_db(transaction=True)
def test_a_connect_is_no_answer_so_two_no_answers_around_one_still_open_the_breaker() -> None:
    """A connect that takes a pooled connection (handed out without a round trip) does not count
    as MariaDB answering: a no-answer before it and one after it open the ``mariadb`` breaker
    (BREAKER_FAIL_MAX 2); before, the connect reset the count, and a frozen primary made three
    requests wait their timeout instead of two. On a connection made as a server's are (guarded:
    infra/breakers.py), not the test's own."""
    from infra import breakers

    lost = OperationalError(2013, "Lost connection to server during query")
    conn = connections.create_connection("default")
    try:
        conn.ensure_connection()
        conn.close()  # kept in the pool
        breakers.record_failure("mariadb", lost)
        conn.ensure_connection()  # the pooled one, through the breaker's connect guard
        assert breakers.closed("mariadb")
        breakers.record_failure("mariadb", lost)
        assert not breakers.closed("mariadb")
        with pytest.raises(DatabaseError, match="circuit breaker is open"), conn.cursor() as cur:
            cur.execute("SELECT 1")
    finally:
        conn.close()
