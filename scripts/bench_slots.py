"""Where a Redis Cluster's time goes in a bulk batch's per-slot calls, side by side in one run.

    python scripts/bench_slots.py [--batches 10] [--batch-size 4000]

Needs ``scripts/services up`` (Redis :6379 and the Redis Cluster :7000-7005; both are flushed:
database 12 of the one Redis, the whole cluster). A batch's three per-slot calls, the product's
own functions in this process: the unread increments with their exactly-once markers
(``storage.counters.store.unread_incr_many``), the recipients' conversation-cache probe
(``storage.convcache.redis_tier.probe_bulk``) and "recently online" (``live.services``), for
``--batches`` batches of brand-new recipients (nobody has a count, a cached list or a device:
the cheapest path). Rows:

- one Redis: the batches as the planner cuts them on a cluster (``wave``);
- the cluster, ``few``: each batch's recipients in 3 slots (the floor of a slot plan);
- the cluster, ``wave``: a wave of 16 batches' recipients sorted by slot and cut in batches (what
  the Celery planner does, ``bulk.fanout._batches_by_slot``);
- the cluster, ``uid``: each batch in uid order (no slot plan).

Per row: slots a batch touches, wall time a batch (one caller), this process's CPU per recipient,
the Redis servers' CPU per recipient (INFO cpu: primaries and replicas), and their command time
per recipient (INFO commandstats, reset before each row): all of it, and the scripts' own share
(EVALSHA minus the commands the scripts ran). Each mode runs in its own process (settings are
read once per process).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchkit import redis_cpu_s

ROOT = Path(__file__).resolve().parent.parent
SINGLE = "redis://127.0.0.1:6379/12"
CLUSTER_PORTS = (7000, 7001, 7002, 7003, 7004, 7005)
WAVE = 16  # batches the Celery planner sorts by slot at once on a cluster (32 open, half a share)


def layouts(kind: str, batches: int, size: int, first: int) -> list[list[int]]:
    """``batches`` batches of fresh uids from ``first`` on, cut the way ``kind`` names."""
    from infra.redis import user_slot

    out: list[list[int]] = []
    start = first
    while len(out) < batches:
        if kind == "few":
            chosen: set[int] = set()
            uids: list[int] = []
            while len(uids) < size:
                slot = user_slot(start)
                if len(chosen) < 3:
                    chosen.add(slot)
                if slot in chosen:
                    uids.append(start)
                start += 1
            out.append(uids)
        elif kind == "uid":
            out.append(list(range(start, start + size)))
            start += size
        else:  # a wave, sorted by slot, cut in batches
            wave = sorted(range(start, start + WAVE * size), key=lambda u: (user_slot(u), u))
            out += [wave[i : i + size] for i in range(0, len(wave), size)]
            start += WAVE * size
    return out[:batches]


def phase(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One mode, in this process: the environment is set before Django is imported."""
    cluster = args.mode == "cluster"
    os.environ.update(
        {
            "REDIS_URL": "redis://127.0.0.1:7000/0" if cluster else SINGLE,
            "REDIS_CLUSTER": "1" if cluster else "0",
            "DJANGO_SETTINGS_MODULE": "config.settings",
        }
    )
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-not-secret")  # DEBUG off needs one
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import redis

    from infra.redis import get_redis, user_slot, warm

    warm()
    ports = CLUSTER_PORTS if cluster else (6379,)
    servers = {port: redis.Redis(port=port, db=0 if cluster else 12) for port in ports}
    if cluster:
        get_redis().flushall(target_nodes="primaries")
    else:
        servers[6379].flushdb()
    rows = []
    for kind in ("few", "wave", "uid") if cluster else ("wave",):
        first = random.randrange(10**12, 2 * 10**12)
        batches = layouts(kind, args.batches, args.batch_size, first)
        slots = sum(len({user_slot(u) for u in b}) for b in batches) / len(batches)
        rows.append({"mode": args.mode, "kind": kind, "slots": slots, **run(batches, servers)})
    return rows


