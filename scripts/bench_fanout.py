"""Fan-out benchmark: one campaign to N recipients per inbox backend, against the raw store.

    python scripts/bench_fanout.py [--recipients 200000] [--backends sql,hbase] [--workers 4]
                                   [--profile] [--kill-one] [--realistic] [--live-ab]

Two sets of conditions, printed at the top of every run:

- **cheapest** (the default): no per-receiver cap (the sender's policy lifts it), no channel
  throttle, every recipient new to the sender (no conversation row to update), no cached
  conversation list to push into, the HBase index of cached lists trusted before launch.
- **realistic** (``--realistic``): the product's default cap of 1 message a day per receiver (the
  admission script runs for every recipient), no throttle, 30% of the recipients with an existing
  conversation with the sender (their rows are updated, not inserted), 10% with a cached
  conversation list in Redis and HBase (the push updates it), and the HBase index untrusted at
  launch, as after a Redis restart: the beat's ``index_rebuild`` runs beside the campaign, and
  until it completes every push reads its recipients' HBase metas.

For each backend: seeds a business account with N followers, starts real Celery workers on
``bulk.daily`` (channel rate unlimited), launches one campaign and times it from launch until the
campaign is ``finished`` (every batch committed: inbox rows, conversations, unread counters,
delivery events, ledger). Then, in the same run, writes the same N inbox rows straight into the
store with as many processes (bare multi-row INSERTs on MariaDB, integers inlined; bare Thrift
mutateRows calls on HBase, 1,000 rows each) and prints both rates and their ratio. After each
campaign it checks exactly-once (one inbox entry per recipient, unread 1 each and totals equal to
their parts, campaign totals) and exits non-zero if anything is off. Runs against the services of
``scripts/services up`` in its own database (missive_bench), Redis databases 14/15 and HBase table
prefix ``bench``.

``--profile``: the workers keep per-stage batch timings (BULK_PROFILE, bulk/profile.py) and each
run prints them as a table: ms per batch per stage and its share of the batch, then the CPU each
kind of process used during the campaign (workers, MariaDB, its replica, Redis, HBase) per
recipient: on 2 shared cores that total, not any one stage's wall time, sets the rate.
``--kill-one``: once a third of the recipients are delivered, one worker is killed with -9 (its
whole process group) while it holds a batch; the script plays the beat (``bulk.sweep`` at its
schedule) and prints the recovery time: from the kill until every batch the dead worker held is
leased again, and until the campaign finished. The fan-out rate of such a run includes the stall.
``--live-ab``: each repeat is a pair of campaigns, one with live delivery's hook (a batch reads
which of its recipients are recently online and pushes to them; here nobody is) and one with
workers that register no hook, in alternating order; prints the ratio of the medians.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import redis
from benchkit import create_database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DJANGO_SECRET_KEY": "bench-only-not-secret",  # DEBUG off needs a key (infra/deploy.py)
    "DATABASE_URL": "mysql://missive:missive@127.0.0.1:3306/missive_bench",
    "REDIS_URL": "redis://127.0.0.1:6379/14",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15",
    "HBASE_TABLE_PREFIX": "bench",
}
for _name, _value in BENCH_ENV.items():
    os.environ.setdefault(_name, _value)


create_database("missive_bench")

import django  # noqa: E402

django.setup()

from benchkit import prepare_stores  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

from bulk import fanout, ledger, profile, services  # noqa: E402
from bulk.models import (  # noqa: E402
    BatchState,
    Campaign,
    CampaignBatch,
    CampaignStatus,
    SenderPolicy,
)
from config.celery import app  # noqa: E402
from infra.redis import get_redis  # noqa: E402
from infra.sqlvalues import int_rows  # noqa: E402
from messaging.models import Account  # noqa: E402
from storage.convcache import build  # noqa: E402
from storage.convcache import keys as convcache_keys  # noqa: E402
from storage.counters import keys as unread_keys  # noqa: E402
from storage.inbox.hbase import TABLE as HBASE_TABLE  # noqa: E402
from storage.inbox.hbase import rowkey  # noqa: E402

CHEAPEST = (
    "cheapest path: no per-receiver cap, no throttle, every recipient new to the sender, no cached "
    "lists, HBase index trusted up front"
)
REALISTIC = (
    "realistic: cap 1/day per receiver, no throttle, 30% with an existing conversation with the "
    "sender, 10% with a cached list (Redis + HBase), HBase index rebuilt during the run"
)


def seed(sender: int, recipients: range, realistic: bool = False) -> None:
    Account.objects.create(uid=sender, kind="business", name=f"bench {sender}")
    # 0 lifts the cap (the cheapest path); 1 a day is the product's default
    SenderPolicy.objects.create(sender_uid=sender, per_receiver_limit=1 if realistic else 0)
    with connection.cursor() as cur:
        for start in range(0, len(recipients), 10_000):
            chunk = recipients[start : start + 10_000]
            values = ", ".join(["(%s, %s, NOW())"] * len(chunk))
            params = [v for uid in chunk for v in (uid, sender)]
            cur.execute(
                "INSERT INTO messaging_follow (follower_uid, followee_uid, followed_at) "
                f"VALUES {values}",
                params,
            )


def seed_realistic(sender: int, recipients: range, processes: int) -> None:
    """30% of the recipients talked with the sender before (a conversation row, read up to its
    last message); a third of those (10% of all) have their list cached in Redis and HBase. Then
    the HBase index loses its trust, as after a Redis restart (``run_campaign`` rebuilds it)."""
    talked = [uid for i, uid in enumerate(recipients) if i % 10 < 3]
    with connection.cursor() as cur:
        for start in range(0, len(talked), 10_000):
            chunk = talked[start : start + 10_000]
            k = 1 << 40  # an earlier message, already read
            values = ",".join(f"({uid},{sender},{k},{k},{k},1,'business',0,0)" for uid in chunk)
            cur.execute(
                "INSERT INTO messaging_conversation (owner_uid, peer_uid, last_msgkey, sort_key, "
                f"read_upto, mtime, category, pinned, muted) VALUES {values}"
            )
    cached = talked[::3]
    connection.close()
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        pool.map(_cache_lists, [cached[i::processes] for i in range(processes)])
    print(f"  cached {len(cached):,} conversation lists in {time.perf_counter() - started:.0f}s")
    get_redis().delete(convcache_keys.HBASE_INDEX_TRUSTED)


def _cache_lists(owners: list[int]) -> None:
    for owner in owners:
        build.rebuild(owner, redis_too=True)


# A worker without live delivery's hook: no sink registered, as in a process without the
# ``live`` app (infra/live_hooks.py), so a batch makes no "recently online" read and no push.
NO_LIVE_HOOK = (
    "import sys, infra.live_hooks as h; h.register = lambda *a, **k: None; "
    "from celery.__main__ import main; sys.argv[0] = 'celery'; main()"
)


def start_workers(
    backend: str, count: int, concurrency: int, profile: bool = False, live: bool = True
) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "INBOX_BACKEND": backend, "BULK_PROFILE": "1" if profile else "0"}
    procs = []
    for i in range(count):
        cmd = [
            sys.executable,
            *(["-m", "celery"] if live else ["-c", NO_LIVE_HOOK]),
            "-A",
            "config",
            "--quiet",
            "worker",
            "-Q",
            "bulk.daily",
            "-c",
            str(concurrency),
            "-n",
            f"bench{i}-{backend}@%h",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "ERROR",
        ]
        # Its own session: one process group per worker, to kill with its pool (--kill-one).
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True))
    deadline = time.monotonic() + 60
    names = {f"bench{i}-{backend}" for i in range(count)}
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=0.5) or []
        seen = {name.split("@")[0] for reply in replies for name in reply}
        if names <= seen:
            return procs
    raise SystemExit("benchmark workers did not start")


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:  # not the one --kill-one killed
            proc.terminate()
    for proc in procs:
        proc.wait(timeout=60)


ENDED = (CampaignStatus.FINISHED, CampaignStatus.FAILED, CampaignStatus.CANCELLED)


def run_campaign(
    sender: int, victim: subprocess.Popen[bytes] | None, realistic: bool = False
) -> tuple[float, Campaign]:
    started = time.perf_counter()
    if realistic:  # the beat's convcache_index after a restart, beside the campaign
        threading.Thread(target=build.index_rebuild, daemon=True).start()
    campaign, _ = services.campaign_create(
        sender_uid=sender,
        content={"type": "text", "text": "benchmark"},
        audience=services.AudienceChoice("followers", {}, None),
        channel="daily",
    )
    if victim is not None:
        kill_one(campaign.pk, victim)
    while Campaign.objects.get(pk=campaign.pk).status not in ENDED:
        time.sleep(0.05)
    return time.perf_counter() - started, Campaign.objects.get(pk=campaign.pk)


# -- --kill-one ---------------------------------------------------------------------------------
def group(leader: int) -> set[int]:
    """The processes of the worker whose session ``leader`` leads: its main process and pool."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) == leader:
                    found.add(int(entry))
            except OSError:  # exited meanwhile
                continue
    return found


