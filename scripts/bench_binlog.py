"""The binlog follower's lag during a large fan-out (issue 23: a 1M-recipient campaign).

    python scripts/bench_binlog.py [--recipients 200000] [--backend sql] [--workers 4]
                                   [--cached-share 0.1] [--profile out.prof] [--json out.json]

Seeds a business account with N followers (10% of them, ``--cached-share``, with a cached
conversation list in Redis and HBase, so the follower's pushes have lists to write into), starts
``manage.py cache_follow --from-now`` in a process of its own, real Celery workers on
``bulk.daily`` (rate unlimited, no per-receiver cap), and launches one campaign to the followers.
While it runs, the follower's published lag (``cachesync:lag``, what ``/metrics`` exports as
``missive_binlog_lag_seconds``) is sampled every ``--every`` seconds. Once the campaign has
finished, it measures the drain: the time until the follower's saved GTID reaches the
primary's position as of the campaign's end. Prints the fan-out rate, the lag's p50 / p95 /
max during the campaign and the drain, the follower's CPU (user + system, from /proc: in all,
its share of one core during the campaign, and per recipient), and checks that a sample of the
cached lists show the campaign's message. ``--profile`` runs the follower under cProfile (it
inflates the follower's CPU: compare profiled runs with profiled runs).

Then a DBA's mass edits behind the application's back, each one transaction from a MariaDB
client of its own: half of the recipients' conversations with the sender marked read (``SET
read_upto = last_msgkey``), the other half deleted while still unread, then (SQL inbox) a backfill
of one old message into the first half (the message, an inbox row per owner, the conversations'
last message moved on to it). Each is timed from its commit until the follower's saved position
passes it (every conversation recounted, the deleted ones' tombstones pushed), and a sample of its
half is checked through the application's reads: unread 0 for the sender after the first two (the
read conversations still listed, the deleted ones gone), 1 after the backfill.

Runs against the services of ``scripts/services up`` in its own database
(missive_binlog_bench), Redis databases 12/13 and HBase table prefix ``bench``; the follower
registers as replica 4201 (``--server-id``), so it never disturbs another follower.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DJANGO_SECRET_KEY": "bench-only-not-secret",  # DEBUG off needs a key (infra/deploy.py)
    "DATABASE_URL": "mysql://missive:missive@127.0.0.1:3306/missive_binlog_bench",
    "REDIS_URL": "redis://127.0.0.1:6379/12",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/13",
    "HBASE_TABLE_PREFIX": "bench",
}
for _name, _value in BENCH_ENV.items():
    os.environ.setdefault(_name, _value)


def ensure_database() -> None:
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", user="missive", passwd="missive")
    conn.cursor().execute(
        "CREATE DATABASE IF NOT EXISTS missive_binlog_bench "
        "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    )
    conn.close()


ensure_database()

import django  # noqa: E402

django.setup()


from benchkit import cpu_s, prepare_stores  # noqa: E402
from django.db import connection  # noqa: E402

from bulk import services  # noqa: E402
from bulk.models import Campaign, CampaignStatus, SenderPolicy  # noqa: E402
from cachesync import lag, position  # noqa: E402
from config.celery import app  # noqa: E402
from messaging import selectors  # noqa: E402
from messaging.models import Account  # noqa: E402
from storage.convcache import build  # noqa: E402

ENDED = (CampaignStatus.FINISHED, CampaignStatus.FAILED, CampaignStatus.CANCELLED)


def seed(sender: int, recipients: range) -> None:
    Account.objects.create(uid=sender, kind="business", name=f"binlog bench {sender}")
    SenderPolicy.objects.create(sender_uid=sender, per_receiver_limit=0)  # no cap
    with connection.cursor() as cur:
        for start in range(0, len(recipients), 10_000):
            chunk = recipients[start : start + 10_000]
            values = ",".join(f"({uid:d},{sender:d},NOW())" for uid in chunk)
            cur.execute(
                "INSERT INTO messaging_follow (follower_uid, followee_uid, followed_at) "
                f"VALUES {values}"
            )


def cache_lists(recipients: range, share: float) -> list[int]:
    """Build the cached (empty) lists of every 1/share-th recipient in both tiers."""
    step = max(1, round(1 / share)) if share > 0 else 0
    owners = list(recipients[::step]) if step else []
    for owner in owners:
        build.rebuild(owner, redis_too=True)
    return owners


def start_follower(server_id: int, log_path: Path, profile: str | None) -> subprocess.Popen[bytes]:
    """``manage.py cache_follow`` in a process of its own (under cProfile with ``profile``: it
    exits through SIGTERM's clean stop, so the profile is written)."""
    cmd = [sys.executable, "manage.py", "cache_follow", "--from-now", f"--server-id={server_id}"]
    if profile:
        cmd[1:1] = ["-m", "cProfile", "-o", profile]
    with log_path.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ), stdout=out, stderr=out)
    deadline = time.monotonic() + 30
    while lag.read() is None:  # its first heartbeat publishes lag 0
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"cache_follow did not start: see {log_path}")
        time.sleep(0.1)
    return proc


