"""Conversation-list first page for an owner with 200,000 conversations, tier by tier.

    python scripts/bench_reads.py [--conversations 200000] [--hbase-delay-ms 60]

Runs against the real services on loopback, in its own MariaDB database ``bench6`` (created and
migrated here), Redis databases 12/13 and HBase tables ``bench6_*``. One run prints, side by side,
p50/p99 of ``messaging.selectors.conversation_list(owner)`` (the first page, 20 items):

- raw SQL ``ORDER BY sort_key DESC, peer_uid DESC LIMIT 21`` (what the selector did before the one
  read model: MySQL sorts all 200,000 rows), for contrast
- the selector with the cache off: ``messaging.convlist.mysql_page``, the one MySQL pager, through
  the (owner_uid, sort_key) index (no filesort)
- cold: nothing cached (Redis keys gone, HBase row stale): MySQL answers, both tiers refill
- Redis tier, after a prewarm
- HBase tier, after the owner's Redis keys are flushed (each read refills Redis)
- HBase slowed by a delaying TCP proxy in front of Thrift: hedge on (CONVCACHE_HEDGE_MS) vs off

Seeding is bulk SQL (about a minute the first time) and is kept for the next run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB_NAME = "bench6"
os.environ.update(
    DJANGO_SETTINGS_MODULE="config.settings",
    DJANGO_SECRET_KEY="bench-only-not-secret",  # DEBUG off needs a key (infra/deploy.py)
    DATABASE_URL=f"mysql://missive:missive@127.0.0.1:3306/{DB_NAME}",
    REDIS_URL="redis://127.0.0.1:6379/12",
    CELERY_BROKER_URL="redis://127.0.0.1:6379/13",
    HBASE_TABLE_PREFIX="bench6",
    CONVCACHE_HBASE="1",
    LOG_LEVEL="ERROR",
)

OWNER = 7_000_000_000_001
CATEGORIES = ("followed", "stranger", "business", "system")


def create_database() -> None:
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", port=3306, user="missive", passwd="missive")
    conn.cursor().execute(
        f"CREATE DATABASE IF NOT EXISTS {DB_NAME} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    )
    conn.close()


create_database()

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from infra import hbase  # noqa: E402
from infra.hbase_tables import ensure_tables  # noqa: E402
from infra.redis import get_redis  # noqa: E402
from messaging import selectors  # noqa: E402
from messaging.models import Conversation  # noqa: E402
from storage import msgkey as keys  # noqa: E402
from storage.convcache import hbase_tier, pools, prewarm, reader  # noqa: E402
from storage.convcache import keys as cache_keys  # noqa: E402


# -- data ----------------------------------------------------------------------------------------
def seed(n: int) -> None:
    have = Conversation.objects.filter(owner_uid=OWNER).count()
    if have == n:
        print(f"seed: {n:,} conversations already there")
        return
    t0 = time.perf_counter()
    Conversation.objects.filter(owner_uid=OWNER).delete()
    base_ms = keys.now_ms() - n - 60_000
    now = keys.now_ms()
    chunk = 5000
    with connection.cursor() as cur:
        for start in range(0, n, chunk):
            rows = range(start, min(n, start + chunk))
            msgkeys = [keys.compose(base_ms + i, 1000, 0) for i in rows]
            cur.execute(
                "INSERT IGNORE INTO messaging_message (msgkey, sender_uid, type, body, status, "
                "created_at) VALUES " + ", ".join(["(%s, %s, 'text', %s, 0, NOW(6))"] * len(rows)),
                [
                    v
                    for i, k in zip(rows, msgkeys, strict=True)
                    for v in (k, OWNER + 1 + i, f'{{"type": "text", "text": "hello #{i}"}}')
                ],
            )
            cur.execute(
                "INSERT INTO messaging_conversation (owner_uid, peer_uid, category, last_msgkey, "
                "sort_key, read_upto, pinned, muted, mtime) VALUES "
                + ", ".join(["(%s, %s, %s, %s, %s, 0, 0, 0, %s)"] * len(rows)),
                [
                    v
                    for i, k in zip(rows, msgkeys, strict=True)
                    for v in (OWNER, OWNER + 1 + i, CATEGORIES[i % 4], k, k, now)
                ],
            )
    print(f"seed: {n:,} conversations and messages in {time.perf_counter() - t0:.0f} s")


# -- a TCP proxy that delays every answer from HBase's Thrift gateway ---------------------------
class DelayProxy:
    def __init__(self, upstream: tuple[str, int], delay_s: float) -> None:
        self.upstream, self.delay_s = upstream, delay_s
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.server.accept()
            upstream = socket.create_connection(self.upstream)
            asked = threading.Event()  # a request went up: delay the start of its answer once
            threading.Thread(target=self._up, args=(client, upstream, asked), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client, asked), daemon=True).start()

    @staticmethod
    def _up(src: socket.socket, dst: socket.socket, asked: threading.Event) -> None:
        DelayProxy._pump(src, dst, asked.set)

    def _down(self, src: socket.socket, dst: socket.socket, asked: threading.Event) -> None:
        def delay() -> None:
            if asked.is_set():
                asked.clear()
                time.sleep(self.delay_s)

        DelayProxy._pump(src, dst, delay)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, on_data: Callable[[], None]) -> None:
        try:
            while data := src.recv(65536):
                on_data()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


# -- measuring -------------------------------------------------------------------------------------
def drop_redis() -> None:
    get_redis().delete(*cache_keys.cache_keys(OWNER))


def settle() -> None:
    """Wait (unmeasured) for the background refills and the hedge's losers of the last read."""
    busy = [
        pools.pool("build", 2),
        pools.pool("hbase", reader.HBASE_THREADS),
        pools.pool("mysql", reader.MYSQL_THREADS),
    ]
    while any(p.slots._value < p.executor._max_workers for p in busy):
        time.sleep(0.002)


