"""One machine against its scale-out topologies, side by side in one run (issue 11).

    python scripts/bench_scaleout.py [--recipients 100000] [--repeat 3] [--seconds 15]
        [--skip fanout,unread,replica] [--paths cheapest,realistic] [--realistic]

Needs ``scripts/services up`` (MariaDB and its replica :3307, Redis :6379, the Redis Cluster
:7000-7005, HBase). Three parts, one after another, never two at once:
1. fan-out: ``scripts/bench_fanout.py`` (SQL inbox, 4 workers) with every data key on the one
   Redis and with ``REDIS_CLUSTER=1`` on the cluster, in turn (AB BA AB ...); medians of
   ``--repeat`` runs a side, each checked exactly-once by the bench itself; on both of
   bench_fanout's paths, side by side: the cheapest (every recipient new, no cap) and the
   realistic one (cap 1 a day, 30% with a conversation with the sender, 10% with a cached list,
   the HBase index rebuilt during the run); ``--paths`` picks one (``--realistic``: the realistic
   one alone);
2. the unread fast path under load: ``scripts/bench_cluster.py`` (one Redis vs the cluster);
3. conversation-list cold reads (``messaging.convlist.mysql_page``, the tier the replica serves)
   on the primary and on the replica: 500 owners with 40 conversations each, written on the
   primary, read once the replica has caught up; p50 / p99 and pages/s of one connection.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchkit import create_database

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = {"REDIS_CLUSTER": "1", "REDIS_URL": "redis://127.0.0.1:7000/0"}
RUN = re.compile(
    r"(\w+)\s+fan-out\s+([\d,]+) recipients/s.*raw store\s+([\d,]+) rows/s.*once: (\w+)"
)
REPLICA_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DJANGO_SECRET_KEY": "bench-only-not-secret",  # DEBUG off needs a key (infra/deploy.py)
    "DATABASE_URL": "mysql://missive:missive@127.0.0.1:3306/missive_scaleout",
    "DATABASE_REPLICA_URL": "mysql://missive:missive@127.0.0.1:3307/missive_scaleout",
    "REDIS_URL": "redis://127.0.0.1:6379/10",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/11",
}


def fanout(args: argparse.Namespace, path: str, extra: dict[str, str]) -> tuple[float, float, str]:
    """One bench_fanout run: (fan-out rate, raw store rate, exactly-once verdict)."""
    cmd = [sys.executable, str(ROOT / "scripts" / "bench_fanout.py"), "--backends", "sql"]
    cmd += ["--recipients", str(args.recipients), "--repeat", "1"]
    if path == "realistic":
        cmd.append("--realistic")
    out = subprocess.run(
        cmd, env={**os.environ, **extra}, check=True, capture_output=True, text=True
    ).stdout
    runs = RUN.findall(out)
    if not runs:
        raise SystemExit(f"bench_fanout printed no run line:\n{out}")
    rate, raw, once = runs[-1][1:4]
    return float(rate.replace(",", "")), float(raw.replace(",", "")), once


def alternating(args: argparse.Namespace, path: str) -> dict[str, list[tuple[float, float, str]]]:
    """``--repeat`` runs a side, one Redis and the cluster in turn, the order flipped every
    pair (AB BA AB ...): the shared machine's drift over the minutes of a run then falls on both
    sides alike (3 runs of one, then 3 of the other, gave ratios that moved by ±0.07 between
    runs; AB AB AB favoured the second of each pair while the machine was speeding up)."""
    runs: dict[str, list[tuple[float, float, str]]] = {"one": [], "cluster": []}
    sides: list[tuple[str, dict[str, str]]] = [("one", {}), ("cluster", CLUSTER)]
    for n in range(args.repeat):
        for side, extra in sides if n % 2 == 0 else sides[::-1]:
            runs[side].append(fanout(args, path, extra))
            rate = runs[side][-1][0]
            print(f"     run {n + 1}, {side:7}: {rate:>9,.0f}/s", flush=True)
    return runs


def summary(runs: list[tuple[float, float, str]]) -> tuple[float, float, str]:
    rates, raws = [r[0] for r in runs], [r[1] for r in runs]
    once = "OK" if all(r[2] == "OK" for r in runs) else "FAILED"
    return statistics.median(rates), statistics.median(raws), once


def part_fanout(args: argparse.Namespace) -> None:
    print(
        f"1. fan-out, SQL inbox, {args.recipients:,} recipients, median of {args.repeat} a side",
        flush=True,
    )
    ratios: list[str] = []
    for path in args.paths:
        print(f"   {path} path", flush=True)
        runs = alternating(args, path)
        one, one_raw, one_ok = summary(runs["one"])
        many, many_raw, many_ok = summary(runs["cluster"])
        pairs = [c[0] / o[0] for o, c in zip(runs["one"], runs["cluster"], strict=True)]
        print(f"     each pair's ratio: {' · '.join(f'{r:.2f}' for r in pairs)}", flush=True)
        for label, rate, raw, ok in (
            ("one Redis    ", one, one_raw, one_ok),
            ("Redis Cluster", many, many_raw, many_ok),
        ):
            print(f"     {label} fan-out {rate:>9,.0f}/s  raw {raw:>9,.0f}/s  exactly-once {ok}")
        print(f"     cluster / one Redis: {many / one:.2f}", flush=True)
        ratios.append(f"{path} {many / one:.2f}")
    print(f"   cluster / one Redis, side by side: {', '.join(ratios)}", flush=True)


def part_unread(args: argparse.Namespace) -> None:
    print("2. unread fast path (scripts/bench_cluster.py)", flush=True)
    cmd = [
        sys.executable,
        str(ROOT / "scripts" / "bench_cluster.py"),
        "--seconds",
        str(args.seconds),
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    print("\n".join("   " + line for line in out.splitlines()), flush=True)


def part_replica() -> None:
    print("3. conversation-list cold reads, primary vs replica", flush=True)
    os.environ.update(REPLICA_ENV)
    sys.path.insert(0, str(ROOT))
    create_database("missive_scaleout")
    import django

    django.setup()
    from django.core.management import call_command
    from django.test.utils import override_settings

    from infra import dbrouter
    from infra.redis import get_redis

    call_command("migrate", verbosity=0)
    get_redis().flushdb()
    owners = _seed()
    _wait_caught_up(dbrouter)
    for label, reads in (("primary", False), ("replica", True)):
        with override_settings(REPLICA_READS=reads):
            _time_pages(owners, rounds=1)  # warm the server's buffer pool and the connection
            p50, p99, per_s = _time_pages(owners)
        print(
            f"   {label:8} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  {per_s:8,.0f} pages/s "
            "(one connection)"
        )


def _seed() -> list[int]:
    from messaging import services
    from messaging.models import Conversation
    from storage.msgkey import next_msgkey

    owners = [5 * 10**12 + i for i in range(500)]
    if Conversation.objects.filter(owner_uid=owners[0]).count() < 40:
        for peer in range(6 * 10**12, 6 * 10**12 + 40):
            services.deliver_many(
                sender_uid=peer,
                receiver_uids=owners,
                msgkey=next_msgkey(),
                category="business",
                marker=f"scaleout:{peer}:{time.time_ns()}",
            )
    return owners


def _wait_caught_up(dbrouter: object) -> None:
    from django.db import connections

    with connections["default"].cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos")
        pos = cur.fetchone()[0]
    with connections["replica"].cursor() as cur:
        cur.execute("SELECT MASTER_GTID_WAIT(%s, 60)", [pos])
        if cur.fetchone()[0] != 0:
            raise SystemExit("the replica did not catch up within 60 s")


def _time_pages(owners: list[int], rounds: int = 4) -> tuple[float, float, float]:
    from messaging import convlist

    took: list[float] = []
    t0 = time.perf_counter()
    for _ in range(rounds):
        for owner in owners:
            t = time.perf_counter()
            convlist.mysql_page(owner, category=None, cursor=None, limit=20)
            took.append((time.perf_counter() - t) * 1000)
    took.sort()
    return took[len(took) // 2], took[int(len(took) * 0.99)], len(took) / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--skip", default="", help="parts to skip, e.g. fanout,unread")
    parser.add_argument(
        "--paths",
        default="cheapest,realistic",
        help="bench_fanout's paths the fan-out part runs, side by side",
    )
    parser.add_argument(
        "--realistic",
        action="store_true",
        help="the realistic path alone (as --paths realistic)",
    )
    args = parser.parse_args()
    args.paths = ["realistic"] if args.realistic else args.paths.split(",")
    if not set(args.paths) <= {"cheapest", "realistic"}:
        raise SystemExit(f"--paths: cheapest and/or realistic, not {','.join(args.paths)}")
    print(
        f"bench_scaleout {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.cpu_count()} cores"
    )
    if "fanout" not in args.skip:
        part_fanout(args)
    if "unread" not in args.skip:
        part_unread(args)
    if "replica" not in args.skip:
        part_replica()


if __name__ == "__main__":
    main()
