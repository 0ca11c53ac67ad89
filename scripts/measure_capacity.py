"""Measure the per-node figures ``manage.py capacity_plan`` sizes a cluster from, on this machine.

    python scripts/measure_capacity.py [--entries 200000] [--fanout-recipients 50000]

Runs the project's own code on the services of ``scripts/services up`` (its own database
``missive_capacity``, Redis database 4, HBase table prefix ``capacity``) and writes
``infra/capacity_measured.json`` with the date and the machine:
- HBase bytes per inbox entry: ``--entries`` campaign-shaped entries written through the HBase
  inbox backend, the table flushed and major-compacted (``scripts/hbase/TableFiles.java``), its
  store files summed on disk (FAST_DIFF encoding, ROW bloom, as ``hbase_init`` creates it);
- fan-out per worker and HBase rows/s per RegionServer: ``scripts/bench_fanout.py`` (HBase inbox,
  2 workers) run as a subprocess, its summary line parsed; the raw store rate divided by the
  RegionServers serving the table (all on this one machine, so per-node figures are a floor);
- Redis bytes per user (unread hash with 5 unread conversations, the announcements mark) and per
  active user (the conversation-list cache of an owner with 50 conversations), by MEMORY USAGE;
  Redis commands/s per master: pipelined HMGETs of unread hashes, one client;
- MySQL conversation-list pages/s per core (the cold tier's indexed pager, one connection) and
  bytes per conversation row (data + indexes after ANALYZE TABLE).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DJANGO_SECRET_KEY": "bench-only-not-secret",  # DEBUG off needs a key (infra/deploy.py)
    "DATABASE_URL": "mysql://missive:missive@127.0.0.1:3306/missive_capacity",
    "REDIS_URL": "redis://127.0.0.1:6379/4",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/5",
    "HBASE_TABLE_PREFIX": "capacity",
    "INBOX_BACKEND": "hbase",
}
for _name, _value in ENV.items():
    os.environ[_name] = _value


def ensure_database() -> None:
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", user="missive", passwd="missive")
    conn.cursor().execute(
        "CREATE DATABASE IF NOT EXISTS missive_capacity CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    )
    conn.close()


ensure_database()

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from infra import hbase, hbase_tables  # noqa: E402
from infra.capacity import MEASURED_FILE  # noqa: E402
from infra.redis import get_redis  # noqa: E402
from messaging import convlist, services  # noqa: E402
from messaging.convcache import keys as cache_keys  # noqa: E402
from messaging.convcache import reader  # noqa: E402
from storage.counters import keys as counter_keys  # noqa: E402
from storage.inbox import get_inbox  # noqa: E402
from storage.inbox.base import RECEIVED, InboxEntry  # noqa: E402
from storage.msgkey import next_msgkey  # noqa: E402

HBASE_DIR = ROOT / "var" / "services" / "hbase"
RUN = re.compile(r"(\w+)\s+fan-out\s+([\d,]+) recipients/s.*raw store\s+([\d,]+) rows/s")


def hbase_bytes_per_entry(n: int) -> float:
    """Campaign-shaped entries: 1,000 recipients per sender, real msgkeys, flushed and compacted."""
    table = hbase_tables.full_name("inbox").decode()
    hbase.call(
        lambda c: c.delete_table(table, disable=True) if table.encode() in c.tables() else None
    )
    hbase_tables.ensure_tables()
    inbox, base = get_inbox(), 10**12
    for start in range(0, n, 1000):
        sender, msgkey = base + start // 1000, next_msgkey()
        inbox.add_many(
            InboxEntry(base * 2 + i, sender, msgkey, RECEIVED) for i in range(start, start + 1000)
        )
    java_classpath = f"{HBASE_DIR / 'conf'}:{ROOT / 'var' / 'hbase' / 'lib'}/*"
    subprocess.run(
        [
            "java",
            f"-Dhbase.log.dir={HBASE_DIR}",
            "-Dhbase.log.file=tools.log",
            "-cp",
            java_classpath,
            str(ROOT / "scripts" / "hbase" / "TableFiles.java"),
            table,
        ],
        check=True,
        capture_output=True,
    )
    files = (HBASE_DIR / "data" / "root" / "data" / "default" / table).glob("*/d/*")
    return sum(f.stat().st_size for f in files if f.is_file()) / n


def regionservers(table: str) -> int:
    regions = hbase.call(lambda c: c.client.getTableRegions(table.encode()))
    return len({(r.serverName, r.port) for r in regions})


def fanout(recipients: int, workers: int) -> tuple[float, float]:
    """(recipients/s per worker, raw HBase rows/s) from bench_fanout's summary line."""
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_fanout.py"),
            "--backends",
            "hbase",
            "--recipients",
            str(recipients),
            "--workers",
            str(workers),
            "--repeat",
            "3",
        ],
        check=True,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ENV},  # the bench's own stores
    ).stdout
    runs = [
        (_num(rate), _num(raw)) for backend, rate, raw in RUN.findall(out) if backend == "hbase"
    ]
    if not runs:
        raise SystemExit(f"bench_fanout printed no HBase run line:\n{out}")
    rate, raw = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
    return rate / workers, raw


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def redis_sizes(owners: list[int]) -> tuple[float, float]:
    """(bytes per user: 5 unread chats + announcements mark, bytes per cached list of 50)."""
    r = get_redis()
    peers = [10**13 + i for i in range(50)]
    deliver(owners, peers[:5])
    for owner in owners:
        r.set(f"ann:mark:{{u:{owner}}}", int(time.time() * 1000))
    per_user = [_usage([counter_keys.unread(o), f"ann:mark:{{u:{o}}}"]) for o in owners]
    deliver(owners, peers[5:])
    for owner in owners:
        reader.conversation_page(owner, category=None, cursor=None, limit=20)
    per_active = [_usage(cache_keys.cache_keys(o)) for o in owners]
    return statistics.mean(per_user), statistics.mean(per_active)


