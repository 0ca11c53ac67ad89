"""The WebSocket gateway: ``/live/v1?token=&since=`` (docs/live.md is the protocol).

One ``LiveConsumer`` per connection, on any gateway process:
- a bad or expired token: accepted, then closed with 4001 (a close before the handshake would be
  an HTTP 403 that browsers do not report);
- it joins the user's channel-layer group BEFORE it reads the log (``services.connection_open``),
  so an event is either in what it read or in a push it will receive, and drops pushes at or
  below the last position it sent: every event once, in order;
- a push that overtakes another (two senders at once) leaves a gap: the missing positions are
  read from the log before it is sent; a push from a new epoch (Redis lost the log) sends
  ``resync`` ``lost`` first;
- frames go through a bounded outbox (``LIVE_BACKLOG`` frames) written by one task: a client
  too slow to read while its frames pile up past the bound is closed with 4008, so a slow
  consumer never grows the gateway's memory without bound;
- presence is refreshed every ``LIVE_HEARTBEAT_S`` (``live.heartbeats``: one pipelined call for
  every connection of the process) and removed on disconnect; the server
  (uvicorn) pings every connection at the WebSocket level (``ws_ping_interval``, 20 s) and drops
  one that does not answer (``ws_ping_timeout``, 20 s): a dead connection goes within a minute.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import parse_qs

import redis
from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from live import keys, selectors, services
from live.heartbeats import heartbeats

log = logging.getLogger(__name__)
T = TypeVar("T")
CLOSE_BAD_TOKEN = 4001
CLOSE_TOO_SLOW = 4008
PONG = '{"type":"pong"}'
# Channel-layer calls in flight per process: its connection pool (100) refuses more rather than
# waiting, which a burst of reconnecting devices would otherwise hit.
_layer_slots = asyncio.Semaphore(64)


def _thread(fn: Callable[..., T]) -> Callable[..., Any]:
    """``fn`` on a worker thread (its Redis calls block), off Django's one sync thread."""
    return sync_to_async(fn, thread_sensitive=False)


def _resync(reason: str) -> str:
    return json.dumps({"type": "resync", "reason": reason})


class LiveConsumer(AsyncWebsocketConsumer):
    uid: int | None = None
    device_id = ""
    epoch = ""
    last_pos = 0
    closing = False
    limit = 0

    async def connect(self) -> None:
        await self.accept()
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        bound = services.token_open(query.get("token", [""])[0])
        if bound is None:
            await self.close(code=CLOSE_BAD_TOKEN)
            return
        self.uid, self.device_id = bound
        self.outbox: asyncio.Queue[str] = asyncio.Queue()
        self.tasks: list[asyncio.Task[None]] = []
        async with _layer_slots:
            await self.channel_layer.group_add(keys.group(self.uid), self.channel_name)
        since = query.get("since", [""])[0] or None
        opened = await _thread(services.connection_open)(
            uid=self.uid, device_id=self.device_id, since=since
        )
        self._start(bound[0], opened)

    def _start(self, uid: int, opened: services.Opened) -> None:
        self.epoch, self.last_pos = opened.epoch, opened.head
        self.limit = settings.LIVE_BACKLOG + len(opened.missed)  # a replay is not a slow client
        hello = {"type": "hello", "uid": str(uid), "device_id": self.device_id}
        self._queue(json.dumps({**hello, "cursor": opened.cursor, "resumed": opened.resumed}))
        if opened.resync:
            self._queue(_resync(opened.resync))
        for entry in opened.missed:
            self._queue(entry.text)
        self.writer = asyncio.create_task(self._write())
        self.tasks.append(self.writer)
        heartbeats.add(uid, self.device_id)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            frame = json.loads(text_data or bytes_data or b"")
        except ValueError:
            return
        if isinstance(frame, dict) and frame.get("type") == "ping" and self.uid is not None:
            self._queue(PONG)

    async def live_event(self, message: dict[str, Any]) -> None:
        """A push from ``services.publish_many`` (channel-layer type ``live.event``)."""
        pos = int(message["pos"])
        if message["epoch"] != self.epoch:  # the log started afresh: what it lost is gone
            self.epoch, self.last_pos = str(message["epoch"]), pos - 1
            self._queue(_resync("lost"))
        if pos <= self.last_pos:
            return
        if pos > self.last_pos + 1:
            await self._fill(pos - 1)
        self._queue(str(message["text"]))
        self.last_pos = pos

    async def _fill(self, upto: int) -> None:
        """Send the positions a push overtook, from the log."""
        assert self.uid is not None
        missing = await _thread(selectors.log_between)(self.uid, self.epoch, self.last_pos, upto)
        if len(missing) < upto - self.last_pos:  # gone from the log meanwhile: say so
            self._queue(_resync("too_old"))
        for entry in missing:
            self._queue(entry.text)

    def _queue(self, text: str) -> None:
        if self.closing:
            return
        if self.outbox.qsize() >= self.limit:
            self.closing = True
            self.tasks.append(asyncio.create_task(self._too_slow()))
            return
        self.outbox.put_nowait(text)

    async def _too_slow(self) -> None:
        log.info("live: uid %s device %s too slow, closing", self.uid, self.device_id)
        self.writer.cancel()  # its pending frames go with the socket
        await self.close(code=CLOSE_TOO_SLOW)

    async def _write(self) -> None:
        while True:
            text = await self.outbox.get()
            await self.send(text_data=text)

    async def disconnect(self, code: int) -> None:
        if self.uid is None:
            return
        for task in self.tasks:
            task.cancel()
        heartbeats.discard(self.uid, self.device_id)
        async with _layer_slots:
            await self.channel_layer.group_discard(keys.group(self.uid), self.channel_name)
        try:
            await _thread(services.connection_close)(uid=self.uid, device_id=self.device_id)
        except redis.RedisError as exc:
            log.warning("live: presence of uid %s not removed: %r", self.uid, exc)
