"""Shared fixtures: real MariaDB (pytest-django's test database), Redis, HBase and Celery workers.

Under CI (``CI`` set) every service must answer before any test runs: a missing service fails the
session, it never turns into skips. Tests isolate by unique uids (``uids`` fixture) in the shared
HBase tables, and by flushing the test Redis database before each test.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from django.conf import settings
from django.test import override_settings
from redis.exceptions import RedisError

from tests.api.factories import Api, inbox_api, send_api

ROOT = Path(__file__).resolve().parent.parent


def _service_problems() -> list[str]:
    from infra import hbase
    from infra.redis import get_redis

    problems = []
    if settings.DATABASES["default"]["ENGINE"] != "infra.mysql":
        problems.append("DATABASE_URL does not point at MySQL/MariaDB")
    try:
        get_redis().ping()
    except Exception as exc:
        problems.append(f"Redis at {settings.REDIS_URL} does not answer: {exc}")
    try:
        hbase.ping()
    except Exception as exc:
        problems.append(f"HBase Thrift at {hbase.address()} does not answer: {exc}")
    return problems


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("CI"):
        problems = _service_problems()
        if problems:
            pytest.exit("services missing under CI: " + "; ".join(problems), returncode=3)


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker: Any,
    django_db_use_migrations: bool,
    django_db_keepdb: bool,
    django_db_createdb: bool,
    django_db_modify_db_settings: None,
) -> Iterator[None]:
    """pytest-django's, except that the read replica's test database is not created there: the
    primary's replicates to it (tests/dbreplica.py)."""
    from django.test.utils import setup_databases, teardown_databases
    from pytest_django.fixtures import _disable_migrations, _get_databases_for_setup

    from tests.dbreplica import point_replica_at_test_db

    if not django_db_use_migrations:
        _disable_migrations()
    aliases, serialized = _get_databases_for_setup(request.session.items)
    keepdb = django_db_keepdb and not django_db_createdb
    with django_db_blocker.unblock():
        cfg = setup_databases(
            verbosity=request.config.option.verbose,
            interactive=False,
            aliases=dict.fromkeys(aliases - {"replica"}),  # django-stubs: a Mapping
            serialized_aliases=serialized - {"replica"},
            keepdb=keepdb,
        )
        point_replica_at_test_db()
    yield
    if not django_db_keepdb:
        with django_db_blocker.unblock():
            teardown_databases(cfg, verbosity=request.config.option.verbose)


@pytest.fixture(autouse=True)
def replica_reads(request: pytest.FixtureRequest) -> Iterator[None]:
    """Reads go to the real replica only in tests that name it (``databases=[..., "replica"]``):
    pytest-django forbids any other test to touch a database it did not name."""
    from pytest_django.fixtures import validate_django_db

    marker = request.node.get_closest_marker("django_db")
    databases = validate_django_db(marker)[2] if marker else None
    named = databases == "__all__" or "replica" in (databases or ())
    with override_settings(REPLICA_READS=settings.REPLICA_READS and named):
        yield


@pytest.fixture(scope="session", autouse=True)
def quick_password_hashes() -> Iterator[None]:
    """Passwords hashed with 1,000 PBKDF2 iterations, not 1,000,000 (tests/hashers.py)."""
    with override_settings(PASSWORD_HASHERS=["tests.hashers.QuickPBKDF2PasswordHasher"]):
        yield


@pytest.fixture(scope="session", autouse=True)
def hbase_tables(django_db_blocker: Any) -> None:
    """Create the (test-prefixed) HBase tables once per session."""
    from infra.hbase_tables import ensure_tables

    ensure_tables()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Every breaker closed again before the fixtures' teardown: the test process's own database
    connection goes through the ``mariadb`` breaker as a command's does (infra/breakers.py), and
    one a test left open must not refuse the test database's flush."""
    from infra import breakers

    breakers.reset()
    return (yield)


@pytest.fixture(autouse=True)
def closed_breakers() -> None:
    """Every store's circuit breaker closed (infra/breakers.py): an outage a test played must
    not fail the next test fast."""
    from infra import breakers
    from infra.dbrouter import forget_replica_health
    from infra.hbase import gateway_check

    breakers.reset()
    forget_replica_health()
    gateway_check.out = False  # a thread still checking a thawed gateway finds it answering


@pytest.fixture(autouse=True)
def no_process_role_left() -> Iterator[None]:
    """pytest-django's live server imports config.wsgi, and some tests config.asgi: each sets
    MISSIVE_PROCESS_ROLE=api in this process's environment, which every worker, server and
    command started after it inherited (in the full suite, every Celery worker of tests/bulk ran
    with an API process's timeouts). Taken out again after each test that set it."""
    had = "MISSIVE_PROCESS_ROLE" in os.environ
    yield
    if not had:
        os.environ.pop("MISSIVE_PROCESS_ROLE", None)


@pytest.fixture(autouse=True)
def clean_redis(closed_breakers: None) -> None:
    from infra.redis import get_redis

    get_redis().flushdb()  # on a Redis Cluster, every primary (redis-py sends it to each)


_uid_counter = itertools.count(1)
_uid_base = random.randrange(1 << 20, 1 << 40) * 1_000_000


