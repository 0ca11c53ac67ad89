"""Live delivery's reads: who is connected (presence) and a stretch of a user's event log.

``presence(uid)``: the devices whose connection is alive (a heartbeat within the presence TTL),
oldest connection first, in one round trip. ``log_between(uid, epoch, after, upto)``: the
frames at positions ``after+1 .. upto`` of the log, in order, each with its cursor; empty when
the log's epoch is no longer ``epoch`` (a gateway filling a gap after a push overtook another).
``log_head(uid)``: the log's epoch, head position and restart fields as a push names them
(``epoch``, ``pos``, ``prev``, ``floor``), None when there is no log (a gateway catching up its
connections after its channel layer failed).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from infra.redis import get_redis
from live import keys
from live.cursors import Cursor, frame


@dataclass(frozen=True)
class Device:
    device_id: str
    connected_at: datetime


@dataclass(frozen=True)
class Presence:
    online: bool
    devices: list[Device]


def presence(uid: int) -> Presence:
    now = int(time.time() * 1000)
    pipe = get_redis().pipeline(transaction=False)
    pipe.zrangebyscore(keys.devices(uid), now, "+inf")
    pipe.hgetall(keys.connected_at(uid))
    alive, opened = pipe.execute()
    devices = [_device(d, opened.get(d)) for d in alive]
    devices.sort(key=lambda d: d.connected_at)
    return Presence(bool(devices), devices)


def _device(device_id: bytes, opened_ms: bytes | None) -> Device:
    at = datetime.fromtimestamp(int(opened_ms or 0) / 1000, tz=UTC)
    return Device(device_id.decode(), at)


@dataclass(frozen=True)
class Entry:
    """One log entry as a device receives it: its position and its frame (JSON text)."""

    pos: int
    text: str


def entries_from(epoch: str, raw: Sequence[Any]) -> list[Entry]:
    """Parse XRANGE entries of the log of ``epoch`` into frames with their cursors."""
    return [_entry(epoch, entry_id, fields) for entry_id, fields in raw]


def _entry(epoch: str, entry_id: bytes, fields: Any) -> Entry:
    found = _fields(fields)
    pos = int(entry_id.split(b"-")[1])
    body = found[b"e"].decode()
    cursor = Cursor(epoch, pos, int(found[b"ms"]))
    return Entry(pos, frame(body, cursor))


def _fields(fields: Any) -> dict[bytes, bytes]:
    if isinstance(fields, dict):  # redis-py parses XRANGE replies into dicts
        return fields
    return dict(zip(fields[::2], fields[1::2], strict=True))


def log_between(uid: int, epoch: str, after: int, upto: int) -> list[Entry]:
    pipe = get_redis().pipeline(transaction=False)
    pipe.hget(keys.meta(uid), "epoch")
    pipe.xrange(keys.log(uid), f"0-{after + 1}", f"0-{upto}")
    current, raw = pipe.execute()
    if current is None or current.decode() != epoch:
        return []
    return entries_from(epoch, raw)


def log_head(uid: int) -> dict[str, str | int] | None:
    found: list[bytes | None] = get_redis().hmget(keys.meta(uid), ["epoch", "pos", "prev", "floor"])  # type: ignore[assignment]
    epoch, pos, prev, floor = found
    if epoch is None:
        return None
    return {
        "epoch": epoch.decode(),
        "pos": int(pos or 0),
        "prev": (prev or b"").decode(),
        "floor": int(floor or 0),
    }
