"""What a campaign batch's admission costs Redis: quotas by uid range against the layout before.

    python scripts/bench_admit.py [--site-keys 20000000] [--batches 100] [--repeats 3]

Needs ``scripts/services up`` (Redis :6379; database 13 is flushed before and after; meanwhile it
holds ``--site-keys`` other users' unread hashes, as a production Redis holds the site's keys: a
key looked up in a 20M-key keyspace misses the CPU's caches, one in a small keyspace does not).

A batch's admission (``bulk.quotas.admit_batch``, one Lua call: per-receiver caps, the daily
budget, the batch's stored outcome) for ``--batches`` batches of 4,000 receivers, the product's
default cap of 1 a period, no budget, in two layouts side by side:

- **by range** (the product's, since 7 Dec): a receiver's count lives in the sender's hash for its
  uid range (``bulk.keys.quota_bucket``: uid // 4,096); in a hash that did not exist before the
  batch a receiver is counted with one HINCRBY, in one that did its count is read first;
- **by uid % 4,096** (before): 4,096 hashes per sender and period, a batch's 4,000 receivers in
  ~4,000 of them; each receiver read (HGET), then counted (HINCRBY), each hash given its ttl
  (EXPIRE). Its script is kept below as it was (``bulk/lua/admit.lua`` at 3896ad0).

Three audiences, each a fresh sender: **dense** (consecutive uids: a batch spans one or two
ranges), **sparse** (every 50th uid: ~82 receivers a range), and **again** (the dense audience's
second campaign the same period: every receiver at its cap, nothing admitted). Per row, medians
of ``--repeats`` runs alternating the layouts: Redis's command time per receiver (``INFO
commandstats``: EVALSHA, which includes the commands the script runs), Redis's CPU per receiver
(``INFO cpu``), and the counts' memory per receiver (``MEMORY USAGE`` of every quota hash, after
the first run).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.update(
    {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_SECRET_KEY": "bench-only-not-secret",
        "REDIS_URL": "redis://127.0.0.1:6379/13",
        "DATABASE_URL": "sqlite:///:memory:",  # admit_batch reads no row: the policy is given
    }
)

import django  # noqa: E402
import redis as redis_py  # noqa: E402
from benchkit import finish_rehash, preload_site, redis_cpu_s  # noqa: E402

django.setup()

from bulk import keys, quotas  # noqa: E402
from bulk.models import Channel, SenderPolicy  # noqa: E402
from infra.redis import get_redis  # noqa: E402

BATCH = 4000
PERIOD_S = 86400
SPREAD = 4096
PREVIOUS_SCRIPT = """
local stored = redis.call('GET', KEYS[1])
if stored then return {'replay', stored} end
local cap = tonumber(ARGV[1])
local allowed, capped = {}, {}
for i = 6, #ARGV, cap > 0 and 2 or 1 do
  local key = cap > 0 and KEYS[tonumber(ARGV[i + 1])]
  if key and tonumber(redis.call('HGET', key, ARGV[i]) or '0') >= cap then
    capped[#capped + 1] = ARGV[i]
  else
    allowed[#allowed + 1] = i
  end
end
local limit = tonumber(ARGV[3])
local deferred = {}
if limit >= 0 then
  local room = limit - tonumber(redis.call('GET', KEYS[2]) or '0')
  if room <= 0 and #allowed > 0 then return {'budget', '0'} end
  while #allowed > room do
    table.insert(deferred, 1, ARGV[table.remove(allowed)])
  end
  redis.call('INCRBY', KEYS[2], #allowed)
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
if cap > 0 then
  local touched = {}
  for _, i in ipairs(allowed) do
    local key = KEYS[tonumber(ARGV[i + 1])]
    redis.call('HINCRBY', key, ARGV[i], 1)
    touched[key] = true
  end
  for key in pairs(touched) do redis.call('EXPIRE', key, ARGV[2]) end
end
local outcome = table.concat(capped, ',') .. '|' .. table.concat(deferred, ',')
redis.call('SET', KEYS[1], outcome, 'EX', ARGV[5])
return {'ok', outcome}
"""


def raw() -> redis_py.Redis:
    """A client without the product's timeouts, for the flush and the preload's long calls."""
    return redis_py.Redis.from_url(os.environ["REDIS_URL"], socket_timeout=None)


def admit_by_range(sender: int, receivers: list[int], index: int) -> int:
    """The product's admission; returns how many receivers it capped."""
    policy = SenderPolicy(sender_uid=sender, per_receiver_limit=1, daily_budget=0)
    got = quotas.admit_batch(
        sender_uid=sender,
        campaign_id=1,
        index=index,
        receivers=receivers,
        channel=Channel.DAILY,
        policy=policy,
    )
    return len(got.capped)


def admit_by_modulo(sender: int, receivers: list[int], index: int) -> int:
    """The previous layout, its keys and arguments as ``bulk.quotas`` built them."""
    period = int(time.time()) // PERIOD_S
    names: dict[int, int] = {}
    keys: list[str] = []
    args: list[object] = []
    for receiver in receivers:
        bucket = receiver % SPREAD
        if bucket not in names:
            keys.append(f"quota:{{q:{sender}}}:{period}:{bucket}")
            names[bucket] = len(keys) + 2
        args += [receiver, names[bucket]]
    head = [f"quota:{{q:{sender}}}:done:1:{index}", f"budget:{{q:{sender}}}:x", *keys]
    _, outcome = _previous()(keys=head, args=[1, 2 * PERIOD_S, -1, 2 * 86400, 7 * 86400, *args])
    capped = bytes(outcome).split(b"|")[0]
    return capped.count(b",") + 1 if capped else 0


@functools.cache
def _previous() -> Any:
    """The previous script, registered (EVALSHA, as the product calls its own)."""
    return get_redis().register_script(PREVIOUS_SCRIPT)


LAYOUTS: dict[str, Callable[[int, list[int], int], int]] = {
    "by range": admit_by_range,
    "by uid % 4,096": admit_by_modulo,
}


def audience(kind: str, batch: int) -> list[int]:
    stride = 50 if kind == "sparse" else 1
    first = 1_000_000_000 + batch * BATCH * stride
    return list(range(first, first + BATCH * stride, stride))


def run(layout: str, kind: str, sender: int, batches: int) -> dict[str, float]:
    """One campaign's admissions; ``again``: the sender's second, every receiver capped."""
    redis = get_redis()
    admit = LAYOUTS[layout]
    if kind == "again":
        for n in range(batches):
            admit(sender, audience("dense", n), n)
    redis.config_resetstat()
    cpu = redis_cpu_s(get_redis())
    for n in range(batches):
        capped = admit(sender, audience("sparse" if kind == "sparse" else "dense", n), n + batches)
        want = BATCH if kind == "again" else 0
        if capped != want:
            raise SystemExit(f"{layout} {kind}: batch {n} capped {capped}, not {want}")
    receivers = batches * BATCH
    stats = redis.info("commandstats")
    return {
        "command_us": stats["cmdstat_evalsha"]["usec"] / receivers,
        "cpu_us": (redis_cpu_s(get_redis()) - cpu) * 1e6 / receivers,
    }


def memory_per_receiver(layout: str, kind: str, sender: int, batches: int) -> tuple[float, int]:
    """The bytes of the sender's quota hashes (``MEMORY USAGE``) per receiver, and how many."""
    redis = get_redis()
    period = int(time.time()) // PERIOD_S
    if layout == "by range":
        receivers = [u for n in range(batches) for u in audience(kind, n)]
        buckets = sorted({keys.quota_bucket(u) for u in receivers})
        names = [keys.quota(sender, period, b) for b in buckets]
    else:
        names = [f"quota:{{q:{sender}}}:{period}:{b}" for b in range(SPREAD)]
    sizes = [int(redis.memory_usage(name) or 0) for name in names]
    return sum(sizes) / (batches * BATCH), sum(1 for size in sizes if size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site-keys", type=int, default=20_000_000)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    redis = get_redis()
    listpack = redis.config_get("hash-max-listpack-entries")["hash-max-listpack-entries"]
    print(
        f"{args.batches} batches of {BATCH:,} receivers per campaign, cap 1 a period, no budget; "
        f"Redis db 13 with {args.site_keys:,} site keys; hash-max-listpack-entries {listpack}; "
        f"medians of {args.repeats}, the layouts alternating"
    )
    raw().flushdb()
    preload_site(raw(), args.site_keys)
    print(f"  site keys: {args.site_keys:,}")
    finish_rehash(raw())
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    memory: dict[tuple[str, str], tuple[float, int]] = {}
    sender = 1
    for repeat in range(args.repeats):
        for kind in ("dense", "sparse", "again"):
            order = list(LAYOUTS) if repeat % 2 == 0 else list(reversed(LAYOUTS))
            for layout in order:
                sender += 1
                got = run(layout, kind, sender, args.batches)
                results.setdefault((layout, kind), []).append(got)
                if repeat == 0 and kind != "again":
                    memory[(layout, kind)] = memory_per_receiver(layout, kind, sender, args.batches)
                print(
                    f"  {layout:>15} {kind:>6}: {got['command_us']:5.2f} us command time, "
                    f"{got['cpu_us']:5.2f} us CPU per receiver"
                )
    print_table(results, memory)
    raw().flushdb(asynchronous=True)  # the site keys are ~2 GB of the services' Redis


def print_table(
    results: dict[tuple[str, str], list[dict[str, float]]],
    memory: dict[tuple[str, str], tuple[float, int]],
) -> None:
    def median(layout: str, kind: str, field: str) -> float:
        return statistics.median(r[field] for r in results[(layout, kind)])

    print()
    print(
        "| audience | layout | Redis command time, us/receiver | Redis CPU, us/receiver "
        "| memory, B/receiver (hashes) |"
    )
    print("| --- | --- | ---: | ---: | ---: |")
    for kind in ("dense", "sparse", "again"):
        for layout in LAYOUTS:
            mem: Any = memory.get((layout, kind))
            mem_cell = f"{mem[0]:.1f} ({mem[1]:,})" if mem else "-"
            print(
                f"| {kind} | {layout} | {median(layout, kind, 'command_us'):.2f} "
                f"| {median(layout, kind, 'cpu_us'):.2f} | {mem_cell} |"
            )
        ratio = median("by uid % 4,096", kind, "cpu_us") / median("by range", kind, "cpu_us")
        print(f"| {kind} | before / now, CPU | | {ratio:.2f} | |")


if __name__ == "__main__":
    main()
