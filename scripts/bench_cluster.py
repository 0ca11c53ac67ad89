"""One Redis vs a Redis Cluster, side by side in one run: the unread fast path under load, and a
bulk batch's Redis work.

    python scripts/bench_cluster.py [--seconds 15] [--connections 32] [--workers <cores>]

Needs ``scripts/services up`` (MariaDB, Redis :6379, the Redis Cluster :7000-7005). Each mode runs
in its own process (settings are read once per process): ``--mode single`` with every data key on
``--single-url`` (default Redis database 12), ``--mode cluster`` with REDIS_CLUSTER=1 on
``--cluster-url`` (any node; the whole cluster is flushed); the Celery broker stays on database 13
in both. Each mode seeds what ``scripts/bench_unread.py`` seeds (10,000 users with counters, an
announcement, an ``inbox`` client), serves ``config.asgi`` with gunicorn + uvicorn workers and
drives ``GET /api/v1/users/{uid}/unread`` with wrk (the functions of bench_unread.py), then times
a 1,000-recipient batch's Redis steps (unread increments with their exactly-once markers, the
recipients' cache generations) in the benchmark process. Prints both modes and cluster / single.
Goal: the cluster within 20% of the single Redis's requests/s.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BATCH = 1000
BATCH_ROUNDS = 20


def phase(args: argparse.Namespace) -> dict[str, float]:
    """One mode, in this process: the environment is set before Django is imported."""
    cluster = args.mode == "cluster"
    mine = {
        "REDIS_URL": args.cluster_url if cluster else args.single_url,
        "REDIS_CLUSTER": "1" if cluster else "0",
    }
    os.environ.update(mine)
    sys.path.insert(0, str(ROOT / "scripts"))
    import bench_unread

    bench_unread.ENV.update(mine)  # its gunicorn gets these, not its own defaults
    os.environ.update(mine)
    wrk = bench_unread.ensure_wrk()
    token = bench_unread.prepare()
    port = bench_unread.free_port()
    log = Path(tempfile.gettempdir()) / f"bench_cluster_{args.mode}.log"
    server = bench_unread.start_gunicorn(port, args.workers, log)
    try:
        http = bench_unread.run_wrk(wrk, port, token, args, server.pid, len(bench_unread.USERS))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    return {**http, **batch_steps()}


def batch_steps() -> dict[str, float]:
    """ms per 1,000-recipient batch: unread increments (markers included), cache generations."""
    from storage.convcache import redis_tier
    from storage.counters.store import unread_incr_many

    owners = list(range(7_000_000_001, 7_000_000_001 + BATCH))
    incr, probe = 0.0, 0.0
    for n in range(BATCH_ROUNDS):
        started = time.perf_counter()
        unread_incr_many(owner_uids=owners, peer_uid=99, category="business", marker=f"bench{n}")
        incr += time.perf_counter() - started
        started = time.perf_counter()
        redis_tier.probe_many([(o, 99) for o in owners], track_bursts=False)
        probe += time.perf_counter() - started
    return {"incr_ms": incr / BATCH_ROUNDS * 1000, "probe_ms": probe / BATCH_ROUNDS * 1000}


def run_mode(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--mode", mode, *sys.argv[1:]]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{mode} run failed:\n{out.stdout}\n{out.stderr}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def report(single: dict[str, Any], cluster: dict[str, Any], args: argparse.Namespace) -> None:
    print(
        f"\nGET /api/v1/users/{{uid}}/unread on gunicorn ({args.workers} uvicorn workers, "
        f"config.asgi), {args.connections} connections, {args.seconds} s, "
        f"{os.cpu_count()} cores, load generator on the same machine"
    )
    rows = [
        ("requests/s", "rps", ",.0f"),
        ("p50 ms", "p50", ".2f"),
        ("p99 ms", "p99", ".2f"),
        ("errors", "errors", ".0f"),
        ("server CPU µs/request", "cpu_us", ".0f"),
        (f"batch of {BATCH}: unread incr ms", "incr_ms", ".1f"),
        (f"batch of {BATCH}: generations ms", "probe_ms", ".1f"),
    ]
    print(f"{'':34} {'one Redis':>11} {'cluster':>11} {'cluster/one':>12}")
    for label, key, fmt in rows:
        a, b = single[key], cluster[key]
        ratio = f"{b / a:11.2f}x" if a else ""
        print(f"{label:34} {format(a, fmt):>11} {format(b, fmt):>11} {ratio:>12}")
    print("goal: cluster requests/s within 20% of one Redis's (ratio >= 0.80)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="gunicorn workers")
    parser.add_argument("--single-url", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--cluster-url", default="redis://127.0.0.1:7000/0")
    parser.add_argument("--mode", choices=["single", "cluster"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(phase(args)))
        return
    single = run_mode("single", args)
    cluster = run_mode("cluster", args)
    report(single, cluster, args)


if __name__ == "__main__":
    main()
