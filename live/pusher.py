"""Channel-layer sends from synchronous code (API views, Celery tasks).

``group_send_many([(group, message), ...])`` sends every message concurrently and waits for them
(a few ms). The sends run on one event-loop thread per process, started on first use (after a
fork, a new one), with its own channel-layer instance: redis-py's asyncio connections belong to
the loop that opened them, so the gateway's own loop and this one never share a pool, and a
worker does not open a new loop (and new connections) per push, as ``async_to_sync`` would.
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
_lock = threading.Lock()
_state: dict[str, Any] = {}  # pid, loop, layer of this process


def group_send_many(messages: Sequence[tuple[str, dict[str, Any]]]) -> None:
    if not messages:
        return
    loop, layer = _loop_and_layer()
    future = asyncio.run_coroutine_threadsafe(_send(layer, messages), loop)
    future.result(timeout=SEND_TIMEOUT_S)


async def _send(layer: BaseChannelLayer, messages: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Each message names its group: a gateway process receives it once for all its connections
    of that group (``live.gateway``) and hands it to them."""
    sent = [layer.group_send(group, {**message, "group": group}) for group, message in messages]
    for failure in await asyncio.gather(*sent, return_exceptions=True):
        if isinstance(failure, BaseException):
            log.warning("live: a push failed: %r", failure)


def _loop_and_layer() -> tuple[asyncio.AbstractEventLoop, BaseChannelLayer]:
    with _lock:
        if _state.get("pid") != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="live-pusher", daemon=True).start()
            layer = channel_layers.make_backend(settings.LIVE_CHANNEL_LAYER)
            _state.update(pid=os.getpid(), loop=loop, layer=layer)
        return _state["loop"], _state["layer"]
