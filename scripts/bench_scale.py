"""Scale benchmark: one followers campaign at 100,000, 1,000,000 and 10,000,000 recipients.

    python scripts/bench_scale.py [--sizes 100000,1000000,10000000] [--backend sql|hbase|both]
                                  [--workers 4] [--keep] [--json var/bench_scale.json]
                                  [--buffer-pool-mb 4096] [--aof-rewrite-min-mb 16384]
                                  [--redis-keys 20000000]
                                  [--png docs/bench_scale.png]
    python scripts/bench_scale.py --replot var/bench_scale.json   # the plot again, no services
    python scripts/bench_scale.py --replot var/bench_scale.json --baseline empty.json
                                  [--baseline-label "an empty Redis"]
                                  # with another run's rates beside (e.g. --redis-keys 0)

Conditions (printed at the top of every run): a followers audience, the product's default
per-receiver cap (no SenderPolicy row: SenderPolicy's defaults, 1 message a day per receiver,
so the admission script runs for every recipient), no channel throttle (the daily channel's rate
lifted, as bench_fanout.py does: the throttle would be measured, not the platform), batches of
``BULK_BATCH_SIZE``, every recipient new to the sender, no cached conversation list, the HBase
index of cached lists trusted. ``--workers`` real ``celery worker`` processes (one pool process
each) on ``bulk.daily``, started afresh for every run; on this 2-core machine they share the cores
with MariaDB (and its replica), Redis, HBase and this script, which the output says.

Followers: ONE business account whose followers grow with the sizes (sorted ascending): the run of
size N finds exactly its first N followers, so 10M follow rows are written once for the whole
run, not 11.1M per backend. They go in as multi-row INSERTs of 20,000 integer rows (inlined,
infra/sqlvalues.py) on two connections, every index and the replica left on.

For each size and backend, in this order (both backends at one size before the next size):

- the delivery rate: recipients/s from launch to ``finished`` (every batch committed), and per
  10% slice (the times processed crossed each tenth, interpolated between 0.1 s polls);
- the workers' RSS, every worker process sampled with psutil each second: the peak of one pool
  process, the peak of all workers' processes together, and "flat" when the pool processes' peak
  after 10% done is within 10% of their RSS at 10% done;
- the batch ledger's rows, and after ANALYZE TABLE the data+index length (information_schema) of
  the inbox, conversation, ledger and follow tables; on HBase the inbox table's region count
  (Thrift ``getTableRegions``) and its store files' size on disk (the local HBase's file://
  rootdir; what the memstore holds unflushed is not counted);
- Redis's AOF rewrites that started during the run and the seconds one ran (``INFO
  persistence``, sampled each second): on this machine a rewrite's child takes a core from the
  workers, which on a deployment it would not (Redis has a host of its own).
  ``--aof-rewrite-min-mb`` (16 GB unless told: ``aof_min_mb``) keeps rewrites out of the runs;
  ``--aof-rewrite-min-mb 0`` leaves the server's 64 MB, from which each run's growing dataset is
  rewritten again and again;
- per tenth of the recipients, what the machine did beside the workers (``host_by_tenth``,
  sampled each second): the primary MariaDB's buffer pool (free pages, reads it made from disk,
  InnoDB's MB/s read and written, waits for a free page), the CPU of the workers, MariaDB's
  primary and replica, Redis and HBase's JVMs, and the machine's iowait: where a run slows,
  these say which part it waited on;
- the ETA's error at 10/50/90% done: the console's (bulk/live.py ``campaigns_live``, polled each
  second as the admin console does) and the API's (bulk/selectors.py ``campaign_progress``), each
  as (ETA - actual time left) / actual time left, the actual finish being ``finished_at``. Both
  read one rate (``bulk.selectors.campaign_rates``: the ledger's last 30 s), so the two columns
  differ only by the moment each was read; ``scripts/eta_replay.py`` replays the recorded
  per-second progress through other rates.

Redis holds the site's other users' unread hashes through every run (``--redis-keys``, 20M
unless told: users 1..N, one unread conversation each), as a production Redis does; between runs
every other key is deleted. Redis's keyspace is one hash table that doubles each time its keys
reach its size, then rehashes incrementally, a step in every command. From an empty Redis (the
bench before 7 Dec, ``--redis-keys 0``) a 10M run's own keys (one unread hash per recipient)
crossed 2^21, 2^22 and 2^23: each time Redis's CPU rose from ~64% to 75-82% of a core, its one
thread the limit, and the campaign's rate fell by 15-45% for 10-30 s; and while its keyspace was
small, the first million ran ~15% faster than the rest, as Redis's lookups stayed in the CPU's
caches. Both put the ETA at 10% done off by 12-26%. 20M site keys size the table at 2^25, which a
10M run does not outgrow; the bench finishes the last doubling's move before it times anything
(``finish_rehash``). Each run reports Redis's keys and CPU (``redis_figures``).

Before the timed runs, one untimed warm-up campaign per backend (its own sender and followers,
one batch per worker, deleted after): a store left idle starts slowly (``warm_up``).

Between runs everything a run wrote is deleted (campaign and ledger, its message, inbox rows,
conversation rows; the Redis database is flushed: unread counters, quota counts, events), so every
run starts from the same state. ``--keep`` keeps the last run's data and the followers. At the
end: a table of every size side by side, the raw figures in ``--json`` (``--replot`` draws from
it) and a PNG of rate and worker memory against recipients (log x) in ``--png``.

Its own data: database ``missive_scale``, Redis databases 14/15 (shared with bench_fanout.py,
which flushes them too: never run both at once) and HBase table prefix ``scale``; these are set
here whatever the environment says, so the test suite's data is never touched.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import benchkit
from benchkit import cpu_s, finish_rehash, redis_cpu_s

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATABASE = "missive_scale"
BENCH_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DJANGO_SECRET_KEY": "bench-only-not-secret",  # DEBUG off needs a key (infra/deploy.py)
    "DATABASE_URL": f"mysql://missive:missive@127.0.0.1:3306/{DATABASE}",
    "REDIS_URL": "redis://127.0.0.1:6379/14",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15",
    "HBASE_TABLE_PREFIX": "scale",
}
os.environ.update(BENCH_ENV)  # forced: an exported test env must not point us at its data
os.environ.pop("DATABASE_REPLICA_URL", None)  # the replica of another database

import django  # noqa: E402

django.setup()

import MySQLdb  # noqa: E402
import psutil  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from Hbase_thrift import BatchMutation, Mutation  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402

from bulk import services  # noqa: E402
from bulk.live import campaigns_live  # noqa: E402
from bulk.models import Campaign, CampaignBatch, CampaignStatus, ChannelSetting  # noqa: E402
from bulk.selectors import campaign_progress  # noqa: E402
from config.celery import app  # noqa: E402
from infra import hbase  # noqa: E402
from infra.redis import get_redis  # noqa: E402
from infra.sqlvalues import int_rows  # noqa: E402
from messaging.models import Account, Conversation, Follow, InboxRow, Message  # noqa: E402
from storage.convcache import build  # noqa: E402
from storage.inbox.hbase import COLUMN, rowkey  # noqa: E402
from storage.inbox.hbase import TABLE as HBASE_TABLE  # noqa: E402

console = Console() if sys.stdout.isatty() else Console(width=200)  # a log: the table unwrapped
ENDED = (CampaignStatus.FINISHED, CampaignStatus.FAILED, CampaignStatus.CANCELLED)
MILESTONES = (10, 50, 90)
MARK_SLACK = 5  # a milestone is sampled by a poll at most this many percent past it
SEED_CHUNK = 20_000  # follow rows per INSERT
DELETE_CHUNK = 20_000  # owners per DELETE
HBASE_DELETE_CHUNK = 2_000  # rows per mutateRows call
MB = 1024 * 1024
NOWHERE = Path("/nonexistent")
CONDITIONS = (
    "followers audience; the product's default per-receiver cap (1 a day: no SenderPolicy row); "
    "no channel throttle; every recipient new to the sender; no cached lists; HBase index trusted"
)


# -- setup -----------------------------------------------------------------------------------
def _server() -> Any:
    """A connection to the MariaDB server itself (no database): setup and server settings."""
    return MySQLdb.connect(host="127.0.0.1", user="missive", passwd="missive")


def ensure_database() -> None:
    conn = _server()
    conn.cursor().execute(
        f"CREATE DATABASE IF NOT EXISTS {DATABASE} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    )
    conn.close()


def buffer_pool_mb(want: int | None) -> tuple[int, int]:
    """Resize InnoDB's buffer pool online to ``want`` MB (None: leave it); returns (before, now).

    scripts/services starts MariaDB with 256 MB, far below a 10M run's tables (conversations
    1.9 GB, follows 1.1 GB, inbox 0.5 GB): the last fifth of that run went to disk and slowed
    by a third. A production primary sizes the pool to its hot tables (docs/operations.md)."""
    conn = _server()
    cursor = conn.cursor()
    before = _pool_mb(cursor)
    if want is not None and want != before:
        cursor.execute(f"SET GLOBAL innodb_buffer_pool_size = {int(want) * MB}")
        _wait_resized(cursor)
    now = _pool_mb(cursor)
    conn.close()
    return before, now


def _pool_mb(cursor: Any) -> int:
    cursor.execute("SELECT @@innodb_buffer_pool_size")
    return int(cursor.fetchone()[0]) // MB


def _wait_resized(cursor: Any) -> None:
    for _ in range(600):
        cursor.execute("SHOW STATUS LIKE 'Innodb_buffer_pool_resize_status'")
        row = cursor.fetchone()
        if not row or not row[1] or "completed" in row[1].lower():
            return
        time.sleep(0.5)


def machine() -> str:
    cores = os.cpu_count() or 0
    memory = psutil.virtual_memory().total / 1024**3
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return f"{cores} cores, {memory:.0f} GB RAM, load average {load}"


def prepare(batch_size: int, site_keys: int) -> None:
    call_command("migrate", verbosity=0)
    call_command("hbase_init", verbosity=0)
    get_redis().flushdb()
    preload_site(site_keys)
    reset_redis(site_keys)
    finish_rehash(get_redis())
    app.control.purge()
    ChannelSetting.objects.update_or_create(
        channel="daily", defaults={"rate_per_s": 10**9, "batch_size": batch_size}
    )


def reset_redis(site_keys: int) -> None:
    """Everything a run wrote to the bench's Redis database deleted (unread counters, quota
    counts, events, live samples), the site's preloaded unread hashes kept; then the HBase index
    of cached lists rebuilt, as the beat does once per Redis run."""
    redis = get_redis()
    if not site_keys:
        redis.flushdb(asynchronous=True)
    else:
        cursor = 0
        while True:  # server-side, SCAN_CHUNK keys a call: no key name leaves Redis
            cursor, _ = redis.eval(KEEP_SITE_LUA, 0, cursor, SCAN_CHUNK, _site_key_len(site_keys))
            if int(cursor) == 0:
                break
    build.index_rebuild()


# The Redis a campaign meets in production holds the site's other users' unread hashes; an empty
# one makes the run's own keys the whole keyspace (``--redis-keys``, module docstring).
KEEP_SITE_LUA = """
local found = redis.call('SCAN', ARGV[1], 'COUNT', ARGV[2])
local longest, gone = tonumber(ARGV[3]), 0
for _, key in ipairs(found[2]) do
  if #key > longest or string.sub(key, 1, 10) ~= 'unread:{u:' then
    redis.call('UNLINK', key)
    gone = gone + 1
  end
