"""msgkey: the 64-bit snowflake that names every message.

Layout (most significant first): 1 bit zero | 41 bits milliseconds since 2020-01-01 UTC |
10 bits node id | 12 bits sequence. ``msgkey >> 22`` recovers the send time, so content is routed
and partitioned by the key alone.

Node ids are leased in Redis so that every process that can send (web workers, forked Celery
children) holds a distinct one: ``SET {msgkey:n}:lease token NX PX ttl``. The holder renews the
lease well before it expires and stops issuing keys if it cannot; a process that forks re-leases in
the child. Taking the lease and each renewal record the node's high-water millisecond, and a new
holder starts at least one lease-TTL past it, so a restarted process (or a clock that stepped
backwards) never re-issues a key.
Within a process a backwards clock is absorbed by holding the last millisecond and borrowing from
the next one when the sequence runs out: keys stay strictly increasing.
"""

from __future__ import annotations

import os
import random
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from infra.redis import clustered
from infra.store_errors import store_unavailable
from storage import lua

EPOCH_MS = 1577836800000  # 2020-01-01T00:00:00Z
_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
NODE_BITS = 10
SEQ_BITS = 12
MAX_NODE = (1 << NODE_BITS) - 1
MAX_SEQ = (1 << SEQ_BITS) - 1
TIME_SHIFT = NODE_BITS + SEQ_BITS
LEASE_TTL_MS = 30_000
RENEW_EVERY_MS = 5_000
ACQUIRE_OUTAGES = 8  # node ids passed over for a Redis node that does not answer, then 503


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def compose(ms: int, node: int, seq: int) -> int:
    return ((ms - EPOCH_MS) << TIME_SHIFT) | (node << SEQ_BITS) | seq


def timestamp_ms(msgkey: int) -> int:
    return (msgkey >> TIME_SHIFT) + EPOCH_MS


def created_at(msgkey: int) -> datetime:
    return datetime.fromtimestamp(timestamp_ms(msgkey) / 1000, tz=UTC)


def node_of(msgkey: int) -> int:
    return (msgkey >> SEQ_BITS) & MAX_NODE


def lower_bound(dt: datetime) -> int:
    """The smallest msgkey issued at or after ``dt`` (for partition bounds and time filters).

    Integer arithmetic on the datetime: ``int(dt.timestamp() * 1000)`` is off by one millisecond
    for about one instant in 200 (float rounding). A naive ``dt`` is taken as UTC.
    """
    aware = dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)
    return compose((aware - _UNIX_EPOCH) // _ONE_MS, 0, 0)


@dataclass
class _Lease:
    node: int
    token: str
    renewed_at: float  # time.monotonic()
    pid: int


class MsgkeyGenerator:
    """Thread-safe generator; one per process (see ``next_msgkey``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lease: _Lease | None = None
        self._last_ms = 0
        self._seq = 0

    def next(self) -> int:
        return self.next_many(1)[0]

    def next_many(self, count: int) -> list[int]:
        with self._lock:
            lease = self._current_lease()
            return [self._next_locked(lease.node) for _ in range(count)]

    def _next_locked(self, node: int) -> int:
        ms = now_ms()
        if ms > self._last_ms:
            self._last_ms, self._seq = ms, 0
        elif self._seq < MAX_SEQ:
            self._seq += 1  # same millisecond, or the clock went backwards: hold the last one
        else:
            self._last_ms, self._seq = self._last_ms + 1, 0  # borrow the next millisecond
        return compose(self._last_ms, node, self._seq)

    def _current_lease(self) -> _Lease:
        lease = self._lease
        if lease is None or lease.pid != os.getpid():
            return self._acquire()
        if (time.monotonic() - lease.renewed_at) * 1000 >= RENEW_EVERY_MS:
            try:
                self._renew(lease)
            except Exception as exc:  # its cluster master does not answer: lease another node id
                if not (clustered() and store_unavailable(exc)):  # (one Redis: 503 at once)
                    raise
                self._lease = None  # the old lease simply expires
        return self._lease or self._acquire()

    def _acquire(self) -> _Lease:
        """A free node id, from a random start. On a Redis Cluster, a node id whose lease key sits
        on a master that does not answer (frozen, cut off) is passed over for the next one, up to
        ACQUIRE_OUTAGES of them. Before, a process whose pick (or whose lease due a renewal) sat on
        a frozen master answered every send 503 until the cluster failed that master over (2-5 s
        here; seen in tests/api/test_cluster_freeze.py); node ids spread over every master, so
        about one process in three."""
        token = f"{os.getpid()}:{secrets.token_hex(8)}"
        start, outages = random.randrange(MAX_NODE + 1), 0
        for offset in range(MAX_NODE + 1):
            node = (start + offset) % (MAX_NODE + 1)
            # Past this generator's own last key too: one that lost its lease keeps its keys
            # strictly increasing on the new node.
            floor_ms = max(now_ms(), self._last_ms + 1)
            try:
                start_ms = lua.call("msgkey_acquire", _keys(node), [token, LEASE_TTL_MS, floor_ms])
            except Exception as exc:
                outages += 1
                if not (clustered() and store_unavailable(exc)) or outages >= ACQUIRE_OUTAGES:
                    raise
                continue
            if start_ms is not None:
                self._last_ms, self._seq = int(start_ms), 0
                self._lease = _Lease(node, token, time.monotonic(), os.getpid())
                return self._lease
        raise RuntimeError("all 1024 msgkey node ids are leased")

    def _renew(self, lease: _Lease) -> None:
        ok = lua.call("msgkey_renew", _keys(lease.node), [lease.token, LEASE_TTL_MS, self._last_ms])
        if ok:
            lease.renewed_at = time.monotonic()
        else:
            self._lease = None  # lost it (paused past the TTL): take a fresh node id

    def _after_fork_in_child(self) -> None:
        # A lock another thread held at fork time would stay locked forever in the child; the
        # child leases its own node id on first use anyway (``_Lease.pid``).
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            if self._lease and self._lease.pid == os.getpid():
                args = [self._lease.token, self._last_ms]
                lua.call("msgkey_release", _keys(self._lease.node), args)
            self._lease = None


def _keys(node: int) -> list[str]:
    return [f"{{msgkey:{node}}}:lease", f"{{msgkey:{node}}}:hwm"]


_generator = MsgkeyGenerator()
os.register_at_fork(after_in_child=_generator._after_fork_in_child)


def next_msgkey() -> int:
    return _generator.next()


def next_msgkeys(count: int) -> list[int]:
    return _generator.next_many(count)
