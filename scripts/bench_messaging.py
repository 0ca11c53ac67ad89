#!/usr/bin/env python
"""Benchmark 1:1 messaging: sends/s and latency, conversation-list and history latency.

For each inbox backend (sql, hbase) and each path:
  service  ``messaging.services.message_send`` / ``messaging.selectors`` called in-process
  http     the v1 API served by gunicorn (a real WSGI server this script starts on a loopback
           port), called over keep-alive HTTP/1.1 connections
with ``--concurrency`` client threads. Prints one markdown table, side by side.

Runs against the real services (MariaDB, Redis, HBase Thrift); defaults keep off the data of
``make test`` and development: database ``missive_bench`` (created and migrated if missing),
Redis database 6, HBase table prefix ``bench``. Each run uses fresh uids, so runs never mix.

    scripts/bench_messaging.py                       # 2,000 sends + 500 reads of each kind per mode
    scripts/bench_messaging.py --sends 500 --backends sql --modes http --workers 4
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULTS = {
    "DATABASE_URL": "mysql://missive:missive@127.0.0.1:3306/missive_bench",
    "REDIS_URL": "redis://127.0.0.1:6379/6",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/7",
    "HBASE_TABLE_PREFIX": "bench",
}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sends", type=int, default=2000, help="sends per backend and mode")
    p.add_argument("--reads", type=int, default=500, help="list and history reads per mode")
    p.add_argument("--users", type=int, default=200, help="users per backend and mode")
    p.add_argument("--concurrency", type=int, default=8, help="client threads")
    p.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    p.add_argument("--threads", type=int, default=1, help="threads per worker (>1: gthread)")
    p.add_argument("--backends", default="sql,hbase")
    p.add_argument("--modes", default="service,http")
    p.add_argument("--json", type=Path, help="also write the raw figures here")
    return p.parse_args()


# -- setup -----------------------------------------------------------------------------------------
def configure_env() -> None:
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-not-secret")  # infra/deploy.py
    sys.path.insert(0, str(ROOT))


def ensure_database() -> None:
    import dj_database_url
    import MySQLdb

    db = dj_database_url.parse(os.environ["DATABASE_URL"])
    if not db["ENGINE"].endswith("mysql"):
        return
    conn = MySQLdb.connect(
        host=db["HOST"], port=int(db["PORT"] or 3306), user=db["USER"], password=db["PASSWORD"]
    )
    conn.cursor().execute(
        f"CREATE DATABASE IF NOT EXISTS `{db['NAME']}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    )
    conn.close()


def setup_django() -> None:
    import django
    from django.core.management import call_command

    ensure_database()
    django.setup()
    call_command("migrate", verbosity=0)
    from infra.hbase_tables import ensure_tables

    ensure_tables()


def use_backend(name: str) -> None:
    from django.conf import settings

    from storage.inbox import _cached

    settings.INBOX_BACKEND = name
    _cached.cache_clear()


_failures: list[str] = []  # unexpected answers and exceptions, reported at the end


# -- measurement -----------------------------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


@dataclass
class Timing:
    latencies_ms: list[float]
    wall_s: float
    errors: int

    @property
    def rate(self) -> float:
        return len(self.latencies_ms) / self.wall_s if self.wall_s else 0.0

    def summary(self) -> dict[str, float]:
        lat = self.latencies_ms or [0.0]
        return {
            "per_s": round(self.rate, 1),
            "p50_ms": round(percentile(lat, 0.50), 2),
            "p99_ms": round(percentile(lat, 0.99), 2),
            "errors": self.errors,
        }


def guarded(call: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """Count an exception as a failed call (and remember it) instead of ending the run."""

    def run(job: Any) -> bool:
        try:
            return call(job)
        except Exception as exc:
            _failures.append(repr(exc)[:300])
            return False

    return run


def run_timed(
    jobs: Sequence[Any],
    call: Callable[[Any], bool],
    concurrency: int,
    per_thread_end: Callable[[], None] | None = None,
) -> Timing:
    """Run ``call(job)`` over all jobs on ``concurrency`` threads; time each call."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    chunks = [jobs[i::concurrency] for i in range(concurrency)]

    def worker(chunk: Sequence[Any]) -> None:
        nonlocal errors
        mine, bad = [], 0
        for job in chunk:
            start = time.perf_counter()
            ok = guarded(call)(job)
            mine.append((time.perf_counter() - start) * 1000)
            bad += 0 if ok else 1
        if per_thread_end:
            per_thread_end()
        with lock:
            latencies.extend(mine)
            errors += bad

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(worker, chunks))
    return Timing(latencies, time.perf_counter() - start, errors)