end
return {found[1], gone}
"""
SCAN_CHUNK = 20_000  # keys per cleanup call: 1.5 µs a key, 3.2 at 100,000 (a bigger Lua table)


def _site_key_len(site_keys: int) -> int:
    """The longest name of a site's key: the bench's own users have 17-digit uids, the site's
    at most as many digits as ``site_keys``."""
    return len(f"unread:{{u:{site_keys}}}")


def preload_site(count: int) -> None:
    """Unread hashes of users 1..``count`` (one unread conversation each), none of them a
    follower of the bench's senders (their uids start at ~10^16)."""
    if not count:
        return
    redis, started = get_redis(), time.perf_counter()
    with Progress(
        TextColumn("  Redis: the site's unread hashes"),
        BarColumn(),
        TextColumn("{task.completed:,}"),
        TimeElapsedColumn(),
        console=console,
        transient=not sys.stdout.isatty(),
    ) as bar:
        task = bar.add_task("preload", total=count)
        benchkit.preload_site(redis, count, lambda last: bar.update(task, completed=last))
    print(
        f"Redis: the site's {count:,} unread hashes written in {time.perf_counter() - started:.0f}s"
    )


# -- followers -------------------------------------------------------------------------------
def seed_followers(sender: int, have: int, want: int) -> float:
    """Followers ``sender+have+1 .. sender+want`` of ``sender``: multi-row INSERTs of
    SEED_CHUNK rows with the integers inlined, on two connections (one builds its statement while
    MariaDB runs the other's). Returns the seconds taken."""
    starts = range(sender + have + 1, sender + want + 1, SEED_CHUNK)
    last = sender + want
    started = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        chunks = [(s, min(s + SEED_CHUNK - 1, last)) for s in starts]
        for _ in pool.map(lambda c: _insert_follows(sender, *c), chunks):
            pass
    return time.perf_counter() - started