def start_workers(backend: str, count: int) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "INBOX_BACKEND": backend}
    procs = []
    for i in range(count):
        node = f"binlog{i}-{backend}@%h"
        cmd = [sys.executable, "-m", "celery", "-A", "config", "--quiet", "worker", "-Q"]
        cmd += ["bulk.daily", "-c", "1", "-n", node, "--without-gossip", "--without-mingle"]
        procs.append(subprocess.Popen([*cmd, "-l", "ERROR"], cwd=ROOT, env=env))
    names = {f"binlog{i}-{backend}" for i in range(count)}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        seen = {n.split("@")[0] for r in app.control.ping(timeout=0.5) or [] for n in r}
        if names <= seen:
            return procs
    raise SystemExit("benchmark workers did not start")


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        proc.wait(timeout=60)


def run_campaign(sender: int, every: float) -> tuple[float, list[float], int]:
    """Launch, sample the lag until the campaign ends; (seconds, lag samples, campaign id)."""
    samples: list[float] = []
    started = time.perf_counter()
    campaign, _ = services.campaign_create(
        sender_uid=sender,
        content={"type": "text", "text": "binlog benchmark"},
        audience=services.AudienceChoice("followers", {}, None),
        channel="daily",
    )
    while Campaign.objects.get(pk=campaign.pk).status not in ENDED:
        found = lag.read()
        if found is not None:
            samples.append(found[0])
        time.sleep(every)
    return time.perf_counter() - started, samples, campaign.pk


def drain(target: str, timeout: float = 600.0) -> float:
    """Seconds until the follower's saved position reaches ``target`` (the primary's)."""
    started = time.perf_counter()
    want = position.Gtids.parse(target).by_domain
    while time.perf_counter() - started < timeout:
        saved = position.Gtids.parse(position.load() or "").by_domain
        if all(d in saved and _seq(saved[d]) >= _seq(g) for d, g in want.items()):
            return time.perf_counter() - started
        time.sleep(0.05)
    raise SystemExit(f"the follower did not reach {target} within {timeout:.0f}s")


def _seq(gtid: str) -> int:
    return int(gtid.rsplit("-", 1)[1])


