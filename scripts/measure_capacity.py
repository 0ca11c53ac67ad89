"""Measure the figures ``manage.py capacity_plan`` sizes a cluster from, per core, on this machine.

    python scripts/measure_capacity.py [--entries 200000] [--fanout-recipients 50000]

Runs the project's own code on the services of ``scripts/services up`` (its own database
``missive_capacity``, Redis database 4, HBase table prefix ``capacity``) and writes
``infra/capacity_measured.json`` with the date and the machine. Every throughput is measured per
the unit it names, from CPU time: during each measurement it samples the CPU seconds (user +
system, psutil) of the server process that does the work, found from the server itself (the
RegionServer JVMs of ``var/services/hbase/regionserver-*.pid``, summed, and the Thrift gateway
of ``thrift.pid``; Redis :6379 by ``INFO server``'s ``process_id``; MariaDB :3306 by
``@@pid_file``; the Celery workers by ``scripts/bench_fanout.py --profile``), and stores the work
per CPU-second of that process (``..._per_s_per_core``) beside the wall-clock rate (``wall``):
on 2 shared cores a wall-clock rate is the whole machine's, a CPU-second is one core's.

- HBase bytes per inbox entry: ``--entries`` campaign-shaped entries written through the HBase
  inbox backend, the table flushed and major-compacted (``scripts/hbase/TableFiles.java``), its
  store files summed on disk (FAST_DIFF encoding, ROW bloom, as ``hbase_init`` creates it);
- HBase rows per core: ``add_received`` batches of the product's batch size from 2 processes;
  rows per CPU-second of the RegionServers' JVMs (all of them together), and of the Thrift
  gateway;
- fan-out per core: ``scripts/bench_fanout.py --profile`` (HBase inbox), recipients per
  CPU-second of its worker processes, and recipients per CPU-second of MariaDB over the whole
  campaign (conversation upserts, batch ledger, audience reads);
- Redis bytes per user (unread hash with 5 unread conversations, the announcements mark) and per
  active user (the conversation-list cache of an owner with 50 conversations), by MEMORY USAGE;
  Redis commands per core: pipelined HMGETs of unread hashes, one client;
- MySQL: conversation-list pages per core (the cold tier's indexed pager, one connection), bytes
  per conversation row (data + indexes after ANALYZE TABLE), and the primary's writes per core:
  conversation upserts in bulk batches (``conversations_touch_owners``, fresh and existing rows),
  SQL inbox rows in bulk batches, and whole 1:1 sends (``message_send``) with either inbox.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from benchkit import cpu_s, create_database

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
os.environ.pop("BULK_BATCH_SIZE", None)  # the product's batch size, not a test environment's
os.environ.pop("DATABASE_REPLICA_URL", None)  # every read on the MariaDB whose CPU is sampled


create_database("missive_capacity")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import override_settings  # noqa: E402

from infra import hbase, hbase_tables  # noqa: E402
from infra.capacity import MEASURED_FILE  # noqa: E402
from infra.redis import get_redis  # noqa: E402
from messaging import convlist, services  # noqa: E402
from messaging.conversations import conversations_touch_owners  # noqa: E402
from storage.convcache import keys as cache_keys  # noqa: E402
from storage.convcache import reader  # noqa: E402
from storage.counters import keys as counter_keys  # noqa: E402
from storage.inbox import get_inbox, inbox_for  # noqa: E402
from storage.inbox.base import RECEIVED, InboxEntry  # noqa: E402
from storage.msgkey import next_msgkey  # noqa: E402

HBASE_DIR = ROOT / "var" / "services" / "hbase"
BATCH = int(settings.BULK_BATCH_SIZE)
RUN = re.compile(r"(\w+)\s+fan-out\s+([\d,]+) recipients/s.*raw store\s+([\d,]+) rows/s")
CPU_LINE = re.compile(r"^\s+(.+?)\s+([\d.]+) s\s+[\d.]+ µs/recipient", re.M)
WORKERS_ROLE, MARIADB_ROLE = "fan-out workers (Python)", "MariaDB"


# -- the server processes and their CPU time ------------------------------------------------------
def server_pids() -> dict[str, list[int]]:
    """Each server's process, as the server itself names it (no guess from a process list)."""
    with connection.cursor() as cur:
        cur.execute("SELECT @@pid_file")
        mariadb = int(Path(cur.fetchone()[0]).read_text())
    return {
        "hbase": regionserver_pids(),  # the RegionServer JVMs (not the HMaster nor ZooKeeper)
        "thrift": [_pid_file(HBASE_DIR / "thrift.pid")],  # the gateway happybase writes through
        "redis": [int(get_redis().info("server")["process_id"])],
        "mariadb": [mariadb],
    }