_local = threading.local()


def _raw_cursor() -> Any:
    """One autocommit MySQLdb connection per thread, to the bench's database."""
    if not hasattr(_local, "conn"):
        _local.conn = MySQLdb.connect(
            host="127.0.0.1", user="missive", passwd="missive", db=DATABASE, autocommit=True
        )
    return _local.conn.cursor()


def _insert_follows(sender: int, first: int, last: int) -> None:
    values = int_rows((uid, sender) for uid in range(first, last + 1))
    values = values.replace(")", ",NOW())")
    _raw_cursor().execute(
        f"INSERT INTO {Follow._meta.db_table} (follower_uid, followee_uid, followed_at) "
        f"VALUES {values}"
    )


def delete_followers(sender: int, count: int) -> None:
    table = Follow._meta.db_table
    _delete_ranges(
        sender,
        count,
        lambda a, b: (
            f"DELETE FROM {table} WHERE followee_uid = {sender} "
            f"AND follower_uid BETWEEN {a} AND {b}"
        ),
    )


def _delete_ranges(sender: int, count: int, statement: Callable[[int, int], str]) -> int:
    deleted = 0
    with connection.cursor() as cur:
        for first in range(sender + 1, sender + count + 1, DELETE_CHUNK):
            cur.execute(statement(first, min(first + DELETE_CHUNK - 1, sender + count)))
            deleted += cur.rowcount
    return deleted


# -- workers and their memory ----------------------------------------------------------------
def start_workers(backend: str, count: int) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "INBOX_BACKEND": backend, "BULK_PROFILE": "0"}
    procs = []
    for i in range(count):
        quiet = "ignore:You're running the worker with superuser privileges"  # root in a container
        cmd = [sys.executable, "-W", quiet, "-m", "celery", "-A", "config", "--quiet", "worker"]
        cmd += ["-Q", "bulk.daily", "-c", "1", "-n", f"scale{i}-{backend}@%h"]
        cmd += ["--without-gossip", "--without-mingle", "-l", "ERROR"]
        procs.append(
            subprocess.Popen(
                cmd, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL
            )
        )
    deadline = time.monotonic() + 60
    names = {f"scale{i}-{backend}" for i in range(count)}
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=0.5) or []
        if names <= {name.split("@")[0] for reply in replies for name in reply}:
            return procs
    raise SystemExit("benchmark workers did not start")


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(timeout=60)


class RssSampler(threading.Thread):
    """Every second, each worker process's RSS (the worker's main process and its pool), with
    the campaign's progress at that moment (``progress()``)."""

    def __init__(self, procs: Sequence[subprocess.Popen[bytes]], progress: Callable[[], int]):
        super().__init__(daemon=True)
        self.mains = [psutil.Process(p.pid) for p in procs]
        self.progress = progress
        self.samples: list[dict[str, Any]] = []  # {t, processed, main: [MB], pool: [MB]}
        self.done = threading.Event()

    def run(self) -> None:
        self.samples.append(self.sample())  # at the launch and at the end too: short runs
        while not self.done.wait(1.0):
            self.samples.append(self.sample())
        self.samples.append(self.sample())

    def sample(self) -> dict[str, Any]:
        mains, pool, cpu = [], [], 0.0
        for main in self.mains:
            mains.append(_rss(main))
            children = _children(main)
            pool += [_rss(child) for child in children]
            cpu += sum(_cpu_s(p) or 0.0 for p in [main, *children])
        return {
            "workers_cpu_s": cpu,
            "t": time.time(),
            "processed": self.progress(),
            "main": mains,
            "pool": pool,
            "aof": aof_state(),
            "redis": redis_state(),
            "host": host_state(),
        }


def aof_state() -> dict[str, int]:
    """Redis's AOF rewrites so far and whether one runs now (INFO persistence): a rewrite forks
    and writes the whole dataset, a core's work for tens of seconds once Redis holds GBs."""
    info = get_redis().info("persistence")
    return {"rewrites": int(info["aof_rewrites"]), "running": int(info["aof_rewrite_in_progress"])}


def aof_figures(samples: list[dict[str, Any]]) -> dict[str, int]:
    """The AOF rewrites that started during the run, and the seconds one was running (sampled
    each second)."""
    states = [s["aof"] for s in samples]
    return {
        "rewrites": states[-1]["rewrites"] - states[0]["rewrites"],  # counted at each fork
        "seconds": sum(s["running"] for s in states[1:-1]),
    }


def redis_state() -> dict[str, float]:
    """Redis's CPU seconds so far (user + system, INFO cpu) and the bench database's keys."""
    redis = get_redis()
    return {"cpu_s": redis_cpu_s(redis), "keys": redis.dbsize()}


def redis_figures(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Redis's keys at the launch and the finish, and its CPU in % of one core: the median of
    the run's seconds and the busiest 5 s. Redis runs one thread: near 100% it is the limit."""
    states = [(s["t"], s["redis"]) for s in samples]
    per_s = [
        100 * (b["cpu_s"] - a["cpu_s"]) / (tb - ta)
        for (ta, a), (tb, b) in pairwise(states)
        if tb > ta
    ]
    fives = [sum(per_s[i : i + 5]) / 5 for i in range(len(per_s) - 4)]
    return {
        "keys_at_launch": states[0][1]["keys"],
        "keys_at_finish": states[-1][1]["keys"],
        "cpu_median_pct": round(statistics.median(per_s)) if per_s else None,
        "cpu_peak_5s_pct": round(max(fives)) if fives else None,
    }


INNODB = (
    "Innodb_buffer_pool_pages_free",
    "Innodb_buffer_pool_pages_total",
    "Innodb_buffer_pool_reads",
    "Innodb_buffer_pool_wait_free",
    "Innodb_data_read",
    "Innodb_data_written",
)


def host_state() -> dict[str, Any]:
    """What the machine does beside the workers: the primary MariaDB's buffer pool (its free pages;
    reads it had to make from disk, ``Innodb_buffer_pool_reads``; bytes read and written), the
    CPU seconds of the primary and of its replica (the ports scripts/services uses), HBase's
    JVMs' CPU seconds (every java process: ZooKeeper, master, RegionServers, Thrift gateways)
    and the machine's iowait seconds (all cores)."""
    if not hasattr(_local, "server"):
        _local.server = _server()
        _local.server.autocommit(True)
        _local.mariadbd = _listener(3306)
        _local.replica = _listener(3307)
        _local.jvms = [p for p in psutil.process_iter(["name"]) if p.info["name"] == "java"]
    cursor = _local.server.cursor()
    cursor.execute("SHOW GLOBAL STATUS WHERE Variable_name IN %s", [INNODB])
    found: dict[str, Any] = {name: int(value) for name, value in cursor.fetchall()}
    found["mariadbd_cpu_s"] = _cpu_s(_local.mariadbd)
    found["replica_cpu_s"] = _cpu_s(_local.replica)
    found["hbase_cpu_s"] = sum(_cpu_s(p) or 0.0 for p in _local.jvms)
    found["iowait_s"] = getattr(psutil.cpu_times(), "iowait", 0.0)
    return found


def _listener(port: int) -> psutil.Process | None:
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] in ("mariadbd", "mysqld") and _listens(proc, port):
            return proc
    return None


