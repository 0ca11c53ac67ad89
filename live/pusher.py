"""Channel-layer sends from synchronous code (API views, Celery tasks).

``group_send_many([(group, message), ...])`` hands each message to every gateway process whose
channel is in its group, as ONE channel-layer message per process for the whole call
(``{"type": "live.batch", "items": [...]}``, ``live.protocol``; ``live.gateway`` hands
each item to its connections of that group). The groups' members are read in one pipelined
round trip per layer host; the sends go ``SENDS_AT_ONCE`` at a time, a failed one logged. A
connection the layer's pool holds that a Redis restart closed is retried by redis-py itself, once
(``CHANNEL_LAYERS`` ``retry``, config/settings.py), not here.

Why not Channels' ``group_send`` per user: that is four Redis round trips per group on the
sending side and one receive (three or four round trips) per push on the gateway's; a campaign
batch with 200 connected recipients on one gateway was 200 of each. The gateway then delivered
560-670 frames/s while sharing the machine with the workers, and a 100,000-recipient campaign
with 5,000 connected recipients saw p99 3.6 s from a batch's commit to its frames
(scripts/bench_live.py --campaign, BENCHMARKS.md); with one message per process per batch, see
BENCHMARKS.md for after. The members are read the way ``channels_redis`` reads them in its own
``group_send`` (its group key, ``group_expiry``), so groups stay Channels' own: joined and left by
the gateway (``live.gateway.hub``) with ``group_add`` / ``group_discard``.

Gray failures: the wait for the layer is bounded by the ``redis`` read timeout and goes through
the layer's own circuit breaker (``LAYER``): a layer that does not answer costs one call that
timeout, then nothing while the breaker is open (the pushes are lost, logged by the caller; the
gateways' own receive fails too, and each of their connections catches up from its log).

The sends run on one event-loop thread per process, started on first use (after a fork, a new
one), with its own channel-layer instance: redis-py's asyncio connections belong to the loop that
opened them, so the gateway's own loop and this one never share a pool, and a worker does not
open a new loop (and new connections) per push, as ``async_to_sync`` would.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, cast

from channels.layers import BaseChannelLayer, channel_layers
from channels_redis.core import RedisChannelLayer
from django.conf import settings

from infra import breakers, timeouts
from live.protocol import BATCH

log = logging.getLogger(__name__)
# The channel layer's circuit breaker (infra/breakers.py; it opens at the first no-answer: a push
# is best effort, the log is the truth). With the layer's Redis cut off alone (on a Redis Cluster
# deployment it is the broker's), every API call that pushed to an online device waited 5 s for
# the push, one after another (tests/api/test_freeze_sweep.py, the broker black-holed): a send,
# a read mark, a recall, a delete for me, a group send. Now the first waits the API's 1 s.
LAYER = "live-layer"
# Sends in flight per process: the layer's connection pool (100) refuses more rather than
# waiting (MaxConnectionsError, the pushes lost).
SENDS_AT_ONCE = 50
_lock = threading.Lock()
_state: dict[str, Any] = {}  # pid, loop, layer of this process


def group_send_many(messages: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Raises what the layer raised, or TimeoutError, when the pushes were not all handed over
    within the ``redis`` read timeout of this process (1 s in an API process); while the
    layer's breaker is open, at once (``LAYER``)."""
    if messages:
        breakers.guarded(LAYER, _send_and_wait, messages)


def _send_and_wait(messages: Sequence[tuple[str, dict[str, Any]]]) -> None:
    loop, layer = _loop_and_layer()
    future = asyncio.run_coroutine_threadsafe(_send(layer, messages, _state["slots"]), loop)
    try:
        future.result(timeout=timeouts.read_s("redis"))
    except TimeoutError:
        future.cancel()  # its slot and connection back, not held until the layer answers
        raise


async def _send(
    layer: RedisChannelLayer,
    messages: Sequence[tuple[str, dict[str, Any]]],
    slots: asyncio.Semaphore,
) -> None:
    groups = list(dict.fromkeys(group for group, _ in messages))
    members = await _members(layer, groups)
    failed = await _send_all(layer, _batches(messages, members), slots)
    for (_, batch), failure in failed:
        log.warning("live: %d pushes failed: %r", len(batch["items"]), failure)


async def _members(layer: RedisChannelLayer, groups: Sequence[str]) -> dict[str, list[str]]:
    """Each group's channels (gateway processes), as ``channels_redis`` keeps them: one
    pipelined read per layer host, members added within ``group_expiry``."""
    by_host: dict[int, list[str]] = defaultdict(list)
    for group in groups:
        by_host[layer.consistent_hash(group)].append(group)
    oldest = int(time.time()) - int(layer.group_expiry)
    found: dict[str, list[str]] = {}
    for index, host_groups in by_host.items():
        pipe = layer.connection(index).pipeline(transaction=False)
        for group in host_groups:
            pipe.zrangebyscore(layer._group_key(group), oldest, "+inf")
        replies = await pipe.execute()
        for group, names in zip(host_groups, replies, strict=True):
            found[group] = [name.decode() for name in names]
    return found


def _batches(
    messages: Iterable[tuple[str, dict[str, Any]]], members: dict[str, list[str]]
) -> list[tuple[str, dict[str, Any]]]:
    """One ``live.batch`` message per channel, its items in the order given."""
    items: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for group, message in messages:
        for channel in members.get(group, ()):
            items[channel].append({**message, "group": group})
    return [(channel, {"type": BATCH, "items": found}) for channel, found in items.items()]


async def _send_all(
    layer: BaseChannelLayer,
    batches: Sequence[tuple[str, dict[str, Any]]],
    slots: asyncio.Semaphore,
) -> list[tuple[tuple[str, dict[str, Any]], BaseException]]:
    """Send every batch to its channel, ``SENDS_AT_ONCE`` at a time; the failed, with why."""

    async def one(channel: str, message: dict[str, Any]) -> None:
        async with slots:
            await layer.send(channel, message)

    done = await asyncio.gather(*(one(c, m) for c, m in batches), return_exceptions=True)
    pairs = zip(batches, done, strict=True)
    return [(pair, result) for pair, result in pairs if isinstance(result, BaseException)]


def _loop_and_layer() -> tuple[asyncio.AbstractEventLoop, RedisChannelLayer]:
    with _lock:
        if _state.get("pid") != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="live-pusher", daemon=True).start()
            layer = cast(
                RedisChannelLayer, channel_layers.make_backend(settings.LIVE_CHANNEL_LAYER)
            )
            slots = asyncio.Semaphore(SENDS_AT_ONCE)
            _state.update(pid=os.getpid(), loop=loop, layer=layer, slots=slots)
        return _state["loop"], _state["layer"]