def regionserver_pids() -> list[int]:
    """scripts/services runs one JVM per RegionServer (``regionserver-N.pid``)."""
    pids = [_pid_file(path) for path in sorted(HBASE_DIR.glob("regionserver-*.pid"))]
    assert pids, f"no RegionServer pidfile under {HBASE_DIR}: is HBase up (scripts/services)?"
    return pids


def _pid_file(path: Path) -> int:
    return int(path.read_text().split()[0])


@dataclass(frozen=True)
class Timing:
    """``done`` units of work in ``wall`` seconds, and the CPU seconds each server spent on it."""

    done: float
    wall: float
    cpu: dict[str, float]

    def per_s(self) -> float:
        return self.done / self.wall

    def per_cpu_s(self, server: str) -> float:
        return self.done / max(self.cpu[server], 1e-9)


def timed(pids: dict[str, list[int]], work: Callable[[], float]) -> Timing:
    before, t0 = {s: cpu_s(p) for s, p in pids.items()}, time.perf_counter()
    done = work()
    wall = time.perf_counter() - t0
    return Timing(done, wall, {s: cpu_s(p) - before[s] for s, p in pids.items()})


def idle_rates(pids: dict[str, list[int]], seconds: float = 3.0) -> dict[str, float]:
    """Each server's CPU seconds per second with nothing of ours running (the noise floor)."""
    idle = timed(pids, lambda: _sleep(seconds))
    return {s: round(c / idle.wall, 3) for s, c in idle.cpu.items()}


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return 0.0


# -- HBase ----------------------------------------------------------------------------------------
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


def hbase_writes(pids: dict[str, list[int]], batches: int, processes: int = 2) -> Timing:
    """Bulk batches through the inbox backend (``add_received``, one sender, fresh owners)."""
    parts = [list(range(i, batches, processes)) for i in range(processes)]
    connection.close()  # each forked writer opens its own (infra.hbase pools are per process)
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        return timed(pids, lambda: float(sum(pool.map(_hbase_batches, parts))))


def _hbase_batches(numbers: list[int]) -> int:
    inbox, sender, msgkey = get_inbox(), 4 * 10**12, next_msgkey()
    for n in numbers:
        inbox.add_received(
            range(5 * 10**12 + n * BATCH, 5 * 10**12 + (n + 1) * BATCH), sender, msgkey
        )
    return len(numbers) * BATCH


# -- fan-out (bench_fanout.py) --------------------------------------------------------------------
@dataclass(frozen=True)
class Fanout:
    wall_per_worker: float  # recipients/s of a worker process, wall clock
    per_worker_cpu_s: float  # recipients per CPU-second of the worker processes
    per_mariadb_cpu_s: float  # recipients per CPU-second of MariaDB over the whole campaign
    raw: float  # bench_fanout's raw store rows/s (HBase, bare Thrift)
    busy: float  # CPU seconds per second of one worker process


def fanout(recipients: int, workers: int) -> Fanout:
    """Medians of 3 ``bench_fanout.py --profile`` campaigns: its CPU table is per campaign."""
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
            "--batch-size",
            str(BATCH),
            "--repeat",
            "3",
            "--profile",
        ],
        check=True,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ENV},  # the bench's own stores
    ).stdout
    runs = [_run(block, recipients, workers) for block in _campaigns(out)]
    if not runs:
        raise SystemExit(f"bench_fanout printed no HBase run line:\n{out}")
    return Fanout(*(statistics.median(r[i] for r in runs) for i in range(5)))


def _campaigns(out: str) -> list[str]:
    """The text of each campaign: its CPU table, then its run line."""
    blocks, current = [], []
    for row in out.splitlines():
        current.append(row)
        if RUN.search(row):
            blocks.append("\n".join(current))
            current = []
    return blocks