def _cpu_s(proc: psutil.Process | None) -> float | None:
    return None if proc is None else cpu_s([proc.pid])


def host_by_tenth(samples: list[dict[str, Any]], total: int) -> list[dict[str, Any] | None]:
    """Per tenth of the recipients (the samples whose progress lies in it): the buffer pool's free
    pages at the tenth's end (% of the pool), its disk reads per 1,000 recipients, MB read and
    written per second; the CPU (% of a core) of the workers, the primary MariaDB and its
    replica, Redis and HBase's JVMs; the machine's iowait (% of one core). None where fewer than
    two samples fell in the tenth."""
    tenths: list[dict[str, Any] | None] = []
    for k in range(10):
        inside = [
            s
            for s in samples
            if "host" in s and k * total / 10 <= s["processed"] <= (k + 1) * total / 10
        ]
        tenths.append(_tenth(inside[0], inside[-1]) if len(inside) >= 2 else None)
    return tenths


def _tenth(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    seconds, done = b["t"] - a["t"], b["processed"] - a["processed"]
    if seconds <= 0 or done <= 0:
        return None
    ha, hb = a["host"], b["host"]

    def cpu(a_s: float | None, b_s: float | None) -> int | None:
        return None if a_s is None or b_s is None else round(100 * (b_s - a_s) / seconds)

    return {
        "pool_free_pct": round(
            100 * hb["Innodb_buffer_pool_pages_free"] / hb["Innodb_buffer_pool_pages_total"], 1
        ),
        "disk_reads_per_1k": round(
            1000 * (hb["Innodb_buffer_pool_reads"] - ha["Innodb_buffer_pool_reads"]) / done, 2
        ),
        "read_mb_s": round((hb["Innodb_data_read"] - ha["Innodb_data_read"]) / MB / seconds, 1),
        "written_mb_s": round(
            (hb["Innodb_data_written"] - ha["Innodb_data_written"]) / MB / seconds, 1
        ),
        "wait_free": hb["Innodb_buffer_pool_wait_free"] - ha["Innodb_buffer_pool_wait_free"],
        "workers_cpu_pct": cpu(a.get("workers_cpu_s"), b.get("workers_cpu_s")),
        "mariadbd_cpu_pct": cpu(ha["mariadbd_cpu_s"], hb["mariadbd_cpu_s"]),
        "replica_cpu_pct": cpu(ha.get("replica_cpu_s"), hb.get("replica_cpu_s")),
        "redis_cpu_pct": cpu(a["redis"]["cpu_s"], b["redis"]["cpu_s"]),
        "hbase_cpu_pct": cpu(ha.get("hbase_cpu_s"), hb.get("hbase_cpu_s")),
        "iowait_pct": round(100 * (hb["iowait_s"] - ha["iowait_s"]) / seconds),
    }


def _rss(proc: psutil.Process) -> float:
    try:
        return float(proc.memory_info().rss) / MB
    except psutil.Error:  # exited meanwhile
        return 0.0


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return list(proc.children(recursive=True))
    except psutil.Error:
        return []


def memory_figures(samples: list[dict[str, Any]], total: int) -> dict[str, Any]:
    if not samples:
        return {"pool_peak_mb": None, "all_peak_mb": None, "pool_at_10_mb": None, "flat": None}
    pool_peak = max(max(s["pool"] or [0.0]) for s in samples)
    at_10 = next((s for s in samples if s["processed"] >= total / 10), samples[0])
    later = [s for s in samples if s["t"] >= at_10["t"]]
    base = max(at_10["pool"] or [0.0])
    after_peak = max(max(s["pool"] or [0.0]) for s in later)
    return {
        "pool_peak_mb": round(pool_peak, 1),
        "all_peak_mb": round(max(sum(s["main"]) + sum(s["pool"]) for s in samples), 1),
        "pool_at_10_mb": round(base, 1),
        "pool_growth": round(after_peak / base, 3) if base else None,
        "flat": bool(base) and after_peak <= 1.10 * base,
    }


# -- the product's ETA, as the console and the API show it ------------------------------------
class EtaWatcher(threading.Thread):
    """Polls the campaign each second as the admin console does (``campaigns_live``) and
    records, at the first poll past 10/50/90% done, the console's and the API's ETA with the
    moment the row was read."""

    def __init__(self, campaign_id: int):
        super().__init__(daemon=True)
        self.campaign_id = campaign_id
        self.marks: dict[int, dict[str, Any] | None] = {}
        self.last: dict[str, Any] = {}
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.wait(1.0):
                self.poll()
        finally:
            connection.close()

    def poll(self) -> None:
        read_at = time.time()
        campaign = Campaign.objects.get(pk=self.campaign_id)
        if campaign.status in ENDED:
            return
        body = campaigns_live([campaign])[0]
        api = campaign_progress(campaign, datetime.fromtimestamp(read_at, UTC))
        self.last = body
        for mark in MILESTONES:
            if mark in self.marks or body["percent"] < mark:
                continue
            if body["percent"] >= mark + MARK_SLACK:  # passed between two polls: not sampled
                self.marks[mark] = None
            else:
                self.marks[mark] = {
                    "t": read_at,
                    "percent": body["percent"],
                    "console_eta_s": body["eta_s"],
                    "api_eta_s": api["eta_s"],
                }


def eta_errors(marks: dict[int, dict[str, Any] | None], finished: float) -> dict[str, Any]:
    """Per milestone: each ETA's signed error, % of the time that was actually left."""
    out: dict[str, Any] = {}
    for mark in MILESTONES:
        seen = marks.get(mark)
        if seen is None:
            out[str(mark)] = None  # the campaign passed it between two polls (a short run)
            continue
        left = finished - seen["t"]
        out[str(mark)] = {
            **seen,
            "actual_left_s": round(left, 2),
            "console_error_pct": _error(seen["console_eta_s"], left),
            "api_error_pct": _error(seen["api_eta_s"], left),
        }
    return out


def _error(eta: float | None, left: float) -> float | None:
    return None if eta is None or left <= 0 else round(100 * (eta - left) / left, 1)


# -- one campaign ----------------------------------------------------------------------------
def run_campaign(sender: int, total: int, procs: list[subprocess.Popen[bytes]]) -> dict[str, Any]:
    progress: list[tuple[float, int]] = [(time.time(), 0)]
    sampler = RssSampler(procs, lambda: progress[-1][1])
    sampler.start()
    launched = time.time()
    campaign, _ = services.campaign_create(
        sender_uid=sender,
        content={"type": "text", "text": "scale benchmark"},
        audience=services.AudienceChoice("followers", {}, None),
        channel="daily",
    )
    watcher = EtaWatcher(campaign.pk)
    watcher.start()
    try:
        final = follow_live(campaign.pk, total, progress, watcher)
    finally:
        sampler.done.set()
        watcher.done.set()
        sampler.join()
        watcher.join()
    assert final.finished_at is not None
    finished = final.finished_at.timestamp()
    return {
        "campaign": final,
        "seconds": finished - launched,
        "rate": total / (finished - launched),
        "slices": slice_rates(progress, launched, finished, total),
        "memory": memory_figures(sampler.samples, total),
        "aof": aof_figures(sampler.samples),
        "redis": redis_figures(sampler.samples),
        "host": host_by_tenth(sampler.samples, total),
        "rss_samples": sampler.samples,
        "eta": eta_errors(watcher.marks, finished),
    }


def follow_live(
    campaign_id: int, total: int, progress: list[tuple[float, int]], watcher: EtaWatcher
) -> Campaign:
    """Poll the campaign every 0.1 s until it ends, with a live bar (count, rate, console ETA)."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:>12,.0f}/{task.total:,.0f}"),
        TextColumn("{task.fields[rate]:>9} /s  ETA {task.fields[eta]:>7}"),
        TimeElapsedColumn(),
    )
    rows = Campaign.objects.filter(pk=campaign_id)
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("  delivering", total=total, rate="-", eta="-")
        while True:
            status, *counts = rows.values_list(
                "status", "delivered", "skipped_quota", "skipped_blocked", "failed"
            )[0]
            progress.append((time.time(), sum(counts)))
            live = watcher.last
            rate = (live.get("rate") or {}).get("per_s")
            eta = live.get("eta_s")
            bar.update(
                task,
                completed=sum(counts),
                rate=f"{rate:,.0f}" if rate else "-",
                eta=f"{eta:.0f}s" if eta is not None else "-",
            )
            if status in ENDED:
                return Campaign.objects.get(pk=campaign_id)
            time.sleep(0.1)


def slice_rates(
    progress: list[tuple[float, int]], launched: float, finished: float, total: int
) -> list[float | None]:
    """Recipients/s within each tenth: the times processed crossed k/10 of the total,
    interpolated between polls; the first tenth counts from the launch (planning included)."""
    crossings = [launched]
    for k in range(1, 10):
        crossings.append(_crossing(progress, k * total / 10))
    crossings.append(finished)
    tenth = total / 10
    return [round(tenth / (b - a), 1) if b > a else None for a, b in pairwise(crossings)]


def _crossing(progress: list[tuple[float, int]], target: float) -> float:
    for (t0, p0), (t1, p1) in pairwise(progress):
        if p1 >= target:
            return t1 if p1 == p0 else t0 + (t1 - t0) * (target - p0) / (p1 - p0)
    return progress[-1][0]


# -- table sizes -----------------------------------------------------------------------------
SQL_TABLES = {
    "inbox": InboxRow._meta.db_table,
    "conversation": Conversation._meta.db_table,
    "ledger": CampaignBatch._meta.db_table,
    "follow": Follow._meta.db_table,
}


def sql_sizes() -> dict[str, float]:
    """data+index length in MB of each table, after ANALYZE TABLE refreshed InnoDB's figures."""
    names = ", ".join(SQL_TABLES.values())
    with connection.cursor() as cur:
        cur.execute(f"ANALYZE TABLE {names}")
        cur.fetchall()
        cur.execute(
            "SELECT table_name, data_length + index_length FROM information_schema.tables "
            "WHERE table_schema = DATABASE() AND table_name IN %s",
            [tuple(SQL_TABLES.values())],
        )
        found = {name: int(size) for name, size in cur.fetchall()}
    return {key: round(found.get(table, 0) / MB, 1) for key, table in SQL_TABLES.items()}


def hbase_sizes() -> dict[str, Any]:
    regions = hbase.call(lambda conn: len(conn.table(HBASE_TABLE).regions()))
    root = hbase_rootdir()
    folder = root / "data/default" / f"{settings.HBASE['TABLE_PREFIX']}_{HBASE_TABLE}"
    if root == NOWHERE or not folder.is_dir():
        return {"regions": regions, "store_files_mb": None}
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    return {"regions": regions, "store_files_mb": round(size / MB, 1)}


def hbase_rootdir() -> Path:
    """The local rootdir of the HBase that serves our Thrift port (scripts/services: the
    gateway JVM's ``-Dhbase.log.dir`` holds ``conf/hbase-site.xml``); NOWHERE when not found."""
    port = int(hbase.options()["PORT"])
    for proc in psutil.process_iter(["cmdline"]):
        args = proc.info["cmdline"] or []
        logs = [a.split("=", 1)[1] for a in args if a.startswith("-Dhbase.log.dir=")]
        if logs and _listens(proc, port):
            return _rootdir(Path(logs[0]) / "conf/hbase-site.xml")
    return NOWHERE


def _listens(proc: psutil.Process, port: int) -> bool:
    try:
        found = proc.net_connections(kind="tcp")
    except psutil.Error:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in found)