@dataclass
class Workload:
    """Fresh users, random distinct-pair sends, then reads of what the sends created."""

    users: list[int]
    sends: list[tuple[int, int, str]]
    reads: int
    touched: list[tuple[int, int]] = field(default_factory=list)

    @classmethod
    def make(cls, n_users: int, n_sends: int, n_reads: int) -> Workload:
        base = random.randrange(1 << 30, 1 << 40) * 1000
        users = [base + i for i in range(n_users)]
        tag = f"{base:x}"
        sends = []
        for i in range(n_sends):
            a, b = random.sample(users, 2)
            sends.append((a, b, f"{tag}-{i}"))
        return cls(users, sends, n_reads)

    def list_jobs(self) -> list[int]:
        return [random.choice(self.users) for _ in range(self.reads)]

    def history_jobs(self) -> list[tuple[int, int]]:
        return [random.choice(self.sends)[:2] for _ in range(self.reads)]


TEXT = "benchmark message: a typical short chat line 🚀"


# -- the service path -----------------------------------------------------------------------------
def bench_service(work: Workload, concurrency: int) -> dict[str, dict[str, float]]:
    from django.db import connections

    from messaging import selectors, services

    def send(job: tuple[int, int, str]) -> bool:
        services.message_send(
            sender_uid=job[0],
            receiver_uid=job[1],
            content={"type": "text", "text": TEXT},
            client_msg_id=job[2],
        )
        return True

    def conv_list(uid: int) -> bool:
        selectors.conversation_list(uid, limit=20)
        return True

    def history(job: tuple[int, int]) -> bool:
        selectors.history(job[0], job[1], limit=50)
        return True

    close = connections.close_all  # each thread closes its own connection
    return {
        "send": run_timed(work.sends, send, concurrency, close).summary(),
        "list": run_timed(work.list_jobs(), conv_list, concurrency, close).summary(),
        "history": run_timed(work.history_jobs(), history, concurrency, close).summary(),
    }


