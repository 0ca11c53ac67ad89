"""Quotas and rates: one Lua call admits a whole batch; a token bucket paces each channel.

Redis Cluster: ``admit`` stays ONE script call in ONE slot. Every key it takes belongs to the
sender, not to the receivers: the batch's outcome marker, the sender's daily budget and the
per-(sender, receiver) counts, which live in hashes per sender, period and receiver uid range
(bulk/keys.py), all tagged ``{q:<sender>}``. So checking the caps, consuming the budget and
storing the outcome stay one atomic step: never over-admitted, exactly once (a redelivered
batch reads its stored outcome back), on one Redis and on a cluster alike, with no split.
What it costs: one sender's quota data sits on one master (per receiver and period ~10 bytes
where a uid range holds up to 512 of its receivers, a listpack, and ~56 where it holds more, a
hash table: ~560 MB for 10 million consecutive uids, measured by scripts/bench_admit.py) and its
batches are admitted one after the other there (a few ms each: hundreds of batches a second,
above any channel's rate); senders spread over the masters. Were the counts keyed by receiver
instead, the step would have to be split: reserve the batch's budget in the sender's slot under
a marker, admit per receiver slot under per-slot markers, then refund what was not used under a
marker keyed by the batch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from django.db import connection
from django.db.models import Model

from bulk import keys, lua
from bulk.models import Channel, ChannelSetting, SenderPolicy
from infra.redis import get_redis

M = TypeVar("M", bound=Model)

OUTCOME_TTL_S = 7 * 24 * 3600
DEFAULT_RATES = {Channel.DAILY: 3500, Channel.PRIORITY: 30000}


@dataclass(frozen=True)
class Admission:
    budget_exhausted: bool
    capped: frozenset[int]
    deferred: tuple[int, ...] = ()  # over today's budget: they move to a new batch


def _uids(csv: bytes) -> list[int]:
    return [int(u) for u in csv.split(b",") if u]


def policy_for(sender_uid: int) -> SenderPolicy:
    return by_pk(SenderPolicy, sender_uid) or SenderPolicy(sender_uid=sender_uid)


def by_pk(model: type[M], pk: int | str) -> M | None:
    """One row by primary key through a raw cursor. Every batch reads the sender's policy and
    the channel's setting (and its kind: messaging.selectors.sender_category, also raw): through
    the ORM each read cost ~0.5 ms of client CPU, this ~0.2 (policy 0.54 → 0.17, setting
    0.60 → 0.20, kind 0.46 → 0.19 ms, measured). Values go
    through ``to_python`` only: for models of numbers, booleans and short strings (a JSON or
    datetime field would need the backend's converters)."""
    meta, quote = model._meta, connection.ops.quote_name
    fields = meta.concrete_fields
    columns = ", ".join(quote(str(f.column)) for f in fields)
    pk_column = quote(str(meta.pk.column if meta.pk else "id"))
    table = quote(meta.db_table)
    with connection.cursor() as cur:
        cur.execute(f"SELECT {columns} FROM {table} WHERE {pk_column} = %s", [pk])
        row = cur.fetchone()
    if row is None:
        return None
    values = [f.to_python(v) for f, v in zip(fields, row, strict=True)]
    return model.from_db(connection.alias, [f.attname for f in fields], values)


def today() -> str:
    return datetime.now(UTC).strftime("%Y%m%d")


def admit_batch(
    *,
    sender_uid: int,
    campaign_id: int,
    index: int,
    receivers: Sequence[int],
    channel: str,
    policy: SenderPolicy,
) -> Admission:
    """Check and consume caps (and, on ``daily``, the budget) for a batch in one Lua call; none
    when the sender has neither (nothing to count: every receiver is admitted)."""
    limit = policy.daily_budget if channel == Channel.DAILY and policy.daily_budget else -1
    if not policy.per_receiver_limit and limit < 0:
        return Admission(False, frozenset())
    if policy.per_receiver_limit:
        quota_keys, args = _quota_args(sender_uid, policy, receivers)
    else:  # no cap: the receivers alone (for the budget), no bucket keys to build and send
        quota_keys, args = [], list(receivers)
    all_keys = [
        keys.batch_outcome(sender_uid, campaign_id, index),
        keys.budget(sender_uid, today()),
        *quota_keys,
    ]
    head = [
        policy.per_receiver_limit,
        policy.per_receiver_period_s * 2,
        limit,
        2 * 86400,
        OUTCOME_TTL_S,
    ]
    verdict, payload = lua.call("admit", all_keys, [*head, *args])
    if verdict == b"budget":
        return Admission(True, frozenset())
    capped, _, deferred = payload.partition(b"|")
    return Admission(False, frozenset(_uids(capped)), tuple(_uids(deferred)))


def _quota_args(
    sender_uid: int, policy: SenderPolicy, receivers: Sequence[int]
) -> tuple[list[str], list[object]]:
    """The quota bucket keys of a batch, and (receiver, its bucket's Lua KEYS index) pairs."""
    period = int(time.time()) // max(policy.per_receiver_period_s, 1)
    bucket_keys: dict[int, int] = {}
    quota_keys: list[str] = []
    args: list[object] = []
    for receiver in receivers:
        bucket = keys.quota_bucket(receiver)
        if bucket not in bucket_keys:
            quota_keys.append(keys.quota(sender_uid, period, bucket))
            bucket_keys[bucket] = len(quota_keys) + 2  # Lua KEYS index (1-based, after 2 fixed)
        args += [receiver, bucket_keys[bucket]]
    return quota_keys, args


def count_capped(sender_uid: int, receivers: Sequence[int], policy: SenderPolicy) -> int:
    """How many receivers are at their cap right now (a dry run; consumes nothing)."""
    if not policy.per_receiver_limit or not receivers:
        return 0
    period = int(time.time()) // max(policy.per_receiver_period_s, 1)
    pipe = get_redis().pipeline(transaction=False)
    for receiver in receivers:
        pipe.hget(keys.quota(sender_uid, period, keys.quota_bucket(receiver)), str(receiver))
    return sum(1 for n in pipe.execute() if int(n or 0) >= policy.per_receiver_limit)


def budget_remaining(sender_uid: int) -> int | None:
    policy = policy_for(sender_uid)
    if not policy.daily_budget:
        return None
    used = int(get_redis().get(keys.budget(sender_uid, today())) or 0)
    return max(policy.daily_budget - used, 0)


def channel_setting(channel: str) -> ChannelSetting:
    found = by_pk(ChannelSetting, channel)
    return found or ChannelSetting(channel=channel, rate_per_s=DEFAULT_RATES[Channel(channel)])


FAIR_WINDOW_MS = 2000  # a campaign that asked for tokens this recently shares the channel


def take_tokens(channel: str, count: int, campaign: int) -> int:
    """Take ``count`` tokens for ``campaign`` on its channel; returns 0 or the ms to wait.

    Fair share (``lua/fair_tokens.lua``): the campaigns that asked in the last FAIR_WINDOW_MS
    each draw at most rate / n from their own bucket, and every take also comes out of the
    channel's bucket. Measured in ``make demo``: without it, a 3,000-recipient campaign launched
    while a 100,000-recipient one held 16 throttled batches got 496 of the channel's 3,500
    recipients/s (its 3 batches against 16 in the race for tokens)."""
    setting = channel_setting(channel)
    capacity = max(setting.rate_per_s, setting.batch_size, count)
    script_keys = [
        keys.token_bucket(channel),
        keys.channel_active(channel),
        keys.campaign_bucket(channel, campaign),
    ]
    now_ms = time.time_ns() // 1_000_000
    args = [setting.rate_per_s, capacity, count, now_ms, campaign, FAIR_WINDOW_MS]
    return int(lua.call("fair_tokens", script_keys, args))