def shown(owners: list[int], sender: int, sample: int = 200) -> int:
    """How many of a sample of the cached lists show the sender's conversation."""
    picked = owners[:: max(1, len(owners) // sample)][:sample]
    pages = (selectors.conversation_list(o, limit=5).results for o in picked)
    return sum(any(i.peer_uid == sender for i in page) for page in pages)


CONVERSATIONS = "messaging_conversation"


def dba_edits(sender: int, recipients: range, backend: str) -> dict[str, Any]:
    """The DBA's mass edits (module docstring), each one transaction from a client of its own
    (the application's connection marks its statements): rows, seconds until followed, checks
    on a sample through the application's reads."""
    from storage.msgkey import next_msgkey

    half = f"WHERE peer_uid = {sender:d} AND owner_uid % 2 = "
    edits: list[tuple[str, int, list[str]]] = [
        ("marked_read", 0, [f"UPDATE {CONVERSATIONS} SET read_upto = last_msgkey {half}0"]),
        ("deleted", 1, [f"DELETE FROM {CONVERSATIONS} {half}1"]),
    ]
    if backend == "sql":  # the HBase inbox's cells are not SQL rows
        msgkey = next_msgkey()
        edits.append(("backfilled", 0, backfill_statements(sender, msgkey, half + "0")))
    out: dict[str, Any] = {}
    for name, parity, statements in edits:
        rows = dba(statements)
        followed = drain(position.primary_now())
        sample = [u for u in recipients if u % 2 == parity][:: max(1, len(recipients) // 400)]
        out[name] = {
            "rows": rows,
            "followed_s": round(followed, 2),
            "rows_per_s": round(rows / followed),
            "sample": sampled(sample, sender),
        }
        print(
            f"  {name}: {rows:,} rows in one transaction, followed in {followed:.2f} s; "
            f"{out[name]['sample']}"
        )
    return out


def backfill_statements(sender: int, msgkey: int, where: str) -> list[str]:
    """One old message into each conversation of ``where`` (its inbox rows, the conversations'
    last message moved on to it), as a migration from another system writes history."""
    body = json.dumps({"type": "text", "text": "from the old system"})
    return [
        "INSERT INTO messaging_message (msgkey, sender_uid, type, body, status, created_at)"
        f" VALUES ({msgkey:d}, {sender:d}, 'text', '{body}', 0, NOW(6))",
        "INSERT INTO messaging_inbox (owner_uid, peer_uid, msgkey, direction, flags)"
        f" SELECT owner_uid, peer_uid, {msgkey:d}, 0, 0 FROM {CONVERSATIONS} {where}",
        f"UPDATE {CONVERSATIONS} SET last_msgkey = {msgkey:d}, sort_key = {msgkey:d},"
        f" mtime = {int(time.time() * 1000):d} {where}",
    ]


def dba(statements: list[str]) -> int:
    """``statements`` in one transaction from a MariaDB client of its own; rows changed."""
    import MySQLdb

    db = connection.settings_dict
    conn = MySQLdb.connect(host="127.0.0.1", user=db["USER"], passwd=db["PASSWORD"], db=db["NAME"])
    try:
        cur = conn.cursor()
        rows = 0
        for statement in statements:
            cur.execute(statement)
            rows += cur.rowcount
        conn.commit()
        return rows
    finally:
        conn.close()


def sampled(owners: list[int], sender: int) -> str:
    from unread.selectors import unread_summary

    unread = sum(unread_summary(u).by_peer.get(sender, 0) for u in owners)
    listed = sum(
        any(i.peer_uid == sender for i in selectors.conversation_list(u, limit=5).results)
        for u in owners
    )
    return f"{len(owners)} owners: unread {unread}, listed {listed}"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def bench(args: argparse.Namespace) -> dict[str, Any]:
    base = int(time.time()) * 10_000_000
    sender, recipients = base, range(base + 1, base + 1 + args.recipients)
    seed(sender, recipients)
    cached = cache_lists(recipients, args.cached_share)
    print(f"seeded {args.recipients:,} followers; {len(cached):,} cached lists")
    follower = start_follower(args.server_id, Path(args.follower_log), args.profile)
    workers = start_workers(args.backend, args.workers)
    try:
        cpu_before = cpu_s([follower.pid])
        seconds, samples, campaign_id = run_campaign(sender, args.every)
        cpu_campaign = cpu_s([follower.pid]) - cpu_before
        drained = drain(position.primary_now())
        cpu_total = cpu_s([follower.pid]) - cpu_before
        showing = shown(cached, sender)  # before the edits delete half of them
        edits = dba_edits(sender, recipients, args.backend)
    finally:
        stop(workers)
        stop([follower])
    result = {
        "recipients": args.recipients,
        "backend": args.backend,
        "campaign_s": round(seconds, 2),
        "rate_per_s": round(args.recipients / seconds),
        "lag_p50_s": round(statistics.median(samples), 3) if samples else None,
        "lag_p95_s": round(percentile(samples, 0.95), 3),
        "lag_max_s": round(max(samples, default=0.0), 3),
        "drain_s": round(drained, 2),
        "follower_cpu_s": round(cpu_total, 1),
        "follower_cpu_campaign_share": round(cpu_campaign / seconds, 2),
        "follower_cpu_us_per_recipient": round(cpu_total / args.recipients * 1e6, 1),
        "samples": len(samples),
        "cached_lists_showing_it": f"{showing}/{min(len(cached), 200)}",
        "campaign_id": campaign_id,
        "dba_edits": edits,
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=200_000, help="e.g. 1000000")
    parser.add_argument("--backend", default="sql", choices=["sql", "hbase"])
    parser.add_argument("--workers", type=int, default=4, help="Celery worker processes")
    parser.add_argument("--cached-share", type=float, default=0.1, help="recipients cached")
    parser.add_argument("--every", type=float, default=0.2, help="lag sampling period (s)")
    parser.add_argument("--server-id", type=int, default=4201, help="the follower's server_id")
    parser.add_argument("--follower-log", default="/tmp/bench_binlog_follower.log")
    parser.add_argument("--profile", help="run the follower under cProfile, stats to this file")
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args()
    prepare_stores(1000)
    result = bench(args)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