def deliver(owners: list[int], peers: list[int]) -> None:
    for peer in peers:
        services.deliver_many(
            sender_uid=peer,
            receiver_uids=owners,
            msgkey=next_msgkey(),
            category="business",
            marker=f"capacity:{peer}",
        )


def _usage(names: list[str]) -> int:
    return sum(int(get_redis().memory_usage(name) or 0) for name in names)


def redis_ops(owners: list[int], seconds: float = 5.0) -> float:
    r = get_redis()
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        pipe = r.pipeline(transaction=False)
        for owner in owners[:1000]:
            pipe.hmget(counter_keys.unread(owner), "t", "c:business")
        pipe.execute()
        done += min(len(owners), 1000)
    return done / (time.perf_counter() - t0)


def mysql_pages(owners: list[int], seconds: float = 5.0) -> float:
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for owner in owners:
            convlist.mysql_page(owner, category=None, cursor=None, limit=20)
        done += len(owners)
    return done / (time.perf_counter() - t0)


def mysql_conversation_bytes() -> float:
    with connection.cursor() as cur:
        cur.execute("ANALYZE TABLE messaging_conversation")
        cur.fetchall()
        cur.execute(
            "SELECT (data_length + index_length) / GREATEST(table_rows, 1) FROM information_schema"
            ".tables WHERE table_schema = DATABASE() AND table_name = 'messaging_conversation'"
        )
        return float(cur.fetchone()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--fanout-recipients", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    get_redis().flushdb()
    print(f"HBase: {args.entries:,} inbox entries, flush, major compaction ...", flush=True)
    entry_bytes = hbase_bytes_per_entry(args.entries)
    servers = regionservers(hbase_tables.full_name("inbox").decode())
    owners = [3 * 10**12 + i for i in range(2000)]
    print("Redis and MySQL: 2,000 owners x 50 conversations ...", flush=True)
    per_user, per_active = redis_sizes(owners)
    ops, pages = redis_ops(owners), mysql_pages(owners[:200])
    conv_bytes = mysql_conversation_bytes()
    print(f"fan-out: bench_fanout.py, {args.fanout_recipients:,} recipients ...", flush=True)
    per_worker, raw = fanout(args.fanout_recipients, args.workers)
    measured = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}",
        "command": "python scripts/measure_capacity.py",
        "hbase_bytes_per_inbox_entry": round(entry_bytes, 1),
        "hbase_rows_per_s_per_regionserver": round(raw / servers),
        "fanout_per_s_per_worker": round(per_worker),
        "redis_bytes_per_user": round(per_user),
        "redis_bytes_per_active_user": round(per_active),
        "redis_ops_per_s_per_master": round(ops),
        "mysql_cold_pages_per_s_per_core": round(pages),
        "mysql_bytes_per_conversation": round(conv_bytes),
        "notes": {
            "hbase": f"{args.entries:,} entries; raw rows/s {raw:,.0f} over {servers} "
            "RegionServers on one machine (a floor for a dedicated host)",
            "fanout": f"bench_fanout.py --backends hbase --recipients {args.fanout_recipients} "
            f"--workers {args.workers} --repeat 3 (medians)",
            "redis": "per user: unread hash scaled to 5 unread conversations + announcements mark; "
            "per active user: conversation-list cache of 50 conversations",
        },
    }
    MEASURED_FILE.write_text(json.dumps(measured, indent=2) + "\n")
    print(json.dumps(measured, indent=2))


if __name__ == "__main__":
    main()
