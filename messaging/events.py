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
``gdelivery:{s<n>}`` (n = gid mod SHARDS), entries ``{gid, seq, msgkey, sender}``; gateways map
the gid to their own connections.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from config.redis import get_redis
from config.sqlvalues import int_list

SHARDS = 16
MAXLEN = 200_000


def stream_key(shard: int) -> str:
    return f"delivery:{{s{shard}}}"


def group_stream_key(shard: int) -> str:
    return f"gdelivery:{{s{shard}}}"


def publish_group_into(pipe: Any, *, gid: int, seq: int, msgkey: int, sender: int) -> None:
    """Queue one group message's event on ``pipe`` (one XADD, one key)."""
    fields = {"gid": gid, "seq": seq, "msgkey": msgkey, "sender": sender}
    pipe.xadd(group_stream_key(gid % SHARDS), fields, maxlen=MAXLEN, approximate=True)


def publish_deliveries(*, receiver_uids: Sequence[int], peer_uid: int, msgkey: int) -> None:
    pipe = get_redis().pipeline(transaction=False)
    publish_into(pipe, receiver_uids=receiver_uids, peer_uid=peer_uid, msgkey=msgkey)
    pipe.execute()


def publish_into(pipe: Any, *, receiver_uids: Sequence[int], peer_uid: int, msgkey: int) -> None:
    """Queue the events on ``pipe``: one XADD per shard the receivers fall in."""
    by_shard: dict[int, list[int]] = defaultdict(list)
    for uid in receiver_uids:
        by_shard[uid % SHARDS].append(uid)
    for shard, uids in by_shard.items():
        fields = {"uids": int_list(uids), "peer": peer_uid, "msgkey": msgkey}
        pipe.xadd(stream_key(shard), fields, maxlen=MAXLEN, approximate=True)


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
