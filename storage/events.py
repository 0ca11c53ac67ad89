"""Delivery events for push / long-connection gateways: Redis streams, sharded by receiver.

Stream ``delivery:{s<n>}`` (n = receiver mod SHARDS), entries ``{uids, peer, msgkey}``: one
message from ``peer`` to every receiver in ``uids`` (decimal uids, comma-separated, all of that
shard): one receiver for a 1:1 send, a bulk batch's share of the shard for a campaign. Capped
approximately at MAXLEN entries each, so no stream becomes a big key and gateways read shards in
parallel (one consumer group per gateway fleet); ``read_deliveries`` parses entries for them.

One entry per shard per batch, not per receiver: a 4,000-recipient batch appends 16 entries
instead of 4,000 (Redis server time 4.5 → 0.3 ms per batch, measured with
scripts/bench_fanout.py's batch; the streams hold a batch in ~30 KB instead of ~400 KB).
Delivery events are at least once (a redelivered batch publishes again): gateways drop a
(uid, msgkey) they already pushed.

Group messages are one event each, whatever the group's size (read diffusion): stream
``gdelivery:{s<n>}`` (n = ``group_shard(gid)``, a hash of the gid), entries ``{gid, seq, msgkey,
sender}``; gateways map the gid to their own connections.

Trimming and lost events. Streams are trimmed by ``lua/events_add.lua`` in the XADD's own call:
once a stream is TRIM_STEP entries past MAXLEN it is trimmed like ``MAXLEN ~`` (whole nodes), and
at that moment, per consumer group, the trimmed entries the group had not read (its XINFO ``lag``
before the trim minus the entries left, at most the entries trimmed) are added to the hash
``<stream>:trimmed`` (field: the group): exact for any group whose lag Redis can tell, one XLEN per
XADD and one XINFO GROUPS per trim (every ~TRIM_STEP entries). The script then re-anchors such a
group's entries-read, as Redis 7.0 would count the lost entries in its lag for ever.
``stream_metrics`` (read at /metrics, registered by messaging's AppConfig.ready) reports, for every
consumer group found on these streams (none: no series): ``event_stream_lag{stream, group}``
(XINFO ``lag``: entries not yet delivered to the group) and
``event_stream_trimmed_unread_total{stream, group}`` (the hash above).
"""

from __future__ import annotations

import logging
import zlib
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from redis.exceptions import ResponseError

from infra import metrics
from infra.logs import warn_sparsely
from infra.redis import get_redis
from infra.sqlvalues import int_list
from infra.store_errors import store_unavailable
from infra.taskref import TaskRef
from storage import lua

log = logging.getLogger(__name__)

SHARDS = 16
MAXLEN = 200_000
TRIM_STEP = 100  # Redis's stream-node-max-entries: what one ``MAXLEN ~`` trim takes at least
LATER_S = 2.0  # a cluster master's replica takes over in ~cluster-node-timeout (2 s here)
LATER_MAX_S = 30.0  # the cap of the backoff of a publish left for later (``publish_later``)


def stream_key(shard: int) -> str:
    return f"delivery:{{s{shard}}}"


def group_stream_key(shard: int) -> str:
    return f"gdelivery:{{s{shard}}}"


def publish_group_into(pipe: Any, *, gid: int, seq: int, msgkey: int, sender: int) -> int:
    """Queue one group message's event on ``pipe`` (one script call: its XADD, one slot);
    returns 1, the calls queued (``unpublished``)."""
    fields = {"gid": gid, "seq": seq, "msgkey": msgkey, "sender": sender}
    _add(pipe, group_stream_key(group_shard(gid)), fields)
    return 1


def group_shard(gid: int) -> int:
    """The shard of group ``gid``'s events: a hash of it. A gid is a msgkey (a snowflake) whose
    low 12 bits count messages within one millisecond, so they are 0 for nearly every group
    made at most once a millisecond per process: ``gid % SHARDS`` put 300 of 300 groups made
    1.5 ms apart into shard 0; CRC-32 spreads the same 300 over the 16 (16-21 each)."""
    return zlib.crc32(gid.to_bytes(8, "big")) % SHARDS


def publish_group(*, gid: int, seq: int, msgkey: int, sender: int) -> None:
    pipe = get_redis().pipeline(transaction=False)
    publish_group_into(pipe, gid=gid, seq=seq, msgkey=msgkey, sender=sender)
    pipe.execute()


def _add(pipe: Any, key: str, fields: dict[str, Any]) -> None:
    """Queue one entry on ``pipe``: XADD, trimmed past MAXLEN, losses counted (module docstring)."""
    args = [MAXLEN, TRIM_STEP, *chain.from_iterable(fields.items())]
    lua.call("events_add", [key, trimmed_key(key)], args, client=pipe)


def trimmed_key(stream: str) -> str:
    """Entries trimmed unread, per group: a hash in ``stream``'s hash tag (so its slot)."""
    return f"{stream}:trimmed"


def publish_deliveries(*, receiver_uids: Sequence[int], peer_uid: int, msgkey: int) -> None:
    pipe = get_redis().pipeline(transaction=False)
    publish_into(pipe, receiver_uids=receiver_uids, peer_uid=peer_uid, msgkey=msgkey)
    pipe.execute()


