"""Delivery events for push / long-connection gateways: Redis streams, sharded by receiver.

Stream ``delivery:{s<n>}`` (n = receiver mod SHARDS), entries ``{uid, peer, msgkey}``, capped
approximately at MAXLEN entries each, so no stream becomes a big key and gateways read shards in
parallel (one consumer group per gateway fleet).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from config.redis import get_redis

SHARDS = 16
MAXLEN = 200_000


def stream_key(shard: int) -> str:
    return f"delivery:{{s{shard}}}"


def publish_deliveries(*, receiver_uids: Sequence[int], peer_uid: int, msgkey: int) -> None:
    pipe = get_redis().pipeline(transaction=False)
    publish_into(pipe, receiver_uids=receiver_uids, peer_uid=peer_uid, msgkey=msgkey)
    pipe.execute()


def publish_into(pipe: Any, *, receiver_uids: Sequence[int], peer_uid: int, msgkey: int) -> None:
    for uid in receiver_uids:
        fields = {"uid": uid, "peer": peer_uid, "msgkey": msgkey}
        pipe.xadd(stream_key(uid % SHARDS), fields, maxlen=MAXLEN, approximate=True)