def _rootdir(site: Path) -> Path:
    try:
        text = site.read_text()
    except OSError:
        return NOWHERE
    found = re.search(r"<name>hbase.rootdir</name>\s*<value>file://([^<]+)</value>", text)
    return Path(found.group(1)) if found else NOWHERE


# -- cleanup ---------------------------------------------------------------------------------
def cleanup_run(
    backend: str, sender: int, total: int, campaign: Campaign, site_keys: int
) -> dict[str, Any]:
    """Delete what the campaign wrote; returns the inbox rows deleted (SQL) and the seconds."""
    started = time.perf_counter()
    inbox = InboxRow._meta.db_table
    conversations = Conversation._meta.db_table
    deleted = _delete_ranges(
        sender,
        total,
        lambda a, b: (
            f"DELETE FROM {inbox} WHERE owner_uid BETWEEN {a} AND {b} AND peer_uid = {sender}"
        ),
    )
    if backend == "hbase":
        assert campaign.msgkey is not None
        hbase_delete(sender, total, campaign.msgkey)
    _delete_ranges(
        sender,
        total,
        lambda a, b: (
            f"DELETE FROM {conversations} WHERE owner_uid BETWEEN {a} AND {b} "
            f"AND peer_uid = {sender}"
        ),
    )
    Campaign.objects.filter(pk=campaign.pk).delete()  # its batches with it
    Message.objects.filter(msgkey=campaign.msgkey or 0).delete()
    reset_redis(site_keys)
    return {"sql_inbox_rows": deleted, "seconds": round(time.perf_counter() - started, 1)}