def _run(block: str, recipients: int, workers: int) -> tuple[float, float, float, float, float]:
    _, rate, raw = RUN.findall(block)[0]
    cpu = {role.strip(): float(s) for role, s in CPU_LINE.findall(block)}
    seconds = recipients / _num(rate)
    worker_cpu, mariadb_cpu = cpu[WORKERS_ROLE], cpu[MARIADB_ROLE]
    return (
        _num(rate) / workers,
        recipients / worker_cpu,
        recipients / mariadb_cpu,
        _num(raw),
        worker_cpu / workers / seconds,
    )


def _num(text: str) -> float:
    return float(text.replace(",", ""))


# -- Redis ----------------------------------------------------------------------------------------
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
    return float(done)


# -- MySQL ----------------------------------------------------------------------------------------
def mysql_pages(owners: list[int], seconds: float = 5.0) -> float:
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for owner in owners:
            convlist.mysql_page(owner, category=None, cursor=None, limit=20)
        done += len(owners)
    return float(done)


def conversation_upserts(owners: range, peer: int) -> float:
    """A campaign's conversation writes: one ``conversations_touch_owners`` per batch, one commit
    per batch (as ``deliver_many``); new rows the first time, updated rows the next."""
    msgkey = next_msgkey()
    for start in range(0, len(owners), BATCH):
        with transaction.atomic():
            conversations_touch_owners(owners[start : start + BATCH], peer, "business", msgkey, 1)
    return float(len(owners))


def sql_inbox_rows(owners: range, peer: int) -> float:
    """The SQL inbox's rows of a campaign: ``add_received`` per batch, one commit per batch."""
    inbox, msgkey = inbox_for("sql"), next_msgkey()
    for start in range(0, len(owners), BATCH):
        with transaction.atomic():
            inbox.add_received(owners[start : start + BATCH], peer, msgkey)
    return float(len(owners))


def sends(n: int, base: int, inbox: str) -> float:
    """Whole 1:1 sends (``message_send``): the message, its client id, both conversations, and
    with the SQL inbox both inbox rows."""
    with override_settings(INBOX_BACKEND=inbox):
        for i in range(n):
            _send(base, i)
    return float(n)


def _send(base: int, i: int) -> None:
    services.message_send(
        sender_uid=base + i % 100,
        receiver_uid=base + 1000 + i,
        content={"type": "text", "text": "capacity"},
        client_msg_id=f"capacity-{base}-{i}",
    )


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
    parser.add_argument("--hbase-batches", type=int, default=60, help="add_received batches")
    parser.add_argument("--fanout-recipients", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--upsert-rows", type=int, default=120_000, help="conversation rows")
    parser.add_argument("--sends", type=int, default=1_500, help="1:1 sends")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    get_redis().flushdb()
    pids = server_pids()
    idle = idle_rates(pids)
    print(f"servers {pids}, idle CPU s/s {idle}", flush=True)
    print(f"HBase: {args.entries:,} inbox entries, flush, major compaction ...", flush=True)
    entry_bytes = hbase_bytes_per_entry(args.entries)
    servers = regionservers(hbase_tables.full_name("inbox").decode())
    hb = hbase_writes({s: pids[s] for s in ("hbase", "thrift")}, args.hbase_batches)
    owners = [3 * 10**12 + i for i in range(2000)]
    print("Redis and MySQL: 2,000 owners x 50 conversations ...", flush=True)
    per_user, per_active = redis_sizes(owners)
    ops = timed({"redis": pids["redis"]}, lambda: redis_ops(owners))
    db = {"mariadb": pids["mariadb"]}
    pages = timed(db, lambda: mysql_pages(owners[:200]))
    conv_bytes = mysql_conversation_bytes()
    print(f"MySQL primary: {args.upsert_rows:,} rows in batches of {BATCH:,} ...", flush=True)
    rows, peer = range(6 * 10**12, 6 * 10**12 + args.upsert_rows), 6 * 10**12 - 1
    fresh = timed(db, lambda: conversation_upserts(rows, peer))
    existing = timed(db, lambda: conversation_upserts(rows, peer))
    inbox_rows = timed(db, lambda: sql_inbox_rows(rows, peer))
    one_to_one = timed(db, lambda: sends(args.sends, 7 * 10**12, "hbase"))
    sql_sends = timed(db, lambda: sends(args.sends, 8 * 10**12, "sql"))
    print(
        f"fan-out: bench_fanout.py --profile, {args.fanout_recipients:,} recipients ...", flush=True
    )
    fan = fanout(args.fanout_recipients, args.workers)
    measured = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}",
        "command": "python scripts/measure_capacity.py",
        "hbase_bytes_per_inbox_entry": round(entry_bytes, 1),
        "hbase_rows_per_s_per_core": round(hb.per_cpu_s("hbase")),
        "hbase_thrift_rows_per_s_per_core": round(hb.per_cpu_s("thrift")),
        "fanout_per_s_per_core": round(fan.per_worker_cpu_s),
        "redis_bytes_per_user": round(per_user),
        "redis_bytes_per_active_user": round(per_active),
        "redis_ops_per_s_per_core": round(ops.per_cpu_s("redis")),
        "mysql_cold_pages_per_s_per_core": round(pages.per_cpu_s("mariadb")),
        "mysql_bytes_per_conversation": round(conv_bytes),
        "mysql_conversation_rows_per_s_per_core": round(fresh.per_cpu_s("mariadb")),
        "mysql_conversation_updates_per_s_per_core": round(existing.per_cpu_s("mariadb")),
        "mysql_inbox_rows_per_s_per_core": round(inbox_rows.per_cpu_s("mariadb")),
        "mysql_campaign_recipients_per_s_per_core": round(fan.per_mariadb_cpu_s),
        "mysql_sends_per_s_per_core": round(one_to_one.per_cpu_s("mariadb")),
        "mysql_sql_inbox_sends_per_s_per_core": round(sql_sends.per_cpu_s("mariadb")),
        "wall": {
            "hbase_rows_per_s": round(hb.per_s()),
            "fanout_per_s_per_worker": round(fan.wall_per_worker),
            "fanout_worker_cores_busy": round(fan.busy, 2),
            "hbase_raw_store_rows_per_s": round(fan.raw),
            "redis_ops_per_s": round(ops.per_s()),
            "mysql_cold_pages_per_s": round(pages.per_s()),
            "mysql_conversation_rows_per_s": round(fresh.per_s()),
            "mysql_conversation_updates_per_s": round(existing.per_s()),
            "mysql_inbox_rows_per_s": round(inbox_rows.per_s()),
            "mysql_sends_per_s": round(one_to_one.per_s()),
            "mysql_sql_inbox_sends_per_s": round(sql_sends.per_s()),
        },
        "notes": notes(args, servers, idle),
    }
    MEASURED_FILE.write_text(json.dumps(measured, indent=2) + "\n")
    print(json.dumps(measured, indent=2))


