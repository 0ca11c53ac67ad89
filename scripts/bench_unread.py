"""The unread-count fast path under load, next to Redis itself, in one run.

    python scripts/bench_unread.py [--seconds 15] [--connections 32] [--workers 3]

Serves the app with gunicorn (gthread workers: keep-alive) on loopback against database ``bench6``
(created and migrated here), Redis databases 12/13 and HBase tables ``bench6_*``; seeds 10,000
users with unread counters and an API client with the ``inbox`` scope; then drives
``GET /api/v1/users/{uid}/unread`` (a different uid per request) with wrk (installed with apt-get
if missing) and, on the same Redis, ``redis-benchmark`` GET. Prints requests/s, p50 and p99 of
both and their ratio. Goal on 2 cores: 5,000 requests/s with p99 under 10 ms.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB_NAME = "bench6"
REDIS_DB = 12
ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DATABASE_URL": f"mysql://missive:missive@127.0.0.1:3306/{DB_NAME}",
    "REDIS_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/13",
    "HBASE_TABLE_PREFIX": "bench6",
    "LOG_LEVEL": "ERROR",
}
os.environ.update(ENV)
USERS = range(5_000_000_001, 5_000_010_001)

WRK_SCRIPT = """
local first, count = %d, %d
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/api/v1/users/" .. (first + n %% count) .. "/unread")
end
"""


def ensure_wrk() -> str:
    found = shutil.which("wrk")
    if found:
        return found
    print("wrk: installing from Debian's packages")
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=True)
    return shutil.which("wrk") or "wrk"


def prepare() -> str:
    """Database, tables, counters and a token; returns the token."""
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", port=3306, user="missive", passwd="missive")
    conn.cursor().execute(
        f"CREATE DATABASE IF NOT EXISTS {DB_NAME} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    )
    conn.close()
    import django

    django.setup()
    from django.core.management import call_command

    from config.hbase_tables import ensure_tables
    from config.redis import get_redis
    from messaging.clients import api_client_create
    from messaging.convcache import prewarm
    from messaging.models import ApiClient
    from unread.services import unread_incr_many

    call_command("migrate", verbosity=0)
    ensure_tables()
    get_redis().flushdb()
    for peer in range(1, 6):  # every user has unread messages from a few peers
        unread_incr_many(owner_uids=list(USERS), peer_uid=peer, category="stranger", marker=None)
    prewarm.compute_big_ups()
    ApiClient.objects.filter(name="bench-unread").delete()
    _, token = api_client_create(name="bench-unread", scopes=["inbox"])
    return token


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_gunicorn(port: int, workers: int, threads: int) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "gunicorn",
        "config.wsgi:application",
        "-b",
        f"127.0.0.1:{port}",
        "-w",
        str(workers),
        "-k",
        "gthread",
        "--threads",
        str(threads),
        "--keep-alive",
        "30",
        "--log-level",
        "warning",
        "--backlog",
        "2048",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **ENV}, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("gunicorn did not start")


def run_wrk(wrk: str, port: int, token: str, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(WRK_SCRIPT % (USERS.start, len(USERS)))
    url = f"http://127.0.0.1:{port}"
    head = ["-H", f"Authorization: Bearer {token}", "-s", f.name, "--latency", url]
    subprocess.run([wrk, "-t1", "-c4", "-d2s", *head], capture_output=True, check=True)  # warm
    out = subprocess.run(
        [wrk, f"-t{args.threads}", f"-c{args.connections}", f"-d{args.seconds}s", *head],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    os.unlink(f.name)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50": _ms(re.search(r"50%\s+([\d.]+\w+)", out).group(1)),  # type: ignore[union-attr]
        "p99": _ms(re.search(r"99%\s+([\d.]+\w+)", out).group(1)),  # type: ignore[union-attr]
        "errors": float(errors.group(1)) if errors else 0.0,
    }


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(\w+)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def run_redis_benchmark(args: argparse.Namespace) -> dict[str, float]:
    out = subprocess.run(
        [
            "redis-benchmark",
            "-h",
            "127.0.0.1",
            "-p",
            "6379",
            "--dbnum",
            str(REDIS_DB),
            "-t",
            "get",
            "-n",
            str(args.redis_requests),
            "-c",
            str(args.connections),
            "--csv",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    row = next(r for r in csv.DictReader(io.StringIO(out)) if r["test"] == "GET")
    return {
        "rps": float(row["rps"]),
        "p50": float(row["p50_latency_ms"]),
        "p99": float(row["p99_latency_ms"]),
        "errors": 0.0,
    }


PROFILED = {
    "principal_for": "auth: token lookup (MySQL)",
    "unread_summary": "unread counters (Redis HGETALL)",
    "announcements_unread": "announcements (Redis GET x2)",
    "on_unread_request": "prewarm trigger",
    "get_response": "whole request (Django + DRF)",
}


def print_profile(token: str, requests: int = 300) -> None:
    """Where one request's time goes: in-process, through Django's full stack, under cProfile."""
    import cProfile
    import pstats

    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    paths = [f"/api/v1/users/{USERS.start + i}/unread" for i in range(requests)]
    for path in paths[:20]:
        client.get(path)
    profile = cProfile.Profile()
    profile.enable()
    for path in paths:
        client.get(path)
    profile.disable()
    found: dict[str, float] = {}
    for (_, _, name), row in pstats.Stats(profile).stats.items():  # type: ignore[attr-defined]
        if name in PROFILED:
            found[name] = max(found.get(name, 0.0), row[3] / requests * 1000)
    print(
        f"\nprofile, ms per request in one process (cProfile adds overhead), {requests} requests:"
    )
    for name, label in PROFILED.items():
        print(f"  {label:36} {found.get(name, 0.0):6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument("--worker-threads", type=int, default=2, help="threads per worker")
    parser.add_argument("--redis-requests", type=int, default=300_000)
    args = parser.parse_args()
    wrk = ensure_wrk()
    token = prepare()
    port = free_port()
    server = start_gunicorn(port, args.workers, args.worker_threads)
    try:
        http = run_wrk(wrk, port, token, args)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    redis = run_redis_benchmark(args)
    print(
        f"\nGET /api/v1/users/{{uid}}/unread on gunicorn ({args.workers} gthread workers x "
        f"{args.worker_threads} threads) vs redis-benchmark GET; {os.cpu_count()} cores, "
        f"{args.connections} connections, load generator on the same machine"
    )
    print(f"{'':28} {'requests/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for label, r in (("HTTP unread (wrk)", http), ("Redis GET (redis-benchmark)", redis)):
        print(f"{label:28} {r['rps']:11,.0f} {r['p50']:8.2f} {r['p99']:8.2f} {r['errors']:7.0f}")
    print(f"{'ratio Redis / HTTP (rps)':28} {redis['rps'] / http['rps']:10.1f}x")
    print(
        f"{'ratio HTTP / Redis (latency)':28} {'':11} {http['p50'] / redis['p50']:7.1f}x "
        f"{http['p99'] / redis['p99']:7.1f}x"
    )
    print("goal on 2 cores: HTTP >= 5,000 requests/s with p99 < 10 ms")
    print_profile(token)


if __name__ == "__main__":
    main()