def hbase_delete(sender: int, total: int, msgkey: int) -> None:
    """The campaign's inbox rows, by rowkey (owners are the follower range): mutateRows calls of
    HBASE_DELETE_CHUNK deletes on four threads (each call well inside the Thrift timeout)."""
    gone = [Mutation(column=COLUMN, isDelete=True)]

    def delete(first: int) -> None:
        last = min(first + HBASE_DELETE_CHUNK, sender + total + 1)
        rows = [BatchMutation(rowkey(o, sender, msgkey), gone) for o in range(first, last)]
        hbase.call(lambda conn: conn.client.mutateRows(conn.table(HBASE_TABLE).name, rows, {}))

    with ThreadPoolExecutor(4) as pool:
        for _ in pool.map(delete, range(sender + 1, sender + total + 1, HBASE_DELETE_CHUNK)):
            pass


# -- one size, one backend -------------------------------------------------------------------
def campaign_on_fresh_workers(
    backend: str, sender: int, total: int, workers: int
) -> dict[str, Any]:
    """One campaign from ``sender`` to its ``total`` followers on ``workers`` new worker
    processes, stopped after it (``run_campaign``'s figures)."""
    procs = start_workers(backend, workers)
    try:
        return run_campaign(sender, total, procs)
    finally:
        stop_workers(procs)


def bench(
    backend: str, sender: int, total: int, args: argparse.Namespace, keep: bool
) -> dict[str, Any]:
    before = sql_sizes()
    run = campaign_on_fresh_workers(backend, sender, total, args.workers)
    campaign = run.pop("campaign")
    result = {
        "backend": backend,
        "recipients": total,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        **run,
        "status": campaign.status,
        "delivered": campaign.delivered,
        "skipped_quota": campaign.skipped_quota,
        "failed": campaign.failed,
        "ledger_rows": CampaignBatch.objects.filter(campaign=campaign).count(),
        "sql_mb": sql_sizes(),
        "sql_mb_before": before,
        "hbase": hbase_sizes() if backend == "hbase" else None,
    }
    print_run(result)
    if not keep:
        result["cleanup"] = cleanup_run(backend, sender, total, campaign, args.redis_keys)
        print(f"  cleaned up in {result['cleanup']['seconds']:.0f}s")
    result["problems"] = problems(result)
    return result


def problems(result: dict[str, Any]) -> list[str]:
    n, found = result["recipients"], []
    if (result["status"], result["delivered"]) != ("finished", n):
        found.append(f"campaign {result['status']}, delivered {result['delivered']:,} of {n:,}")
    cleaned = result.get("cleanup")
    if cleaned and result["backend"] == "sql" and cleaned["sql_inbox_rows"] != n:
        found.append(f"{cleaned['sql_inbox_rows']:,} SQL inbox rows for {n:,} recipients")
    return found


def print_run(r: dict[str, Any]) -> None:
    mem = r["memory"]
    slices = " ".join(f"{s / 1000:.1f}k" if s else "-" for s in r["slices"])
    print(
        f"  {r['backend']} {r['recipients']:,}: {r['rate']:,.0f} recipients/s over "
        f"{r['seconds']:.1f}s; per 10% slice: {slices}"
    )
    print(
        f"  workers' RSS: pool process peak {mem['pool_peak_mb']} MB (at 10% done "
        f"{mem['pool_at_10_mb']} MB: {_flat(mem['flat'])}), all workers' "
        f"processes {mem['all_peak_mb']} MB"
    )
    sizes = ", ".join(f"{k} {v:,.1f} MB" for k, v in r["sql_mb"].items())
    print(f"  ledger {r['ledger_rows']:,} rows; MariaDB data+index: {sizes}")
    if r["hbase"]:
        h = r["hbase"]
        files = "not measured" if h["store_files_mb"] is None else f"{h['store_files_mb']} MB"
        print(f"  HBase inbox: {h['regions']} regions, store files on disk {files}")
    aof = r["aof"]
    print(f"  Redis AOF rewrites during the run: {aof['rewrites']} (running ~{aof['seconds']} s)")
    print(
        f"  Redis: {_redis_cell(r)} (keys at launch → finish · CPU % of a core, median · 5 s peak)"
    )
    print("  ETA error (console · API): " + eta_text(r["eta"]))
    for label, key in HOST_ROWS:
        tenths = r.get("host", [])
        cells = ["-" if t is None or t.get(key) is None else f"{t[key]:g}" for t in tenths]
        print(f"  per tenth, {label}: {' '.join(cells)}")


HOST_ROWS = [
    ("buffer pool free %", "pool_free_pct"),
    ("pool disk reads / 1k recipients", "disk_reads_per_1k"),
    ("InnoDB MB/s read", "read_mb_s"),
    ("InnoDB MB/s written", "written_mb_s"),
    ("waits for a free page", "wait_free"),
    ("workers' CPU % (all processes)", "workers_cpu_pct"),
    ("MariaDB primary CPU %", "mariadbd_cpu_pct"),
    ("MariaDB replica CPU %", "replica_cpu_pct"),
    ("Redis CPU %", "redis_cpu_pct"),
    ("HBase JVMs' CPU %", "hbase_cpu_pct"),
    ("iowait % of a core", "iowait_pct"),
]


def eta_text(eta: dict[str, Any]) -> str:
    parts = []
    for mark in MILESTONES:
        seen = eta[str(mark)]
        if seen is None:
            parts.append(f"{mark}% not sampled")
            continue
        parts.append(f"{mark}% {_pct(seen['console_error_pct'])} · {_pct(seen['api_error_pct'])}")
    return "; ".join(parts)


def _flat(flat: bool | None) -> str:
    return "not sampled" if flat is None else "flat" if flat else "NOT flat"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.0f}%"