def notes(args: argparse.Namespace, servers: int, idle: dict[str, float]) -> dict[str, str]:
    """How each figure was measured, stored beside it."""
    return {
        "per core": "every ..._per_s_per_core figure is work done per CPU-second (user + system, "
        "psutil) of the server process that did it, sampled around the measurement; 'wall' "
        "holds the wall-clock rates of the same runs (this whole 2-core machine, shared)",
        "idle": f"CPU seconds per second of each server with nothing of ours running: {idle}",
        "hbase": f"{args.entries:,} entries for the bytes; rows: {args.hbase_batches} "
        f"add_received batches of {BATCH:,} from 2 processes (HBase inbox backend), per "
        f"CPU-second of the {servers} RegionServer JVMs serving the table, summed "
        "(regionserver-*.pid; the HMaster and ZooKeeper JVMs not counted) and of the Thrift "
        "gateway (thrift.pid)",
        "fanout": f"bench_fanout.py --backends hbase --recipients {args.fanout_recipients} "
        f"--workers {args.workers} --batch-size {BATCH} --repeat 3 --profile (medians): "
        "recipients per CPU-second of the worker processes (main + pool) and of MariaDB during "
        "the campaign (conversation upserts, batch ledger, audience reads; all recipients new)",
        "redis": "per user: unread hash scaled to 5 unread conversations + announcements mark; "
        "per active user: conversation-list cache of 50 conversations; commands: pipelined "
        "HMGETs of 1,000 unread hashes, one client, 5 s, per CPU-second of redis-server :6379",
        "mysql": f"pages: convlist.mysql_page, one connection, 5 s; writes: {args.upsert_rows:,} "
        f"conversation rows by conversations_touch_owners in batches of {BATCH:,}, one commit "
        "per batch, new rows then the same rows updated; the SQL inbox's add_received the "
        f"same way; {args.sends:,} message_send calls, one connection, with the HBase inbox and "
        "again with the SQL inbox; all per CPU-second of "
        "mariadbd :3306 (@@pid_file)",
    }


if __name__ == "__main__":
    main()