@pytest.fixture
def uids() -> Callable[[int], list[int]]:
    """Fresh uids, unique across tests and runs (HBase tables are shared, not truncated)."""

    def make(n: int = 1) -> list[int]:
        return [_uid_base + next(_uid_counter) for _ in range(n)]

    return make


@pytest.fixture
def uid(uids: Callable[[int], list[int]]) -> int:
    return uids(1)[0]


def worker_env(db_name: str) -> dict[str, str]:
    env = dict(os.environ)
    db = settings.DATABASES["default"]
    env["DATABASE_URL"] = (
        f"mysql://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT'] or 3306}/{db_name}"
    )
    env["REDIS_CLUSTER"] = "1" if settings.REDIS_CLUSTER else "0"  # the data keys' Redis too
    # a worker's role, whatever this process's environment says: pytest-django's live server
    # imports config.wsgi, which sets MISSIVE_PROCESS_ROLE=api here for the rest of the session
    env["MISSIVE_PROCESS_ROLE"] = "worker"
    return env


class Workers:
    """Real ``celery worker`` processes on the test database; killable for fault tests."""

    def __init__(self, db_name: str) -> None:
        self.env = worker_env(db_name)
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        queues: str = "messaging,bulk.daily,bulk.priority",
        concurrency: int = 2,
        name: str | None = None,
        new_session: bool = False,
        loglevel: str = "WARNING",
    ) -> subprocess.Popen[bytes]:
        node = name or f"w{len(self.procs)}-{os.getpid()}-{next(_uid_counter)}@%h"
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "-Q",
            queues,
            "-c",
            str(concurrency),
            "-n",
            node,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            loglevel,
        ]
        # new_session: the worker and its forked children form one process group to kill -9
        proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, start_new_session=new_session)
        self.procs.append(proc)
        self._wait_ready(proc, node.replace("%h", socket.gethostname()))
        return proc

    @staticmethod
    def _wait_ready(proc: subprocess.Popen[bytes], node: str, timeout: float = 90.0) -> None:
        """Block until the worker answers a ping; fail at once if the process died."""
        from config.celery import app

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"celery worker {node} exited with {proc.returncode}")
            try:
                if app.control.ping(destination=[node], timeout=0.5):
                    return
            except (OSError, RedisError):  # a broker restarted under a pooled connection:
                continue  # kombu reconnects on the next call
        raise AssertionError(f"celery worker {node} did not answer a ping within {timeout}s")

    def kill_all(self) -> None:
        """The teardown's stop: the test has already seen its outcome, so each worker and its
        pool processes get SIGKILL (a warm shutdown took ~2.4 s a worker, 1.5 s of it joining
        the prefork pool: ~90 s over the suite, measured). A task cut short stays unacked in
        the broker, as after the kill -9 tests; ``workers`` purges the queues after this."""
        for proc in self.procs:
            try:
                pool = psutil.Process(proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                continue
            for child in pool:
                child.kill()
            proc.kill()
        for proc in self.procs:
            proc.wait(timeout=20)
        self.procs.clear()

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.procs.clear()


@pytest.fixture
def workers(transactional_db: Any) -> Iterator[Workers]:
    """Celery workers that see the test database (tests using them commit for real)."""
    from config.celery import app

    app.control.purge()
    pool = Workers(settings.DATABASES["default"]["NAME"])
    yield pool
    pool.kill_all()
    app.control.purge()


_running: list[pytest.Item] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.remove(item)


def _check_outage_is_marked(action: str, name: str) -> None:
    """``make test`` runs a test that takes a store out beside other tests only when the store
    is its own (marker ``faults``: MariaDB, its replica and Redis of a second set), and one that
    takes the shared HBase out only last, alone (``hbase_faults``): an unmarked outage would
    fail other tests at random, so it fails its own test at once instead."""
    if action not in ("stop", "kill", "freeze") or not _running:
        return
    item = _running[-1]
    needed = "hbase_faults" if name.startswith("hbase") else "faults"
    if item.get_closest_marker(needed) is None:
        raise AssertionError(f"`services {action} {name}` in a test not marked {needed}")


def services(action: str, name: str) -> None:
    """The project's own service script (``scripts/services stop|kill|start|freeze|thaw NAME``)."""
    _check_outage_is_marked(action, name)
    env = {**os.environ, "PYTHON": str(ROOT / ".venv" / "bin" / "python")}
    subprocess.run(
        [str(ROOT / "scripts" / "services"), action, name], cwd=ROOT, env=env, check=True
    )


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``manage.py *args`` in a process of its own, ``env`` over the test environment."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, every: float = 0.1) -> Any:
    """Poll until ``predicate()`` is truthy; fail the test with a clear message otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")


# -- API clients shared by the API tests (tests/api, tests/messaging) -----------------------------
@pytest.fixture
def pair(uids: Callable[[int], list[int]]) -> tuple[int, int]:
    """Two users: a sender (alice) and a receiver (bob)."""
    alice, bob = uids(2)
    return alice, bob


@pytest.fixture
def sender(pair: tuple[int, int]) -> Api:
    """A ``send`` client acting as both users of ``pair``."""
    return send_api("app", pair)


@pytest.fixture
def bff() -> Api:
    """An ``inbox`` client: the consumer front end's backend."""
    return inbox_api()