# -- the summary: table, JSON, plot ----------------------------------------------------------
def summary_table(results: list[dict[str, Any]]) -> Table:
    table = Table(title="bench_scale: one followers campaign per size and backend")
    table.add_column("")
    for r in results:
        table.add_column(f"{r['backend']}\n{r['recipients']:,}", justify="right")
    for label, cell in SUMMARY_ROWS:
        table.add_row(label, *(cell(r) for r in results))
    return table


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _slice_spread(r: dict[str, Any]) -> str:
    known = [s for s in r["slices"][1:] if s]  # the first tenth includes planning
    if not known:
        return "-"
    return f"{min(known):,.0f}-{max(known):,.0f}"


def _eta_cell(r: dict[str, Any], mark: int) -> str:
    seen = r["eta"][str(mark)]
    if seen is None:
        return "-"
    return f"{_pct(seen['console_error_pct'])} · {_pct(seen['api_error_pct'])}"


def _redis_cell(r: dict[str, Any]) -> str:
    f = r["redis"]
    keys = f"{f['keys_at_launch'] / 1e6:.1f}→{f['keys_at_finish'] / 1e6:.1f}"
    peak = "-" if f["cpu_peak_5s_pct"] is None else f["cpu_peak_5s_pct"]
    return f"{keys} · {f['cpu_median_pct']} · {peak}"


def _hbase_cell(r: dict[str, Any]) -> str:
    h = r["hbase"]
    if not h:
        return "-"
    return f"{h['regions']} · {_mb(h['store_files_mb'])}"


SUMMARY_ROWS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("rate, recipients/s", lambda r: f"{r['rate']:,.0f}"),
    ("seconds", lambda r: f"{r['seconds']:,.1f}"),
    ("10% slices 2-10, min-max /s", _slice_spread),
    ("pool process RSS peak, MB", lambda r: _mb(r["memory"]["pool_peak_mb"])),
    ("  at 10% done, MB", lambda r: _mb(r["memory"]["pool_at_10_mb"])),
    ("  flat (within 10%)", lambda r: _flat(r["memory"]["flat"])),
    ("all workers' RSS peak, MB", lambda r: _mb(r["memory"]["all_peak_mb"])),
    ("ledger rows", lambda r: f"{r['ledger_rows']:,}"),
    ("inbox table, MB", lambda r: _mb(r["sql_mb"]["inbox"])),
    ("conversation table, MB", lambda r: _mb(r["sql_mb"]["conversation"])),
    ("ledger table, MB", lambda r: _mb(r["sql_mb"]["ledger"])),
    ("HBase regions · store files MB", _hbase_cell),
    ("Redis keys, M · CPU % median · peak", _redis_cell),
    ("Redis AOF rewrites · seconds", lambda r: f"{r['aof']['rewrites']} · {r['aof']['seconds']}"),
    ("ETA error 10% (console · API)", lambda r: _eta_cell(r, 10)),
    ("ETA error 50%", lambda r: _eta_cell(r, 50)),
    ("ETA error 90%", lambda r: _eta_cell(r, 90)),
]


def save(path: Path, header: dict[str, Any], results: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**header, "runs": results}, indent=1, default=str))


def _redis_label(data: dict[str, Any]) -> str:
    site = data.get("redis_site_keys") or 0
    return f"Redis holding {site / 1e6:g}M site keys" if site else "an empty Redis"


