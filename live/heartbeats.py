"""Presence heartbeats of one gateway process: every ``LIVE_HEARTBEAT_S`` one task refreshes every
device connected to this process in one pipelined round trip (``services.connections_touch``),
instead of a timer and a Redis call per connection (10,000 connections: one call every 20 s, not
500 a second). Started on the first connection, on the event loop that serves it.

A round Redis did not answer is tried again after ``RETRY_S``, and the first one that gets
through makes every connection of the process catch up from its log (``hub.catch_up_all``): while
Redis was out a device's presence may have lapsed (three missed heartbeats), and an event sent
in that gap is logged but pushed to nobody. Found with Redis frozen 6 s and 1-s heartbeats: a
device connected throughout never received the first message sent after the thaw.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

import redis
from asgiref.sync import sync_to_async
from django.conf import settings

from live import services
from live.gateway import hub

log = logging.getLogger(__name__)
RETRY_S = 1.0


class Heartbeats:
    def __init__(self) -> None:
        self.connected: Counter[tuple[int, str]] = Counter()  # (uid, device) -> connections
        self.task: asyncio.Task[None] | None = None

    def add(self, uid: int, device_id: str) -> None:
        self.connected[(uid, device_id)] += 1
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    def discard(self, uid: int, device_id: str) -> None:
        self.connected[(uid, device_id)] -= 1
        if self.connected[(uid, device_id)] <= 0:
            del self.connected[(uid, device_id)]

    async def _run(self) -> None:
        touch = sync_to_async(services.connections_touch, thread_sensitive=False)
        delay, failed = float(settings.LIVE_HEARTBEAT_S), False
        while True:
            await asyncio.sleep(delay)
            try:
                await touch(list(self.connected))
            except redis.RedisError as exc:
                log.warning("live: heartbeats of %d devices failed: %r", len(self.connected), exc)
                delay, failed = min(RETRY_S, settings.LIVE_HEARTBEAT_S), True
                continue
            delay = float(settings.LIVE_HEARTBEAT_S)
            if failed:  # presence may have lapsed meanwhile: events logged, not pushed
                failed = False
                hub.catch_up_all()


heartbeats = Heartbeats()
