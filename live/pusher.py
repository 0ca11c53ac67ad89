"""Channel-layer sends from synchronous code (API views, Celery tasks).

``group_send_many([(group, message), ...])`` sends the messages concurrently, ``SENDS_AT_ONCE``
at a time, each failed one once more, and waits for them (a few ms; ~2,800 sends/s from one
process on the 2-core test machine, 2026-11-24). The sends run on one event-loop thread per
process, started on first use (after a fork, a new one), with its own channel-layer instance:
redis-py's asyncio connections belong to the loop that opened them, so the gateway's own loop
and this one never share a pool, and a worker does not open a new loop (and new connections)
per push, as ``async_to_sync`` would.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

from channels.layers import BaseChannelLayer, channel_layers
from django.conf import settings

log = logging.getLogger(__name__)
SEND_TIMEOUT_S = 5.0
# Group sends in flight per process: the layer's connection pool (100) refuses more rather than
# waiting, and a campaign batch with 200 connected recipients sent them all at once (MaxConnections-
# Error, the pushes lost; scripts/bench_live.py --campaign).
SENDS_AT_ONCE = 50
_lock = threading.Lock()
_state: dict[str, Any] = {}  # pid, loop, layer of this process


def group_send_many(messages: Sequence[tuple[str, dict[str, Any]]]) -> None:
    if not messages:
        return
    loop, layer = _loop_and_layer()
    future = asyncio.run_coroutine_threadsafe(_send(layer, messages, _state["slots"]), loop)
    future.result(timeout=SEND_TIMEOUT_S)


async def _send(
    layer: BaseChannelLayer,
    messages: Sequence[tuple[str, dict[str, Any]]],
    slots: asyncio.Semaphore,
) -> None:
    """Each message names its group: a gateway process receives it once for all its connections
    of that group (``live.gateway``) and hands it to them. A send that failed is sent once more:
    after a Redis restart the first use of each pooled connection fails (ConnectionError), and
    without the second try the first push of every process after the restart was lost
    (tests/live/test_restarts.py)."""
    failed = await _send_all(layer, messages, slots)
    if failed:
        failed = await _send_all(layer, [pair for pair, _ in failed], slots)
    for _, failure in failed:
        log.warning("live: a push failed: %r", failure)


async def _send_all(
    layer: BaseChannelLayer,
    messages: Sequence[tuple[str, dict[str, Any]]],
    slots: asyncio.Semaphore,
) -> list[tuple[tuple[str, dict[str, Any]], BaseException]]:
    """Send every message, ``SENDS_AT_ONCE`` at a time; the ones that failed, with why."""

    async def one(group: str, message: dict[str, Any]) -> None:
        async with slots:
            await layer.group_send(group, {**message, "group": group})

    done = await asyncio.gather(*(one(g, m) for g, m in messages), return_exceptions=True)
    pairs = zip(messages, done, strict=True)
    return [(pair, result) for pair, result in pairs if isinstance(result, BaseException)]


def _loop_and_layer() -> tuple[asyncio.AbstractEventLoop, BaseChannelLayer]:
    with _lock:
        if _state.get("pid") != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="live-pusher", daemon=True).start()
            layer = channel_layers.make_backend(settings.LIVE_CHANNEL_LAYER)
            slots = asyncio.Semaphore(SENDS_AT_ONCE)
            _state.update(pid=os.getpid(), loop=loop, layer=layer, slots=slots)
        return _state["loop"], _state["layer"]