def held_by(pids: set[int]) -> dict[int, str]:
    running = CampaignBatch.objects.filter(state=BatchState.RUNNING)
    rows = running.values_list("pk", "lease_token")
    return {pk: token for pk, token in rows if ledger.holder_pid(token) in pids}


def kill_one(campaign_id: int, victim: subprocess.Popen[bytes]) -> None:
    """Kill ``victim`` (-9, its whole group) once a third is delivered and it holds a batch; then
    play the beat until the campaign ends, printing when the dead worker's batches were leased
    again and when the campaign finished."""
    pool, total = group(victim.pid), None
    while True:
        campaign = Campaign.objects.get(pk=campaign_id)
        total = total or (campaign.total if campaign.planned else None)
        if campaign.status in ENDED:
            print("  kill-one: the campaign ended before a third was delivered; nothing killed")
            return
        if campaign.delivered * 3 >= (total or 10**12) and held_by(pool):
            break
        time.sleep(0.002)
    os.killpg(victim.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    victim.wait()
    orphans = held_by(pool)
    recovered = beat_until(campaign_id, orphans)
    finished = time.monotonic() - killed_at
    print(
        f"  kill-one: worker killed holding {len(orphans)} batches at "
        f"{campaign.delivered:,} delivered; leased again {recovered - killed_at:.1f} s after "
        f"the kill; campaign ended {finished:.1f} s after it (BULK_LEASE_S="
        f"{ledger.lease_seconds()}, sweep every {sweep_every():g} s)"
    )


def sweep_every() -> float:
    entry: dict[str, Any] = settings.CELERY_BEAT_SCHEDULE["bulk-sweep"]
    return float(entry["schedule"])


def beat_until(campaign_id: int, orphans: dict[int, str]) -> float:
    """``bulk.sweep`` at its schedule until the campaign ends; when the orphans were re-leased."""
    recovered, last_sweep = 0.0, 0.0
    while True:
        if time.monotonic() - last_sweep >= sweep_every():
            last_sweep = time.monotonic()
            fanout.sweep()
        if not recovered:
            tokens = dict(
                CampaignBatch.objects.filter(pk__in=orphans).values_list("pk", "lease_token")
            )
            if all(tokens[pk] != token for pk, token in orphans.items()):
                recovered = time.monotonic()
        if recovered and Campaign.objects.get(pk=campaign_id).status in ENDED:
            return recovered
        time.sleep(0.02)


# -- --profile ----------------------------------------------------------------------------------
# -- --profile: CPU by process --------------------------------------------------------------------
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_by_role(workers: set[int]) -> dict[str, float]:
    """CPU seconds used so far by each kind of process on the machine (/proc/<pid>/stat): the
    benchmark's workers, MariaDB and its replica, the Redis of the data and broker, HBase (all
    its JVMs), the Redis Cluster, and the rest (this script included)."""
    used: dict[str, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmd:
                cmdline = cmd.read()
        except OSError:  # exited meanwhile
            continue
        role = _role(int(entry), cmdline, workers)
        used[role] = used.get(role, 0.0) + (int(fields[11]) + int(fields[12])) * TICK_S
    return used


def _role(pid: int, cmdline: bytes, workers: set[int]) -> str:
    if pid in workers:
        return "fan-out workers (Python)"
    if b"mariadbd" in cmdline:
        return "MariaDB replica" if b"replica" in cmdline else "MariaDB"
    if b"redis-server" in cmdline:
        if b":6379" in cmdline:
            return "Redis :6379 (data, broker)"
        port = re.search(rb":(\d+)", cmdline)
        role = _cluster_roles().get(int(port.group(1))) if port else None
        return f"Redis Cluster {role}" if role else "other Redis"
    if cmdline.startswith(b"java"):
        return "HBase (master+RS, Thrift)"
    return "other (this script, system)"


@functools.cache
def _cluster_roles() -> dict[int, str]:
    """Port -> ``primaries`` or ``replicas`` for the Redis Cluster's nodes (ROLE, asked once a
    run; {} without a cluster): their CPU apart, since a deployment's replicas run elsewhere."""
    roles: dict[int, str] = {}
    for port in CLUSTER_PORTS:
        try:
            role = redis.Redis(port=port, socket_timeout=1).execute_command("ROLE")[0]
        except redis.RedisError:
            continue
        roles[port] = "primaries" if role in (b"master", "master") else "replicas"
    return roles


CLUSTER_PORTS = range(7000, 7006)  # scripts/services' Redis Cluster


def print_cpu(before: dict[str, float], after: dict[str, float], recipients: int) -> None:
    spent = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    total = sum(v for v in spent.values() if v > 0)
    print(f"  CPU during the campaign: {total:.1f} s, {total / recipients * 1e6:.1f} µs/recipient")
    for role, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        if seconds > 0:
            per = seconds / recipients * 1e6
            print(f"    {role:<30} {seconds:7.1f} s {per:7.1f} µs/recipient {seconds / total:6.1%}")


def print_profile(campaign_id: int) -> None:
    found = profile.read(campaign_id)
    if not found.batches:
        print("  profile: no batch recorded (BULK_PROFILE off in the workers?)")
        return
    print(
        f"  profile of {found.batches} batches ({found.recipients / found.batches:,.0f} "
        f"recipients each), {found.ms_per_batch:.1f} ms per batch:"
    )
    print(f"    {'stage':<28} {'ms/batch':>9} {'share':>7}")
    for stage in found.stages:
        print(f"    {stage.stage:<28} {stage.ms_per_batch:>9.2f} {stage.share:>7.1%}")


def verify(backend: str, sender: int, recipients: range, campaign: Campaign) -> list[str]:
    problems = []
    n = len(recipients)
    if (campaign.status, campaign.total, campaign.delivered) != ("finished", n, n):
        problems.append(
            f"campaign {campaign.status} total={campaign.total} "
            f"delivered={campaign.delivered} (expected {n})"
        )
    owners = inbox_owners(backend, sender)
    if owners != n or inbox_distinct(backend, sender) != n:
        problems.append(f"inbox holds {owners} rows for {n} recipients")
    problems += unread_problems(sender, recipients)
    return problems


def inbox_owners(backend: str, sender: int) -> int:
    if backend == "sql":
        with connection.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM messaging_inbox WHERE peer_uid = %s", [sender])
            return int(cur.fetchone()[0])
    return len(hbase_owner_rows(sender))


def inbox_distinct(backend: str, sender: int) -> int:
    if backend == "sql":
        with connection.cursor() as cur:
            cur.execute(
                "SELECT COUNT(DISTINCT owner_uid) FROM messaging_inbox WHERE peer_uid = %s",
                [sender],
            )
            return int(cur.fetchone()[0])
    return len(set(hbase_owner_rows(sender)))


_hbase_rows: dict[int, list[int]] = {}


def hbase_owner_rows(sender: int) -> list[int]:
    """Owners of every inbox row whose peer is ``sender`` (a full scan of the bench table)."""
    if sender not in _hbase_rows:
        from infra import hbase

        peer = sender.to_bytes(8, "big")

        def scan(conn):  # type: ignore[no-untyped-def]
            rows = conn.table(HBASE_TABLE).scan(filter=b"KeyOnlyFilter()", batch_size=5000)
            return [int.from_bytes(k[1:9], "big") for k, _ in rows if k[9:17] == peer]

        _hbase_rows[sender] = hbase.call(scan)
    return _hbase_rows[sender]


def unread_problems(sender: int, recipients: range) -> list[str]:
    pipe = get_redis().pipeline(transaction=False)
    for uid in recipients:
        pipe.hmget(unread_keys.unread(uid), [f"p:{sender}", "t"])
    wrong = sum(1 for values in pipe.execute() if values != [b"1", b"1"])
    return [f"{wrong} recipients have unread != 1"] if wrong else []


def raw_rate(backend: str, sender: int, recipients: range, processes: int) -> float:
    parts = [recipients[i::processes] for i in range(processes)]
    connection.close()  # each forked writer opens its own connection
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        started = time.perf_counter()
        pool.starmap(_raw_write, [(backend, sender, list(p)) for p in parts])
        return len(recipients) / (time.perf_counter() - started)


def _raw_write(backend: str, sender: int, owners: list[int]) -> None:
    msgkey = 1 << 40  # another message than the campaign's: same rows, no overwrite
    if backend == "sql":
        # Integers inlined (infra/sqlvalues.py), not escaped one by one by the client: the raw
        # rate is the store's, not MySQLdb's.
        with connection.cursor() as cur:
            for start in range(0, len(owners), 1000):
                chunk = owners[start : start + 1000]
                values = int_rows((o, sender, msgkey, 0, 0) for o in chunk)
                cur.execute(
                    "INSERT INTO messaging_inbox (owner_uid, peer_uid, msgkey, direction, "
                    f"flags) VALUES {values}"
                )
        return
    import happybase
    from django.conf import settings
    from Hbase_thrift import BatchMutation, Mutation

    conn = happybase.Connection(
        settings.HBASE["HOST"],
        settings.HBASE["PORT"],
        table_prefix=settings.HBASE["TABLE_PREFIX"],
        table_prefix_separator=b"_",
    )
    # Bare Thrift mutateRows of 1,000 rows (the inbox backend's own client path, minus the
    # backend): happybase's Batch spends more client CPU per row than the store spends on it.
    value = [Mutation(column=b"d:v", value=b"\x00\x00", isDelete=False, writeToWAL=True)]
    rows = [BatchMutation(rowkey(owner, sender, msgkey), value) for owner in owners]
    name = conn.table(HBASE_TABLE).name
    for start in range(0, len(rows), 1000):
        conn.client.mutateRows(name, rows[start : start + 1000], {})
    conn.close()


def bench(
    backend: str, n: int, base: int, args: argparse.Namespace, live: bool = True
) -> dict[str, float]:
    workers, concurrency = args.workers, args.concurrency
    sender, recipients = base, range(base + 1, base + 1 + n)
    seed(sender, recipients, args.realistic)
    if args.realistic:
        seed_realistic(sender, recipients, workers * concurrency)
    procs = start_workers(backend, workers, concurrency, profile=args.profile, live=live)
    pids = {pid for proc in procs for pid in group(proc.pid)}
    cpu_before = cpu_by_role(pids)
    try:
        victim = procs[0] if args.kill_one else None
        seconds, campaign = run_campaign(sender, victim, args.realistic)
        cpu_after = cpu_by_role(pids)
    finally:
        stop(procs)
    if args.profile:
        print_profile(campaign.pk)
        print_cpu(cpu_before, cpu_after, n)
    problems = verify(backend, sender, recipients, campaign)
    raw = raw_rate(backend, sender, recipients, workers * concurrency)
    fanout = n / seconds
    label = backend if live else f"{backend} (no live hook)"
    print(
        f"{label:6} fan-out {fanout:>9,.0f} recipients/s ({seconds:.1f}s) | raw store "
        f"{raw:>9,.0f} rows/s | ratio {fanout / raw:.2f} | exactly-once: "
        f"{'OK' if not problems else 'FAILED'}"
    )
    if problems:
        raise SystemExit(f"exactly-once check FAILED on {backend}: " + "; ".join(problems))
    return {"fanout": fanout, "raw": raw, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=200_000)
    parser.add_argument("--backends", default="sql,hbase")
    # Four: with two, the cores sat idle while each batch waited on MariaDB, Redis and HBase in
    # turn (SQL, 200,000 recipients, alternating in one hour: two workers 21,900-23,400/s, four
    # 23,500-27,400/s; three and six were within noise of four).
    parser.add_argument("--workers", type=int, default=4, help="worker processes")
    parser.add_argument("--concurrency", type=int, default=1, help="pool size per worker")
    parser.add_argument("--batch-size", type=int, default=settings.BULK_BATCH_SIZE)
    parser.add_argument("--repeat", type=int, default=1, help="runs per backend (median)")
    parser.add_argument("--profile", action="store_true", help="per-stage batch timings")
    parser.add_argument(
        "--kill-one", action="store_true", help="kill -9 one worker mid-run; recovery time"
    )
    parser.add_argument(
        "--realistic", action="store_true", help="cap on, existing conversations, cached lists"
    )
    parser.add_argument(
        "--live-ab",
        action="store_true",
        help="each repeat twice, with live delivery's hook and without it, in alternating order",
    )
    args = parser.parse_args()
    flagged = prepare_stores(args.batch_size)
    print(f"HBase index of conversation lists trusted ({flagged:,} owners with a row flagged)")
    base = int(time.time()) * 10_000_000
    print(
        f"{args.recipients:,} recipients per run, {args.workers} worker processes x "
        f"{args.concurrency}, batches of {args.batch_size}\nconditions: "
        f"{REALISTIC if args.realistic else CHEAPEST}"
    )
    for backend in args.backends.split(","):
        if args.live_ab:
            base = live_ab(backend, base, args)
            continue
        runs = []
        for _ in range(args.repeat):
            runs.append(bench(backend, args.recipients, base, args))
            base += args.recipients + 1
        if args.repeat > 1:
            med = {k: statistics.median(r[k] for r in runs) for k in ("fanout", "raw")}
            print(
                f"{backend:6} median of {args.repeat}: fan-out {med['fanout']:,.0f}/s, raw "
                f"{med['raw']:,.0f}/s, ratio {med['fanout'] / med['raw']:.2f}"
            )


def live_ab(backend: str, base: int, args: argparse.Namespace) -> int:
    """``--repeat`` pairs, the campaign with the live hook and without, the order alternating
    from pair to pair (a machine that slows down or speeds up over the series weighs on both);
    prints the medians and their ratio. Returns the next free uid base."""
    rates: dict[bool, list[float]] = {True: [], False: []}
    for pair in range(args.repeat):
        for live in (True, False) if pair % 2 == 0 else (False, True):
            rates[live].append(bench(backend, args.recipients, base, args, live=live)["fanout"])
            base += args.recipients + 1
    on, off = statistics.median(rates[True]), statistics.median(rates[False])
    print(
        f"{backend:6} median of {args.repeat} pairs: with the live hook {on:,.0f}/s, without "
        f"{off:,.0f}/s, with / without {on / off:.3f}"
    )
    return base


if __name__ == "__main__":
    main()
