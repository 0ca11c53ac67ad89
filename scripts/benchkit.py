"""What several benchmark scripts share. Each script sets up its own stores (environment, then
``django.setup()``) before it calls ``prepare_stores``; ``serve`` needs nothing of Django."""

from __future__ import annotations

import math
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def cpu_s(pids: Iterable[int], *, descendants: bool = False) -> float:
    """User + system CPU seconds these processes have used so far, all their threads, and with
    ``descendants`` their child processes' too (a Celery worker's pool). A process that ended
    meanwhile counts nothing."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            top = psutil.Process(pid)
            procs = [top, *top.children(recursive=True)] if descendants else [top]
            total += sum(sum(one.cpu_times()[:2]) for one in procs)
        except psutil.Error:  # ended meanwhile
            continue
    return total


def children_of(pid: int) -> list[int]:
    """The pids of a process's children (a gunicorn master's workers)."""
    import psutil

    return [child.pid for child in psutil.Process(pid).children()]


def redis_cpu_s(client: Any) -> float:
    """A Redis server's own CPU seconds so far (``INFO cpu``: user + system)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def create_database(name: str) -> None:
    """The benchmark's own MariaDB database on the services' primary, if missing (utf8mb4_bin,
    as the project's); before ``django.setup()``, which needs it to exist."""
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", user="missive", passwd="missive")
    conn.cursor().execute(
        f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    )
    conn.close()


def serve(
    cmd: list[str], port: int, env: dict[str, str], what: str, settle_s: float = 0.0
) -> subprocess.Popen[bytes]:
    """Start a server (``cmd``, run in the project's root) and return once it listens on
    ``port`` (then ``settle_s`` more: gunicorn's workers import after the port opens)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            time.sleep(settle_s)
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the {what} did not start")


def prepare_stores(batch_size: int) -> int:
    """The stores as a campaign benchmark starts from: schema migrated, HBase tables, an empty
    Redis database, the HBase index of conversation lists trusted (as the beat does once per
    Redis run), an empty task queue, the daily channel unthrottled with batches of
    ``batch_size``. Returns how many owners the index flagged."""
    from django.core.management import call_command

    from bulk.models import ChannelSetting
    from config.celery import app
    from infra.redis import get_redis
    from storage.convcache import build

    call_command("migrate", verbosity=0)
    call_command("hbase_init", verbosity=0)
    get_redis().flushdb()
    flagged = build.index_rebuild()
    app.control.purge()
    ChannelSetting.objects.update_or_create(
        channel="daily", defaults={"rate_per_s": 10**9, "batch_size": batch_size}
    )
    return flagged


REHASH_LUA = """
for _ = 1, tonumber(ARGV[1]) do redis.call('EXISTS', 'bench:rehash') end
return 0
"""
REHASH_CHUNK = 500_000  # lookups a call (~0.6 s): each moves one bucket of a running rehash


def finish_rehash(redis: Any, limit_s: float = 300.0) -> None:
    """Finish the move of the bench's Redis keys into a doubled table before anything is timed.

    A preload that crossed 2^24 keys leaves Redis rehashing 2^24 buckets, during which each
    command costs more. The first runs of 7 Dec 12:40 met it: 100k at 15.7k/s against 25.6k/s at
    1M. Left to its cron, Redis moved a 2^20-bucket table in 345 s on this idle machine; every
    lookup moves one bucket as well, and 700,000 EXISTS (script calls of 100,000) finished it in
    0.8 s.
    ``MEMORY STATS`` tells when it is done: in Redis 7.0 its table overhead is 40 bytes a key
    (dictEntry and key robj) plus 8 a bucket, both tables' buckets while a rehash runs (1.5
    times a power of two)."""
    started, lookups = time.perf_counter(), 0
    db = f"db.{redis.connection_pool.connection_kwargs.get('db', 0)}"
    while time.perf_counter() - started < limit_s:
        keys = redis.dbsize()
        overhead = redis.memory_stats().get(db, {}).get("overhead.hashtable.main", 0)
        buckets = max((overhead - 40 * keys) // 8, 1)
        if abs(buckets - 2 ** round(math.log2(buckets))) < buckets / 8:
            break
        redis.eval(REHASH_LUA, 0, REHASH_CHUNK)
        lookups += REHASH_CHUNK
    if lookups:
        print(
            f"Redis: its keyspace's rehash finished by {lookups:,} lookups in "
            f"{time.perf_counter() - started:.0f}s"
        )


PRELOAD_LUA = """
for uid = tonumber(ARGV[1]), tonumber(ARGV[2]) do
  redis.call('HSET', 'unread:{u:' .. uid .. '}', 't', 1, 'c:primary', 1, 'p:1', 1, 'k:1', 'primary')
end
return 0
"""
PRELOAD_CHUNK = 250_000  # unread hashes per script call (about a second of Redis)


def preload_site(redis: Any, count: int, done: Callable[[int], None] | None = None) -> None:
    """Unread hashes of users 1..``count`` (one unread conversation each), as a production
    Redis holds the site's other users' keys; ``done`` is told how many are written after each
    script call. ``redis`` needs no read timeout shorter than a call (~1 s)."""
    for first in range(1, count + 1, PRELOAD_CHUNK):
        last = min(first + PRELOAD_CHUNK - 1, count)
        redis.eval(PRELOAD_LUA, 0, first, last)
        if done:
            done(last)
