#!/usr/bin/env python
"""Benchmark group chat on read diffusion (issue 12, item 8), side by side in one run:

  send     p50/p99 of ``groups.services.group_message_send`` into groups of 10, 1,000
           and 100,000 members (``--sizes``): flat, the send writes nothing per member
  ceiling  sends/s into ONE group from ``--concurrency`` threads: the ceiling of the one atomic
           seq step (``UPDATE messaging_group SET max_seq = max_seq + 1`` under the row lock)
  unread   ``GET /api/v1/users/{uid}/unread`` for a user in ``--groups`` groups, through the
           fast path (``unread/fastpath.py``, in-process ASGI) and through the Django view
  list     the conversation-list first page (20) for that user, warm
  fanout   for contrast: write diffusion of one message to ``--fanout`` receivers with the
           existing 1:1 fan-out (``messaging.services.deliver_many``, 1,000 per call)

In-process (service) figures on the real services; requests/s of the unread endpoint behind
gunicorn are scripts/bench_unread.py's job (point it at the printed uid). Defaults keep off the
data of ``make test``: database ``missive_bench``, Redis database 6, HBase prefix ``bench``.

    .venv/bin/python scripts/bench_groups.py            # the full run (minutes: 100k members)
    .venv/bin/python scripts/bench_groups.py --sizes 10,1000 --groups 50 --fanout 10000 --sends 200
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULTS = {
    "DATABASE_URL": "mysql://missive:missive@127.0.0.1:3306/missive_bench",
    "REDIS_URL": "redis://127.0.0.1:6379/6",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/7",
    "HBASE_TABLE_PREFIX": "bench",
}
TEXT = {"type": "text", "text": "hello, group"}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="10,1000,100000", help="group sizes to send into")
    p.add_argument("--sends", type=int, default=500, help="sends per group size")
    p.add_argument("--concurrency", type=int, default=8, help="threads for the seq ceiling")
    p.add_argument("--ceiling-sends", type=int, default=2000, help="sends into one group")
    p.add_argument("--groups", type=int, default=500, help="groups of the unread user")
    p.add_argument("--reads", type=int, default=2000, help="unread and list reads")
    p.add_argument("--fanout", type=int, default=100_000, help="receivers of the contrast")
    p.add_argument("--backend", default="hbase", help="group timeline and inbox backend")
    return p.parse_args()


def configure_env(backend: str) -> None:
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)
    os.environ.setdefault("INBOX_BACKEND", backend)
    os.environ.setdefault("GROUP_TIMELINE_BACKEND", backend)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-not-secret")  # infra/deploy.py
    sys.path.insert(0, str(ROOT))


def setup_django() -> None:
    import dj_database_url
    import django
    import MySQLdb
    from django.core.management import call_command

    db = dj_database_url.parse(os.environ["DATABASE_URL"])
    if db["ENGINE"].endswith("mysql"):
        conn = MySQLdb.connect(
            host=db["HOST"], port=int(db["PORT"] or 3306), user=db["USER"], password=db["PASSWORD"]
        )
        conn.cursor().execute(
            f"CREATE DATABASE IF NOT EXISTS `{db['NAME']}` CHARACTER SET utf8mb4 "
            "COLLATE utf8mb4_bin"
        )
        conn.close()
    django.setup()
    call_command("migrate", verbosity=0)
    from infra.hbase_tables import ensure_tables

    ensure_tables()


# -- measurement -----------------------------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values) or [0.0]
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def timed(calls: int, call: Callable[[int], Any]) -> tuple[list[float], float]:
    """Latencies (ms) of ``calls`` sequential calls, and the wall time (s)."""
    latencies, start = [], time.perf_counter()
    for i in range(calls):
        t0 = time.perf_counter()
        call(i)
        latencies.append((time.perf_counter() - t0) * 1000)
    return latencies, time.perf_counter() - start


def row(name: str, latencies: list[float], wall_s: float, note: str = "") -> str:
    rate = len(latencies) / wall_s if wall_s else 0.0
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    return f"| {name} | {len(latencies)} | {rate:,.0f} | {p50:.2f} | {p99:.2f} | {note} |"


class Uids:
    def __init__(self) -> None:
        self.next = int(time.time() * 1000) * 1_000_000

    def take(self, n: int) -> list[int]:
        start, self.next = self.next, self.next + n
        return list(range(start, start + n))


# -- scenes ----------------------------------------------------------------------------------------
def make_group(uids: Uids, size: int) -> tuple[int, list[int]]:
    from groups import services

    owner, *members = uids.take(size)
    group, _ = services.group_create(owner_uid=owner, name=f"bench {size}", member_uids=[])
    for start in range(0, len(members), services.UIDS_PER_CALL):
        chunk = members[start : start + services.UIDS_PER_CALL]
        services.group_members_add(gid=group.gid, actor_uid=owner, uids=chunk)
    return group.gid, [owner, *members]


def bench_sends(uids: Uids, sizes: list[int], sends: int) -> list[str]:
    from groups import services

    rows = []
    for size in sizes:
        t0 = time.perf_counter()
        gid, members = make_group(uids, size)
        built = time.perf_counter() - t0
        senders = members[:50]

        def send(i: int, gid: int = gid, senders: list[int] = senders) -> None:
            services.group_message_send(
                gid=gid, sender_uid=senders[i % len(senders)], content=TEXT, client_msg_id=f"b{i}"
            )

        latencies, wall = timed(sends, send)
        rows.append(row(f"send into {size:,} members", latencies, wall, f"built in {built:.1f} s"))
    return rows


def bench_ceiling(uids: Uids, threads: int, total: int) -> str:
    from django.db import connection

    from groups import services

    gid, members = make_group(uids, threads + 1)
    latencies: list[float] = []
    lock = threading.Lock()

    def worker(k: int) -> None:
        mine = []
        for i in range(total // threads):
            t0 = time.perf_counter()
            services.group_message_send(
                gid=gid, sender_uid=members[k], content=TEXT, client_msg_id=f"c{k}-{i}"
            )
            mine.append((time.perf_counter() - t0) * 1000)
        with lock:
            latencies.extend(mine)
        connection.close()

    start = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - start
    return row(f"one group, {threads} senders (seq ceiling)", latencies, wall)


def bench_reads(uids: Uids, groups: int, reads: int) -> tuple[list[str], int]:
    from groups import services
    from groups.selectors import conversations_and_groups

    owner, user = uids.take(2)
    for g in range(groups):
        group, _ = services.group_create(owner_uid=owner + g, name=f"g{g}", member_uids=[user])
        services.group_message_send(
            gid=group.gid,
            sender_uid=owner + g,
            content=TEXT,
            client_msg_id=f"r{g}",
            mentions=[user] if g % 10 == 0 else [],
        )
    rows = [*bench_unread(user, reads)]
    conversations_and_groups(user, limit=20)  # warm
    latencies, wall = timed(reads, lambda i: conversations_and_groups(user, limit=20))
    rows.append(row(f"conversation list, first 20 ({groups} groups)", latencies, wall))
    return rows, user


def bench_unread(uid: int, reads: int) -> list[str]:
    import asyncio

    from django.core.asgi import get_asgi_application
    from rest_framework.test import APIClient

    from api.clients import api_client_create
    from api.models import Scope
    from unread.fastpath import UnreadFastPath

    _, token = api_client_create(name=f"bench-groups-{uid}", scopes=[Scope.INBOX])
    path = f"/api/v1/users/{uid}/unread"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get(path).status_code == 200  # caches the principal
    latencies, wall = timed(reads, lambda i: client.get(path))
    rows = [row("unread, Django view (in-process)", latencies, wall)]
    handed: list[int] = []

    async def django(scope: Any, receive: Any, send: Any) -> None:
        handed.append(1)
        await get_asgi_application()(scope, receive, send)

    app = UnreadFastPath(django)
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {token}".encode())],
    }

    async def run() -> list[float]:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Any) -> None:
            return None

        out = []
        for _ in range(reads):
            t0 = time.perf_counter()
            await app(scope, receive, send)
            out.append((time.perf_counter() - t0) * 1000)
        return out

    start = time.perf_counter()
    fast = asyncio.run(run())
    note = f"{len(handed)} handed to Django" if handed else ""
    rows.append(row("unread, fast path (in-process ASGI)", fast, time.perf_counter() - start, note))
    return rows


def bench_fanout(uids: Uids, receivers: int) -> str:
    from messaging.services import deliver_many, message_store
    from storage import msgkey

    sender, *everyone = uids.take(receivers + 1)
    message = message_store(sender_uid=sender, body=TEXT, msgkey=msgkey.next_msgkey())
    start = time.perf_counter()
    for i in range(0, len(everyone), 1000):
        deliver_many(
            sender_uid=sender,
            receiver_uids=everyone[i : i + 1000],
            msgkey=message.msgkey,
            category="business",
            marker=f"bench:{message.msgkey}:{i}",
        )
    wall = time.perf_counter() - start
    return row(f"write diffusion of 1 message to {receivers:,}", [wall * 1000], wall, "contrast")


def main() -> None:
    args = parse_args()
    configure_env(args.backend)
    setup_django()
    uids = Uids()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print(f"backend {args.backend}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print("| what | calls | per s | p50 ms | p99 ms | note |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for line in bench_sends(uids, sizes, args.sends):
        print(line, flush=True)
    print(bench_ceiling(uids, args.concurrency, args.ceiling_sends), flush=True)
    rows, user = bench_reads(uids, args.groups, args.reads)
    for line in rows:
        print(line, flush=True)
    print(bench_fanout(uids, args.fanout), flush=True)
    print(f"\nunread user (for scripts/bench_unread.py): {user}")


if __name__ == "__main__":
    main()