def _by_backend(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """A run file's runs per backend (sorted by name), each backend's by size."""
    backends = sorted({r["backend"] for r in data["runs"]})
    return {b: sorted((r for r in data["runs"] if r["backend"] == b), key=_size) for b in backends}


def plot(path: Path, data: dict[str, Any], baseline: dict[str, Any] | None = None) -> None:
    """Rate and memory against recipients; ``baseline``'s rates (another run's JSON, e.g. the
    same sizes on an empty Redis) drawn dotted beside them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rate_ax, mem_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    colour = {"hbase": "C0", "sql": "C1"}
    if baseline:
        for backend, runs in _by_backend(baseline).items():
            label = f"{backend} inbox, {baseline.get('label') or _redis_label(baseline)}"
            sizes, rates = [r["recipients"] for r in runs], [r["rate"] for r in runs]
            rate_ax.plot(sizes, rates, "x:", color=colour[backend], label=label)
    for backend, runs in _by_backend(data).items():
        sizes = [r["recipients"] for r in runs]
        label = f"{backend} inbox" + (f", {_redis_label(data)}" if baseline else "")
        if baseline and baseline.get("label"):
            label = f"{backend} inbox, this run"
        rate_ax.plot(sizes, [r["rate"] for r in runs], "o-", color=colour[backend], label=label)
        peaks = [r["memory"]["pool_peak_mb"] or 0 for r in runs]
        mem_ax.plot(sizes, peaks, "o-", label=f"{backend}: one pool process, peak")
        totals = [r["memory"].get("all_peak_mb") or 0 for r in runs]
        mem_ax.plot(sizes, totals, "s--", label=f"{backend}: all workers' processes, peak")
    rate_ax.set(xscale="log", xlabel="recipients", ylabel="recipients/s (launch → finished)")
    mem_ax.set(xscale="log", xlabel="recipients", ylabel="worker RSS, MB")
    rate_ax.set_ylim(bottom=0)
    mem_ax.set_ylim(bottom=0)
    for ax in (rate_ax, mem_ax):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(
        f"bench_scale.py, {data['started']}: {data['workers']} workers, {_redis_label(data)},\n"
        f"{data['machine']}"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def _size(r: dict[str, Any]) -> int:
    return int(r["recipients"])


# -- main ------------------------------------------------------------------------------------
def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000,10000000")
    parser.add_argument("--backend", choices=("sql", "hbase", "both"), default="both")
    parser.add_argument("--workers", type=int, default=4, help="worker processes")
    parser.add_argument("--batch-size", type=int, default=settings.BULK_BATCH_SIZE)
    parser.add_argument("--keep", action="store_true", help="keep the last run's data")
    parser.add_argument(
        "--buffer-pool-mb",
        type=int,
        default=4096,
        help="InnoDB buffer pool for the run (resized online, restored after; 0: leave it)",
    )
    parser.add_argument(
        "--aof-rewrite-min-mb",
        type=int,
        default=16384,
        help="Redis auto-aof-rewrite-min-size for the run (restored after; 0: leave it)",
    )
    parser.add_argument(
        "--redis-keys",
        type=int,
        default=20_000_000,
        help="other users' unread hashes the bench's Redis holds through every run (0: none)",
    )
    parser.add_argument("--json", type=Path, default=ROOT / "var/bench_scale.json")
    parser.add_argument("--png", type=Path, default=ROOT / "docs/bench_scale.png")
    parser.add_argument("--replot", type=Path, help="only draw --png from this JSON file")
    parser.add_argument(
        "--baseline", type=Path, help="with --replot: another run's JSON, its rates drawn dotted"
    )
    parser.add_argument(
        "--baseline-label", help="what sets the baseline apart (its Redis's keys unless told)"
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.replot:
        baseline = json.loads(args.baseline.read_text()) if args.baseline else None
        if baseline and args.baseline_label:
            baseline["label"] = args.baseline_label
        plot(args.png, json.loads(args.replot.read_text()), baseline)
        print(f"plot: {args.png}")
        return
    began = time.time()
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    backends = ["sql", "hbase"] if args.backend == "both" else [args.backend]
    ensure_database()
    before, pool = buffer_pool_mb(args.buffer_pool_mb or None)
    aof_before, aof = aof_min_mb(args.aof_rewrite_min_mb or None)
    try:
        run_and_report(args, sizes, backends, began, {"buffer_pool_mb": pool, "aof_min_mb": aof})
    finally:
        buffer_pool_mb(before)
        aof_min_mb(aof_before)


def aof_min_mb(want: int | None) -> tuple[int, int]:
    """Set Redis's ``auto-aof-rewrite-min-size`` to ``want`` MB (None: leave it); returns
    (before, now) in MB, as ``buffer_pool_mb`` does. Past this size Redis rewrites its AOF each
    time the file doubles: from a nearly empty Redis, 3-9 rewrites in a 10M run, which took
    about 7% off the SQL 10M rate on this 2-core machine (BENCHMARKS.md, 7 Dec). On a
    deployment the rewrite runs on the Redis host's cores, so the default, 16 GB, keeps it out
    of the runs (a 10M run's AOF grows by ~5 GB, the site's 20M keys by ~1.5 GB)."""
    redis = get_redis()
    before = _aof_min(redis)
    if want is not None:
        redis.config_set("auto-aof-rewrite-min-size", int(want) * MB)
    return before, _aof_min(redis)


def _aof_min(redis: Any) -> int:
    reply = redis.config_get("auto-aof-rewrite-min-size")
    return int(str(reply["auto-aof-rewrite-min-size"])) // MB


def run_and_report(
    args: argparse.Namespace,
    sizes: list[int],
    backends: list[str],
    began: float,
    server: dict[str, int],
) -> None:
    prepare(args.batch_size, args.redis_keys)
    header = {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "machine": machine(),
        "workers": args.workers,
        "batch_size": args.batch_size,
        "conditions": CONDITIONS,
        "buffer_pool_mb": server["buffer_pool_mb"],
        "aof_rewrite_min_mb": server["aof_min_mb"],
        "redis_site_keys": args.redis_keys,
    }
    print_header(header, sizes, backends)
    results = run_all(args, sizes, backends, header)
    console.print(summary_table(results))
    plot(args.png, {**header, "runs": results})
    print(f"raw figures: {args.json}\nplot: {args.png}\nwall time {time.time() - began:.0f}s")
    broken = [f"{r['backend']} {r['recipients']:,}: {p}" for r in results for p in r["problems"]]
    if broken:
        raise SystemExit("FAILED: " + "; ".join(broken))


def print_header(header: dict[str, Any], sizes: list[int], backends: list[str]) -> None:
    cores = os.cpu_count() or 0
    print(f"machine: {header['machine']}")
    print(
        f"{header['workers']} worker processes x 1 on {cores} cores: they share the cores with "
        "MariaDB (+ its replica), Redis, HBase and this script"
        + (" (more workers than cores)" if header["workers"] > cores else "")
    )
    print(f"conditions: {header['conditions']}; batches of {header['batch_size']:,}")
    print(f"MariaDB InnoDB buffer pool: {header['buffer_pool_mb']:,} MB (restored after the run)")
    print(
        f"Redis auto-aof-rewrite-min-size: {header['aof_rewrite_min_mb']:,} MB (AOF everysec; "
        "restored after the run)"
    )
    print(
        f"Redis: {header['redis_site_keys']:,} other users' unread hashes held through every run"
        + (
            " (an empty Redis: the run's keys are the whole keyspace)"
            if not header["redis_site_keys"]
            else ""
        )
    )
    print(f"sizes {', '.join(f'{s:,}' for s in sizes)} on {' and '.join(backends)}")
    print(
        f"data: database {DATABASE}, Redis db 14/15, HBase prefix {BENCH_ENV['HBASE_TABLE_PREFIX']}"
    )


WARM_OFFSET = 5_000_000  # the warm-up sender's uid below the timed one (no shared followers)


def warm_up(backend: str, sender: int, total: int, args: argparse.Namespace) -> None:
    """One untimed campaign per backend before the timed ones, from its own sender to its own
    followers (one batch per worker), then deleted. A store that sat idle starts slowly: on
    25 Nov, after HBase had been idle 25 minutes, the first 3 s of a 1M campaign ran at 16k/s
    against 30-40k/s after, which put that run's ETA 94% off at 10% done; run again at once,
    the same campaign's first slice ran at 38k/s. Production stores are not idle-cold; the
    timed runs should not measure that."""
    Account.objects.create(uid=sender, kind="business", name=f"bench_scale warm-up {sender}")
    seed_followers(sender, 0, total)
    run = campaign_on_fresh_workers(backend, sender, total, args.workers)
    print(f"warm-up ({backend}, untimed): {total:,} recipients at {run['rate']:,.0f}/s")
    cleanup_run(backend, sender, total, run["campaign"], args.redis_keys)
    delete_followers(sender, total)
    Account.objects.filter(uid=sender).delete()


def run_all(
    args: argparse.Namespace, sizes: list[int], backends: list[str], header: dict[str, Any]
) -> list[dict[str, Any]]:
    sender = int(time.time()) * 10_000_000  # followers sender+1 .. sender+max(sizes)
    Account.objects.create(uid=sender, kind="business", name=f"bench_scale {sender}")
    results: list[dict[str, Any]] = []
    have, seeding = 0, []
    for backend in backends:
        warm_up(backend, sender - WARM_OFFSET, args.workers * args.batch_size, args)
    for size in sizes:
        seconds = seed_followers(sender, have, size)
        seeding.append({"from": have, "to": size, "seconds": round(seconds, 1)})
        print(
            f"followers {have:,} → {size:,} in {seconds:.1f}s "
            f"({(size - have) / seconds:,.0f} rows/s)"
        )
        have = size
        for backend in backends:
            last = size == sizes[-1] and backend == backends[-1]
            results.append(bench(backend, sender, size, args, args.keep and last))
            save(args.json, {**header, "seeding": seeding}, results)
    if not args.keep:
        get_redis().flushdb(asynchronous=True)  # the site's keys too
        delete_followers(sender, have)
        Account.objects.filter(uid=sender).delete()
    return results


if __name__ == "__main__":
    main()
