"""The unread-count fast path under load, next to Redis itself, in one run.

    python scripts/bench_unread.py [--seconds 15] [--connections 32] [--workers <cores>]

Serves the app as production should (``config/asgi.py``): gunicorn with uvicorn workers
(``uvicorn_worker.UvicornWorker``: uvloop, httptools, keep-alive), so the unread route is answered
by ``unread/fastpath.py`` and the rest by Django; on loopback against database ``bench6`` (created
and migrated here) and Redis databases 12/13 (no HBase: this path never reads it). Seeds 10,000
users with unread counters, an announcement and an API client with the ``inbox`` scope; drives
``GET /api/v1/users/{uid}/unread`` (a different uid per request) with wrk (installed with apt-get
if missing) and, on the same Redis, ``redis-benchmark`` GET. Prints requests/s, p50 and p99 of
both and their ratio, then where one request's time goes, fast path and Django view side by side.
Goal on 2 cores: 5,000 requests/s with p99 under 10 ms.
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
from typing import Any

from benchkit import children_of, cpu_s

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB_NAME = "bench6"
REDIS_DB = 12
ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DJANGO_SECRET_KEY": "bench-only-not-secret",  # DEBUG off needs a key (infra/deploy.py)
    "DATABASE_URL": f"mysql://missive:missive@127.0.0.1:3306/{DB_NAME}",
    "REDIS_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/13",
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
    """Database, counters, an announcement and a token; returns the token."""
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", port=3306, user="missive", passwd="missive")
    conn.cursor().execute(
        f"CREATE DATABASE IF NOT EXISTS {DB_NAME} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    )
    conn.close()
    import django

    django.setup()
    from django.core.management import call_command

    from api.clients import api_client_create
    from api.models import ApiClient
    from infra.redis import get_redis
    from storage.convcache import prewarm
    from storage.counters.store import unread_incr_many
    from unread.announcements import announcement_publish

    call_command("migrate", verbosity=0)
    leave_groups()
    get_redis().flushdb()
    for peer in range(1, 6):  # every user has unread messages from a few peers
        unread_incr_many(owner_uids=list(USERS), peer_uid=peer, category="stranger", marker=None)
    prewarm.compute_big_ups()
    announcement_publish(content="bench: counted in every user's unread")
    ApiClient.objects.filter(name="bench-unread").delete()
    _, token = api_client_create(name="bench-unread", scopes=["inbox"])
    return token


GROUP_MEMBERS = 200


def leave_groups() -> None:
    """Drop a previous ``--groups`` run's groups from MySQL: ``prepare`` empties Redis, and users
    left in 500 groups there would send the next run's first requests to Django to rebuild them
    (about a second each), which is not what a run without ``--groups`` measures."""
    from groups.models import Group, GroupMember

    GroupMember.objects.filter(uid__gte=USERS.start, uid__lt=USERS.stop).delete()
    Group.objects.filter(owner_uid__gte=6_000_000_000, owner_uid__lt=6_001_000_000).delete()


def join_groups(groups: int) -> int:
    """Make the first GROUP_MEMBERS users members of ``groups`` groups, each with one message
    unread (every tenth @mentioning them): the users wrk then asks about. Returns their count."""
    from groups import services

    members = list(USERS)[:GROUP_MEMBERS]
    for g in range(groups):
        group, _ = services.group_create(
            owner_uid=6_000_000_000 + g, name=f"bench {g}", member_uids=members
        )
        services.group_message_send(
            gid=group.gid,
            sender_uid=6_000_000_000 + g,
            content={"type": "text", "text": f"hello from group {g}"},
            client_msg_id=f"bench-{group.gid}",
            mentions=members if g % 10 == 0 else [],
        )
    return len(members)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_gunicorn(port: int, workers: int, log: Path) -> subprocess.Popen[bytes]:
    """Returns once every worker has finished its lifespan startup: the port alone answers as soon
    as the arbiter binds it, while workers may still be importing Django (on a loaded machine that
    can take seconds, which a warm-up run would then fail to cover)."""
    cmd = [
        sys.executable,
        "-m",
        "gunicorn",
        "config.asgi:application",
        "-b",
        f"127.0.0.1:{port}",
        "-w",
        str(workers),
        "-k",
        "uvicorn_worker.UvicornWorker",
        "--keep-alive",
        "30",
        "--log-level",
        "info",  # into ``log``: each worker says "Application startup complete"
        "--backlog",
        "2048",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env={**os.environ, **ENV}, stdout=out, stderr=out, start_new_session=True
        )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        if log.read_text(errors="replace").count("Application startup complete") >= workers:
            return proc
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the master and its workers (a session of their own)
    raise RuntimeError(f"gunicorn did not start; its log: {log}")


def run_wrk(
    wrk: str, port: int, token: str, args: argparse.Namespace, server: int, users: int
) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(WRK_SCRIPT % (USERS.start, users))
    url = f"http://127.0.0.1:{port}"
    head = ["-H", f"Authorization: Bearer {token}", "-s", f.name, "--latency", url]
    # warm: every worker's first requests go through Django, which caches the principal there
    warm = [wrk, "-t1", f"-c{args.connections}", "-d2s", *head]
    subprocess.run(warm, capture_output=True, check=True)
    cpu_before = cpu_s(children_of(server))
    out = subprocess.run(
        [wrk, f"-t{args.threads}", f"-c{args.connections}", f"-d{args.seconds}s", *head],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cpu = cpu_s(children_of(server)) - cpu_before
    os.unlink(f.name)
    done = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    failed = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50": _ms(re.search(r"50%\s+([\d.]+\w+)", out).group(1)),  # type: ignore[union-attr]
        "p99": _ms(re.search(r"99%\s+([\d.]+\w+)", out).group(1)),  # type: ignore[union-attr]
        "errors": (int(errors.group(1)) if errors else 0)
        + (sum(int(n) for n in failed.groups()) if failed else 0),
        "cpu_us": cpu / max(done, 1) * 1e6,
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


FAST_PARTS = {
    "token": "headers, Host, bearer token",
    "cached_principal": "principal from the process cache",
    "pipeline": "Redis pipeline, 6 commands (CPU only)",
    "unread_from_copy": "announcements count from the copy",
    "big_up_cached": "big-UP check (prewarm trigger)",
}
DJANGO_PARTS = {
    "principal_for": "auth: generation check + principal cache",
    "unread_summary": "unread counters (Redis HGETALL)",
    "announcements_unread": "announcements (Redis GET x2)",
    "on_unread_request": "prewarm trigger",
}


def print_profile(token: str, requests: int = 2000) -> None:
    """Where one request's time goes, in one process with no HTTP: the fast path (``config.asgi``)
    against the Django + DRF view it steps aside to (also all that ``config.wsgi`` serves)."""
    import uvloop
    from django.test import Client

    from config.asgi import application

    paths = [f"/api/v1/users/{USERS.start + i}/unread" for i in range(requests)]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    for path in paths[:20]:  # caches the principal for both paths: one process
        assert client.get(path).status_code == 200
    headers = [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {token}".encode())]

    def fast() -> None:
        uvloop.run(_fast_requests(application, paths, headers))

    def django() -> None:
        for path in paths[: requests // 10]:
            client.get(path)

    print("\nprofile, one process, no HTTP, µs per request (cProfile lines: compare, do not add)")
    for label, run, n, parts in (
        ("fast path (config.asgi)", fast, requests, FAST_PARTS),
        ("Django + DRF view", django, requests // 10, DJANGO_PARTS),
    ):
        wall, cpu = _timed(run, n)
        print(f"  {label + f', {n} requests: wall / CPU':46} {wall:7.0f} {cpu:7.0f}")
        for part, value in _parts(run, parts, n).items():
            print(f"    {part:44} {value:7.1f}")


async def _fast_requests(app: Any, paths: list[str], headers: list[tuple[bytes, bytes]]) -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200, message

    for path in paths:
        scope = {"type": "http", "method": "GET", "path": path, "query_string": b""}
        await app({**scope, "headers": headers, "root_path": ""}, receive, send)
    await app.redis.aclose()


def _timed(run: Any, requests: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return (
        (time.perf_counter() - wall) / requests * 1e6,
        (time.process_time() - cpu) / requests * 1e6,
    )


def _parts(run: Any, parts: dict[str, str], requests: int) -> dict[str, float]:
    """cProfile's cumulative time per named function (it adds overhead: compare, do not add)."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.runcall(run)
    found: dict[str, float] = {}
    for (_, _, name), row in pstats.Stats(profile).stats.items():  # type: ignore[attr-defined]
        if name in parts:
            found[parts[name]] = max(found.get(parts[name], 0.0), row[3] / requests * 1e6)
    return {label: found.get(label, 0.0) for label in parts.values()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="gunicorn workers")
    parser.add_argument("--redis-requests", type=int, default=300_000)
    parser.add_argument(
        "--groups", type=int, default=0, help=f"ask about {GROUP_MEMBERS} users in N groups each"
    )
    args = parser.parse_args()
    wrk = ensure_wrk()
    token = prepare()
    users = join_groups(args.groups) if args.groups else len(USERS)
    port = free_port()
    server = start_gunicorn(port, args.workers, Path(tempfile.gettempdir()) / "bench_unread.log")
    try:
        http = run_wrk(wrk, port, token, args, server.pid, users)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    redis = run_redis_benchmark(args)
    print(
        f"\nGET /api/v1/users/{{uid}}/unread on gunicorn ({args.workers} uvicorn workers, "
        f"config.asgi) vs redis-benchmark GET; {os.cpu_count()} cores, {args.connections} "
        "connections, load generator on the same machine"
        + (f"; {users} users in {args.groups} groups each" if args.groups else "")
    )
    print(f"{'':28} {'requests/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for label, r in (("HTTP unread (wrk)", http), ("Redis GET (redis-benchmark)", redis)):
        print(f"{label:28} {r['rps']:11,.0f} {r['p50']:8.2f} {r['p99']:8.2f} {r['errors']:7.0f}")
    print(f"{'ratio Redis / HTTP (rps)':28} {redis['rps'] / http['rps']:10.1f}x")
    print(
        f"{'ratio HTTP / Redis (latency)':28} {'':11} {http['p50'] / redis['p50']:7.1f}x "
        f"{http['p99'] / redis['p99']:7.1f}x"
    )
    print(f"server CPU per HTTP request (all workers): {http['cpu_us']:.0f} µs")
    print("goal on 2 cores: HTTP >= 5,000 requests/s with p99 < 10 ms")
    print_profile(token)


if __name__ == "__main__":
    main()
