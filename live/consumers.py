"""The WebSocket gateway: ``/live/v1?token=&since=`` (docs/live.md is the protocol).

One ``LiveConsumer`` per connection, on any gateway process:
- a bad or expired token: accepted, then closed with 4001 (a close before the handshake would be
  an HTTP 403 that browsers do not report);
- an opening (joining the group, reading the log) that Redis does not answer within
  ``LIVE_OPEN_TIMEOUT_S``, or that fails because Redis is out: closed with 1013 ("try again
  later"), never a connection left waiting for its ``hello``. Measured before: with Redis frozen
  (SIGSTOP), a new connection got no frame for 15 s, the channel layer's socket timeout;
- it joins the user's channel-layer group BEFORE it reads the log (``services.connection_open``),
  so an event is either in what it read or in a push it will receive, and drops pushes at or
  below the last position it sent: every event once, in order;
- a push that overtakes another (two senders at once) leaves a gap: the missing positions are
  read from the log before it is sent; a push from a new epoch (Redis lost the log) sends
  ``resync`` ``lost`` first;
- pushes and frames wait in a bounded outbox (``LIVE_BACKLOG`` items) written by a task that
  exists only while the outbox is not empty: a client too slow to read while its frames pile up
  past the bound is closed with 4008, so a slow consumer never grows the gateway's memory
  without bound;
- an idle connection holds no task of its own beside uvicorn's, which reads the socket: pushes
  come from the process's one channel-layer receiver (``live.gateway.hub``), not from a receive
  loop per connection, and Channels' per-message ``close_old_connections`` (a thread hop) is
  skipped, the gateway never opening a database connection. Blocking Redis calls run on
  ``asyncio.to_thread``, which copies no context back: ``sync_to_async`` left ~50 rehomed
  ``asgiref.local`` storages per call in the connection's context (~6 KB per connection,
  tracemalloc, 1,000 idle connections, 2026-11-24). Measured with ``scripts/bench_live.py``:
  ~44.6 KB per idle connection before these changes (permessage-deflate off), see
  BENCHMARKS.md for after;
- presence is refreshed every ``LIVE_HEARTBEAT_S`` (``live.heartbeats``: one pipelined call for
  every connection of the process) and removed on disconnect; the server
  (uvicorn) pings every connection at the WebSocket level (``ws_ping_interval``, 20 s) and drops
  one that does not answer (``ws_ping_timeout``, 20 s): a dead connection goes within a minute.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import parse_qs

import redis
from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from infra.store_errors import store_unavailable
from live import keys, selectors, services
from live.gateway import hub
from live.heartbeats import heartbeats

log = logging.getLogger(__name__)
T = TypeVar("T")
CLOSE_BAD_TOKEN = 4001
CLOSE_TOO_SLOW = 4008
CLOSE_ERROR = 1011  # Redis failed under a push: the device reconnects and resumes
CLOSE_TRY_LATER = 1013  # Redis did not open the connection in time: the device reconnects later
PONG = '{"type":"pong"}'
Item = str | dict[str, Any]  # a frame's text, or a push still to turn into frames


async def _thread(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """``fn`` on a worker thread (its Redis calls block), copying no context back."""
    return await asyncio.to_thread(fn, **kwargs)


def _resync(reason: str) -> str:
    return json.dumps({"type": "resync", "reason": reason})


class LiveConsumer(AsyncWebsocketConsumer):
    uid: int | None = None
    device_id = ""
    epoch = ""
    former = ""  # the epoch before a Redis restart the connection went through
    last_pos = 0
    started = False
    closing = False
    limit = 0
    outbox: deque[Item] | None = None
    writer: asyncio.Task[None] | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """The connection's events, read on the task uvicorn runs the application on; no channel
        of its own (the hub pushes)."""
        self.scope, self.base_send = scope, send
        try:
            while True:
                await self.dispatch(await receive())
        except StopConsumer:
            pass
        finally:
            self._leave()

    async def dispatch(self, message: dict[str, Any]) -> None:
        """As Channels' but without ``close_old_connections``: no database here."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        await self.disconnect(message["code"])
        raise StopConsumer()

    async def connect(self) -> None:
        await self.accept()
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        bound = services.token_open(query.get("token", [""])[0])
        if bound is None:
            await self.close(code=CLOSE_BAD_TOKEN)
            return
        self.uid, self.device_id = bound
        self.limit = settings.LIVE_BACKLOG
        since = query.get("since", [""])[0] or None
        try:
            opened = await asyncio.wait_for(self._open(since), settings.LIVE_OPEN_TIMEOUT_S)
        except Exception as exc:
            if not isinstance(exc, TimeoutError) and not store_unavailable(exc):
                raise
            log.warning("live: uid %s could not open, closing with 1013: %r", self.uid, exc)
            self.closing = True
            await self.close(code=CLOSE_TRY_LATER)
            return
        self._start(bound[0], opened)

    async def _open(self, since: str | None) -> services.Opened:
        """Joins the user's group, then reads the log (``connect``'s order, above)."""
        assert self.uid is not None
        await hub.join(keys.group(self.uid), self)  # pushes from here on queue until _start
        return await _thread(
            services.connection_open, uid=self.uid, device_id=self.device_id, since=since
        )

    def _start(self, uid: int, opened: services.Opened) -> None:
        self.epoch, self.last_pos = opened.epoch, opened.head
        self.limit = settings.LIVE_BACKLOG + len(opened.missed)  # a replay is not a slow client
        early, self.outbox = self.outbox, None  # pushes that came while the log was read
        hello = {"type": "hello", "uid": str(uid), "device_id": self.device_id}
        self._queue(json.dumps({**hello, "cursor": opened.cursor, "resumed": opened.resumed}))
        if opened.resync:
            self._queue(_resync(opened.resync))
        for entry in opened.missed:
            self._queue(entry.text)
        self.started = True
        for item in early or ():
            self._queue(item)
        self._wake()
        heartbeats.add(uid, self.device_id)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            frame = json.loads(text_data or bytes_data or b"")
        except ValueError:
            return
        if isinstance(frame, dict) and frame.get("type") == "ping" and self.started:
            self._queue(PONG)

    def push(self, message: dict[str, Any]) -> None:
        """A push from ``services.publish_many`` (channel-layer type ``live.event``), handed
        over by the hub: handled in order by the writer."""
        self._queue(message)

    def catch_up(self) -> None:
        """The process's channel layer failed (``live.gateway``): pushes may be lost, so the
        log says what this connection has not been sent (in order, after what is queued)."""
        self._queue({"catch_up": True})

    async def _frames(self, message: dict[str, Any]) -> list[str]:
        """What a push sends: nothing when already sent, else the positions it overtook (read
        from the log), then its own frame; ``resync`` ``lost`` first when the log started
        afresh."""
        if message.get("catch_up"):
            return await self._catch_up()
        if message["epoch"] == self.former:  # from before a restart: read from the log if kept
            return []
        frames = self._switch(message)
        pos = int(message["pos"])
        if pos <= self.last_pos:
            return frames
        if pos > self.last_pos + 1:
            frames += await self._fill(pos - 1)
        self.last_pos = pos
        return [*frames, str(message["text"])]

    def _switch(self, message: dict[str, Any]) -> list[str]:
        """A push from another epoch: the log started afresh (``resync`` ``lost``: what it lost
        is gone), unless Redis restarted and kept every position this connection was sent
        (``prev`` is ours and ``floor`` reaches ``last_pos``): then the same log goes on."""
        epoch = str(message["epoch"])
        if epoch == self.epoch:
            return []
        kept = message.get("prev") == self.epoch and self.last_pos <= int(message.get("floor", 0))
        self.former, self.epoch = self.epoch, epoch
        if kept:
            return []
        self.last_pos = int(message["pos"]) - 1
        return [_resync("lost")]

    async def _catch_up(self) -> list[str]:
        """The log's entries after ``last_pos``, or ``resync`` ``lost`` when Redis lost some this
        connection was sent (the log is gone, or its head went back)."""
        assert self.uid is not None
        head = await _thread(selectors.log_head, uid=self.uid)
        if head is None:
            self.former, self.epoch, self.last_pos = self.epoch, "", 0
            return [_resync("lost")]
        pos = int(head["pos"])
        if head["epoch"] == self.epoch and pos < self.last_pos:
            self.last_pos = pos  # the next append starts a new epoch with this as its floor
            return [_resync("lost")]
        frames = self._switch(head)
        if frames or pos <= self.last_pos:
            self.last_pos = max(self.last_pos, pos)
            return frames
        frames = await self._fill(pos)
        self.last_pos = pos
        return frames

    async def _fill(self, upto: int) -> list[str]:
        """The positions a push overtook, from the log."""
        assert self.uid is not None
        missing = await _thread(
            selectors.log_between, uid=self.uid, epoch=self.epoch, after=self.last_pos, upto=upto
        )
        gone = [_resync("too_old")] if len(missing) < upto - self.last_pos else []
        return gone + [entry.text for entry in missing]  # gone from the log meanwhile: say so

    def _queue(self, item: Item) -> None:
        if self.closing:
            return
        if self.outbox is None:
            self.outbox = deque()
        if len(self.outbox) >= self.limit:
            self.closing = True
            asyncio.get_running_loop().create_task(self._too_slow())
            return
        self.outbox.append(item)
        self._wake()

    def _wake(self) -> None:
        if self.started and self.writer is None and self.outbox:
            self.writer = asyncio.get_running_loop().create_task(self._write())

    async def _too_slow(self) -> None:
        log.info("live: uid %s device %s too slow, closing", self.uid, self.device_id)
        if self.writer is not None:
            self.writer.cancel()  # its pending frames go with the socket
        await self.close(code=CLOSE_TOO_SLOW)

    async def _write(self) -> None:
        """Sends the outbox, then ends (an idle connection keeps no task and no outbox)."""
        try:
            while self.outbox:
                item = self.outbox.popleft()
                for text in [item] if isinstance(item, str) else await self._frames(item):
                    await self.send(text_data=text)
            self.outbox = None
        except (redis.RedisError, OSError) as exc:
            log.warning("live: uid %s push failed, closing: %r", self.uid, exc)
            self.closing = True
            await self.close(code=CLOSE_ERROR)
        finally:
            self.writer = None

    def _leave(self) -> None:
        """Out of the hub and the heartbeats (once; also when the consumer failed)."""
        if self.uid is None:
            return
        if self.writer is not None:
            self.writer.cancel()
        hub.leave(keys.group(self.uid), self)
        if self.started:
            heartbeats.discard(self.uid, self.device_id)
        self.started, self.closing = False, True

    async def disconnect(self, code: int) -> None:
        if self.uid is None:
            return
        self._leave()
        try:
            await _thread(services.connection_close, uid=self.uid, device_id=self.device_id)
        except redis.RedisError as exc:
            log.warning("live: presence of uid %s not removed: %r", self.uid, exc)