def timed(
    n: int, before: Callable[[], None] = lambda: None, after: Callable[[], None] = lambda: None
) -> list[float]:
    samples = []
    for _ in range(n):
        before()
        t0 = time.perf_counter()
        page = selectors.conversation_list(OWNER)
        samples.append((time.perf_counter() - t0) * 1000)
        assert len(page.results) == 20
        assert page.next_cursor
        after()
    return samples


def filesort_page() -> None:
    """The old selector's query, in raw SQL: MySQL sorts every row of the owner."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT peer_uid, sort_key, last_msgkey FROM messaging_conversation"
            " WHERE owner_uid = %s ORDER BY sort_key DESC, peer_uid DESC LIMIT 21",
            [OWNER],
        )
        assert len(cursor.fetchall()) == 21


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(args: argparse.Namespace) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}
    results["raw SQL ORDER BY sort_key, peer_uid (filesort)"] = [
        _t(filesort_page) for _ in range(args.slow_n)
    ]
    with override_settings(CONVCACHE_ENABLED=False):
        results["cache off: the (owner, sort_key) index pager"] = timed(args.n)

    def go_cold() -> None:
        drop_redis()
        hbase_tier.invalidate(OWNER)

    label = "cold (Redis and HBase empty)"
    results[label] = timed(args.cold_n, before=go_cold, after=settle)
    assert prewarm.prewarm_owner(OWNER)
    timed(20)  # warm the Python side
    results["Redis tier (after prewarm)"] = timed(args.n * 5)
    results["HBase tier (Redis flushed)"] = timed(args.n, before=drop_redis, after=settle)

    upstream = (hbase.options()["HOST"], hbase.options()["PORT"])
    proxy = DelayProxy(upstream, args.hbase_delay_ms / 1000)
    slow = {**settings.HBASE, "PORT": proxy.port}
    with override_settings(HBASE=slow):
        hbase.call(lambda conn: conn.tables())  # open pooled connections through the proxy
        with override_settings(CONVCACHE_HEDGE_MS=10_000):
            label = f"HBase +{args.hbase_delay_ms} ms, no hedge"
            results[label] = timed(args.slow_n, before=drop_redis, after=settle)
        label = f"HBase +{args.hbase_delay_ms} ms, hedge {settings.CONVCACHE_HEDGE_MS} ms"
        results[label] = timed(args.slow_n, before=drop_redis, after=settle)
    return results


def _t(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200_000)
    parser.add_argument("--n", type=int, default=200, help="samples per fast scenario")
    parser.add_argument("--slow-n", type=int, default=40, help="samples per slow scenario")
    parser.add_argument("--cold-n", type=int, default=40)
    parser.add_argument("--hbase-delay-ms", type=int, default=60)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    ensure_tables()
    get_redis().flushdb()
    seed(args.conversations)
    results = run(args)
    redis_p50 = statistics.median(results["Redis tier (after prewarm)"])
    print(
        f"\nfirst page (20 of {args.conversations:,}) of one owner; {platform.node()}, "
        f"{os.cpu_count()} cores; hedge delay {settings.CONVCACHE_HEDGE_MS} ms"
    )
    print(f"{'scenario':44} {'n':>5} {'p50 ms':>8} {'p99 ms':>8} {'p50 / Redis':>12}")
    for label, samples in results.items():
        p50 = statistics.median(samples)
        print(
            f"{label:44} {len(samples):5d} {p50:8.2f} {pct(samples, 0.99):8.2f} "
            f"{p50 / redis_p50:11.1f}x"
        )
    print("goals: Redis tier p99 < 10 ms, HBase tier p99 < 30 ms")


if __name__ == "__main__":
    main()