# -- the HTTP path ---------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """gunicorn serving config.wsgi on a loopback port, with one inbox backend."""

    def __init__(self, backend: str, workers: int, threads: int) -> None:
        self.port = free_port()
        env = dict(os.environ, INBOX_BACKEND=backend, LOG_LEVEL="ERROR")
        worker_class = ["-k", "gthread", "--threads", str(threads)] if threads > 1 else []
        cmd = [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi:application",
            "-b",
            f"127.0.0.1:{self.port}",
            "-w",
            str(workers),
            *worker_class,
            "--keep-alive",
            "30",
            "--log-level",
            "warning",
        ]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env)

    def wait_ready(self, token: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("gunicorn exited")
            try:
                if request(self.port, token, "GET", "/api/v1/users/1/unread")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("gunicorn did not answer")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


_local = threading.local()


def expect(answer: tuple[int, bytes], status: int) -> bool:
    if answer[0] == status:
        return True
    _failures.append(f"{answer[0]} {answer[1][:300]!r}")
    return False


def request(port: int, token: str, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    """One request on this thread's keep-alive connection (reopened if the server closed it)."""
    conn = getattr(_local, "conn", None)
    if conn is None or getattr(_local, "port", None) != port:
        conn = _local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        _local.port = port
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    payload = None if body is None else json.dumps(body)
    try:
        conn.request(method, path, payload, headers)
        response = conn.getresponse()
    except (http.client.HTTPException, OSError):
        conn.close()  # a worker recycled the connection: one retry on a fresh one
        conn.request(method, path, payload, headers)
        response = conn.getresponse()
    return response.status, response.read()


def bench_http(
    work: Workload,
    concurrency: int,
    server: Server,
    token: str,
) -> dict[str, dict[str, float]]:
    port = server.port

    def send(job: tuple[int, int, str]) -> bool:
        body = {
            "sender_uid": job[0],
            "receiver_uid": job[1],
            "content": {"type": "text", "text": TEXT},
            "client_msg_id": job[2],
        }
        return expect(request(port, token, "POST", "/api/v1/messages", body), 201)

    def conv_list(uid: int) -> bool:
        return expect(
            request(port, token, "GET", f"/api/v1/users/{uid}/conversations?limit=20"), 200
        )

    def history(job: tuple[int, int]) -> bool:
        path = f"/api/v1/users/{job[0]}/conversations/{job[1]}/messages?limit=50"
        return expect(request(port, token, "GET", path), 200)

    return {
        "send": run_timed(work.sends, send, concurrency).summary(),
        "list": run_timed(work.list_jobs(), conv_list, concurrency).summary(),
        "history": run_timed(work.history_jobs(), history, concurrency).summary(),
    }


def bench_client(users: Sequence[int]) -> str:
    from api.clients import api_client_create

    _, token = api_client_create(
        name=f"bench-{time.time_ns()}", scopes=["send", "inbox"], sender_uids=users
    )
    return token


# -- driver ----------------------------------------------------------------------------------------
def warm_up(run: Callable[[Workload], Any], args: argparse.Namespace) -> None:
    run(Workload.make(20, min(50, args.sends), 20))


def run_mode(backend: str, mode: str, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    work = Workload.make(args.users, args.sends, args.reads)
    use_backend(backend)
    if mode == "service":
        warm_up(lambda w: bench_service(w, args.concurrency), args)
        return bench_service(work, args.concurrency)
    token = bench_client(work.users)
    server = Server(backend, args.workers, args.threads)
    try:
        server.wait_ready(token)
        warm = Workload.make(20, min(50, args.sends), 20)
        warm_token = bench_client(warm.users)
        bench_http(warm, args.concurrency, server, warm_token)
        return bench_http(work, args.concurrency, server, token)
    finally:
        server.stop()


ROWS = [
    ("sends/s", "send", "per_s"),
    ("send p50 ms", "send", "p50_ms"),
    ("send p99 ms", "send", "p99_ms"),
    ("conversation list p50 ms", "list", "p50_ms"),
    ("conversation list p99 ms", "list", "p99_ms"),
    ("history p50 ms", "history", "p50_ms"),
    ("history p99 ms", "history", "p99_ms"),
    ("errors (all kinds)", None, "errors"),
]


def table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    columns = list(results)
    lines = ["| metric | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for label, kind, key in ROWS:
        if kind is None:
            cells = [str(sum(int(r[k][key]) for k in r)) for r in results.values()]
        else:
            cells = [f"{results[c][kind][key]:g}" for c in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    configure_env()
    setup_django()
    results: dict[str, dict[str, dict[str, float]]] = {}
    for mode in args.modes.split(","):
        for backend in args.backends.split(","):
            print(f"running {backend}/{mode} ...", file=sys.stderr, flush=True)
            results[f"{backend} {mode}"] = run_mode(backend, mode, args)
    print(
        f"\n{args.sends} sends, {args.reads} list + {args.reads} history reads per column; "
        f"{args.concurrency} client threads; gunicorn {args.workers} workers x "
        f"{args.threads} threads\n"
    )
    print(table(results))
    for failure in sorted(set(_failures))[:10]:
        print("failure:", failure, file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
