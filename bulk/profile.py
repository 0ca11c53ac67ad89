"""Per-stage profile of a campaign's batches (issue 13: where a batch's time goes).

``bulk.fanout.batch_run`` times each stage of a batch with ``infra.stages`` laps; every batch a
run completes adds them to the ``bulk_batch_stage_seconds`` histogram of ``/metrics``; with
BULK_PROFILE on, every batch a run completes adds its laps to one Redis hash per campaign
(``bulk.keys.batch_profile``: stage -> microseconds, plus ``_batches`` and ``_recipients``), one
pipelined HINCRBY per stage. ``read`` gives the table ``scripts/bench_fanout.py --profile`` prints:
ms per batch per stage and its share of the batch.

Stages, in the order a batch meets them (the laps tile the batch, so the shares add up to 100%):
load (the batch and its campaign), tokens (the channel's bucket), lease, blocks, quota admission
(policy, caps and budget in one Lua call, the sender's category), inbox write, conversation upsert
(with the commit of both), conversation-list cache, unread and events (queued on one pipeline),
unread + events round trip, ledger (completion and the finish check).
"""

from __future__ import annotations

from dataclasses import dataclass

from bulk import keys
from infra import metrics
from infra.redis import get_redis
from infra.stages import Record

COMPLETED = "ledger"  # the last lap: only a batch this run completed is profiled
BATCHES, RECIPIENTS = "_batches", "_recipients"
TTL_S = 7 * 24 * 3600
ORDER = (
    "load",
    "tokens",
    "lease",
    "blocks",
    "quota admission",
    "inbox write",
    "conversation upsert",
    "conversation-list cache",
    "unread",
    "events",
    "unread + events round trip",
    COMPLETED,
)


@dataclass(frozen=True)
class StageTime:
    stage: str
    ms_per_batch: float
    share: float  # of the whole batch, 0..1


@dataclass(frozen=True)
class Profile:
    batches: int
    recipients: int
    stages: list[StageTime]

    @property
    def ms_per_batch(self) -> float:
        return sum(s.ms_per_batch for s in self.stages)


def observe(record: Record) -> None:
    """Every completed batch's stages into the ``bulk_batch_stage_seconds`` histogram (a dict
    update per stage, flushed with the other metrics): /metrics shows where batches spend their
    time on every campaign, not only on a profiled one."""
    for stage, seconds in record.seconds.items():
        metrics.observe("bulk_batch_stage_seconds", seconds, stage=stage)


def add(campaign_id: int, record: Record, recipients: int) -> None:
    key = keys.batch_profile(campaign_id)
    pipe = get_redis().pipeline(transaction=False)
    for stage, seconds in record.seconds.items():
        pipe.hincrby(key, stage, round(seconds * 1e6))
    pipe.hincrby(key, BATCHES, 1)
    pipe.hincrby(key, RECIPIENTS, recipients)
    pipe.expire(key, TTL_S)
    pipe.execute()


def read(campaign_id: int) -> Profile:
    stored = get_redis().hgetall(keys.batch_profile(campaign_id))
    raw = {_text(k): int(v) for k, v in stored.items()}
    batches = raw.pop(BATCHES, 0)
    recipients = raw.pop(RECIPIENTS, 0)
    total = sum(raw.values()) or 1
    named = [s for s in ORDER if s in raw] + sorted(set(raw) - set(ORDER))
    per_batch = [StageTime(s, raw[s] / 1000 / max(batches, 1), raw[s] / total) for s in named]
    return Profile(batches, recipients, per_batch)


def _text(name: bytes | str) -> str:
    return name.decode() if isinstance(name, bytes) else name