def publish_into(pipe: Any, *, receiver_uids: Sequence[int], peer_uid: int, msgkey: int) -> int:
    """Queue the events on ``pipe``: one XADD per shard the receivers fall in. Returns how many
    calls were queued, the last ones on ``pipe`` (``unpublished`` tells their replies apart)."""
    by_shard: dict[int, list[int]] = defaultdict(list)
    for uid in receiver_uids:
        by_shard[uid % SHARDS].append(uid)
    for shard, uids in by_shard.items():
        fields = {"uids": int_list(uids), "peer": peer_uid, "msgkey": msgkey}
        _add(pipe, stream_key(shard), fields)
    return len(by_shard)


def unpublished(replies: Sequence[Any], events: int) -> BaseException | None:
    """A pipeline's replies (``execute(raise_on_error=False)``) whose last ``events`` are the
    XADDs ``publish_into`` queued: raises the first error of the writes before them (the
    delivery itself failed) and returns the first error of the events' own, None when every
    event was published. On a Redis Cluster the streams are sharded by uid, not by the
    receivers' slots, so a stream can sit on a master that does not answer while the
    receivers' own keys are on healthy ones: the caller decides whether the delivery waits for
    it (a campaign batch, put back) or goes on and publishes later (a 1:1 send)."""
    cut = len(replies) - events
    for reply in replies[:cut]:
        if isinstance(reply, BaseException):
            raise reply
    return next((r for r in replies[cut:] if isinstance(r, BaseException)), None)


def publish_later(exc: BaseException, task: TaskRef, args: tuple[Any, ...], *, kind: str) -> None:
    """A send is delivered (its rows, counts, head) but the Redis node holding its events did not
    answer with ``exc`` (``unpublished``): ``task`` publishes them with ``args`` once it answers,
    retrying with backoff, and the send is accepted rather than refused for a receiver whose own
    store is healthy (before, on a cluster: a 503 until that master's replica took over).
    Counted in ``missive_delivery_events_deferred_total{kind}`` (``direct`` | ``group``), with a
    WARNING at most every 10 s. Anything but an outage, or a broker that cannot take the task,
    raises ``exc``: the send fails as before and its retry (or the stalled-send sweep)
    finishes it. Events are at least once either way: gateways drop one they pushed already."""
    if not store_unavailable(exc):
        raise exc
    try:
        task.task.apply_async(args=args, countdown=LATER_S)
    except Exception as broker_exc:  # kombu's OperationalError, a socket error: no one to retry
        raise exc from broker_exc
    metrics.inc("delivery_events_deferred", kind=kind)
    warn_sparsely(
        log,
        f"events-later:{kind}",
        "the Redis node holding a delivery-event stream does not answer (%r); %s sends are "
        "accepted and their events published by a task once it answers",
        exc,
        kind,
    )


@dataclass(frozen=True)
class Delivery:
    """One delivery event as a gateway reads it: ``msgkey`` from ``peer`` to each of ``uids``."""

    entry_id: str
    uids: list[int]
    peer: int
    msgkey: int


def read_deliveries(shard: int, *, after: str = "0-0", count: int = 100) -> list[Delivery]:
    """Up to ``count`` entries of one shard's stream after ``after`` (oldest first)."""
    entries: list[Any] = get_redis().xrange(stream_key(shard), min=f"({after}", count=count)  # type: ignore[assignment]
    return [_delivery(entry_id, fields) for entry_id, fields in entries]


def _delivery(entry_id: bytes, fields: dict[bytes, bytes]) -> Delivery:
    uids = [int(u) for u in fields[b"uids"].split(b",")]
    return Delivery(entry_id.decode(), uids, int(fields[b"peer"]), int(fields[b"msgkey"]))


# -- consumer lag and lost events, read at /metrics -------------------------------------------
def all_stream_keys() -> list[str]:
    return [make(shard) for make in (stream_key, group_stream_key) for shard in range(SHARDS)]


def stream_metrics() -> Iterator[Metric]:
    """Lag and trimmed-unread entries of every consumer group on the streams (module docstring)."""
    keys = all_stream_keys()
    pipe = get_redis().pipeline(transaction=False)
    for key in keys:
        pipe.xinfo_groups(key)
    for key in keys:
        pipe.hgetall(trimmed_key(key))
    replies = pipe.execute(raise_on_error=False)  # a stream not written yet: "no such key"
    lag = GaugeMetricFamily(
        metrics.PREFIX + "event_stream_lag",
        "Delivery-stream entries not yet delivered to the consumer group.",
        labels=["stream", "group"],
    )
    lost = CounterMetricFamily(
        metrics.PREFIX + "event_stream_trimmed_unread",
        "Delivery-stream entries trimmed before the consumer group read them.",
        labels=["stream", "group"],
    )
    for key, groups, trimmed in zip(keys, replies, replies[len(keys) :], strict=False):
        _add_lags(lag, key, groups)
        _add_trimmed(lost, key, trimmed)
    yield from (lag, lost)


def _add_lags(family: GaugeMetricFamily, key: str, groups: Any) -> None:
    if isinstance(groups, ResponseError):
        return
    for group in groups:
        if group.get("lag") is not None:  # None: Redis cannot tell
            family.add_metric([key, _text(group["name"])], float(group["lag"]))


def _add_trimmed(family: CounterMetricFamily, key: str, trimmed: Any) -> None:
    if isinstance(trimmed, dict):
        for group, count in trimmed.items():
            family.add_metric([key, _text(group)], float(count))


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