def run(batches: list[list[int]], servers: dict[int, Any]) -> dict[str, float]:
    from live.services import recently_online
    from storage.convcache.redis_tier import probe_bulk
    from storage.counters.store import unread_incr_many

    for server in servers.values():
        server.config_resetstat()
    cpu0 = {port: redis_cpu_s(server) for port, server in servers.items()}
    wall0, own0 = time.perf_counter(), time.process_time()
    for n, batch in enumerate(batches):
        marker = f"bench_slots:{batch[0]}:{n}"
        unread_incr_many(owner_uids=batch, peer_uid=7, category="business", marker=marker)
        probe_bulk(batch)
        recently_online(batch)
    wall, own = time.perf_counter() - wall0, time.process_time() - own0
    owners = sum(len(b) for b in batches)
    result = {"wall_ms": 1000 * wall / len(batches), "client_us": 1e6 * own / owners}
    for role in ("master", "slave"):
        ports = [p for p, s in servers.items() if s.info("replication")["role"] == role]
        cpu = sum(redis_cpu_s(servers[p]) - cpu0[p] for p in ports)
        total, lua = _command_time([servers[p] for p in ports], clustered=len(servers) > 1)
        result[f"{role}_cpu_us"] = 1e6 * cpu / owners
        result[f"{role}_cmd_us"] = 1e6 * total / owners
        result[f"{role}_lua_us"] = 1e6 * lua / owners
    return result


def _command_time(servers: list[Any], *, clustered: bool) -> tuple[float, float]:
    """Seconds of data-command time on ``servers``, and the scripts' own part: EVALSHA's time
    less that of the commands run from inside the scripts. Every other data command here runs
    inside a script, but for the one MGET a batch of "recently online" sends on one Redis (on a
    cluster it is one MGET per slot, in a script) and the cluster's one GET a batch of the HBase
    index marker (a few µs in all)."""
    admin = {"config|resetstat", "info", "hello", "ping", "replconf", "cluster|slots", "select"}
    total = lua = 0.0
    for server in servers:
        stats = server.info("commandstats")
        seconds = {name[len("cmdstat_") :]: s["usec"] / 1e6 for name, s in stats.items()}
        data = {k: v for k, v in seconds.items() if k not in admin}
        if "exec" in data:  # a replica: each script's writes arrive as one MULTI/EXEC, and
            total += data["exec"] + data.get("multi", 0.0)  # EXEC's time holds its commands'
            continue
        total += sum(data.values())
        outside = {"evalsha", "script|load"} | (set() if clustered else {"mget"})
        lua += data.get("evalsha", 0.0) - sum(v for k, v in data.items() if k not in outside)
    return total, lua


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=4000)
    parser.add_argument("--mode", choices=["single", "cluster"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(phase(args)))
        return
    print(
        f"bench_slots {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} "
        f"cores: {args.batches} batches of {args.batch_size:,} new recipients, the three "
        "per-slot calls (unread with markers, cache probe, recently online), µs per recipient"
    )
    rows: list[dict[str, Any]] = []
    for mode in ("single", "cluster"):
        cmd = [sys.executable, __file__, "--mode", mode, "--batches", str(args.batches)]
        cmd += ["--batch-size", str(args.batch_size)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows += json.loads(out.splitlines()[-1])
    head = "                       slots  ms/batch  client  Redis CPU: primaries replicas"
    print(head + "  command time (scripts' own): primaries  replicas")
    for r in rows:
        label = "one Redis" if r["mode"] == "single" else "cluster"
        print(
            f"{label:9} {r['kind']:5} {r['slots']:12,.0f} {r['wall_ms']:9.1f} "
            f"{r['client_us']:7.2f} {r['master_cpu_us']:20.2f} {r['slave_cpu_us']:8.2f} "
            f"{r['master_cmd_us']:20.2f} ({r['master_lua_us']:.2f}) "
            f"{r['slave_cmd_us']:9.2f}"
        )


if __name__ == "__main__":
    main()
