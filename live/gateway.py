"""One channel-layer receiver per gateway process, not one per connection.

Channels gives every consumer a channel of its own and a receive loop on it: with
``channels-redis`` that is, per idle connection, a buffer queue, the consumer's dispatch task and
two more tasks waiting on the layer's receive lock and on that queue. Measured with
tracemalloc on 1,000 idle connections (2026-11-24), that machinery and the per-push
``close_old_connections`` thread hop of Channels' dispatch came to ~13 KB of the ~44 KB a
connection held (permessage-deflate off).

``hub`` instead holds ONE channel for the process (``live-gateway.<process>!<random>``) and one
task receiving on it. A user's group (``keys.group``) holds that channel once while any of the
user's connections is on this process (the first joins it, the last leaves it); pushes arrive as one
``live.batch`` message per sending call (``pusher``: a campaign batch's for all its connected
recipients on this process), each item naming its group, and the hub hands each item to every local
connection of that group (``LiveConsumer.push``). Group changes of one group run one after the
other, in order, so a leave and a quick re-join cannot end with the channel out of the group;
``join`` returns once the channel is in the group (the consumer reads the log only then: no gap).

The process's channel has its own capacity (``CHANNEL_LAYERS`` ``channel_capacity``): every push
to this process waits there, not only one connection's.

Staying in the groups (channels-redis drops a channel from a group ``group_expiry`` after it was
added, ``LIVE_GROUP_EXPIRY_S``, a day by default, and a Redis killed with -9 may lose the last
second of adds): every quarter of ``group_expiry`` the hub adds its channel again to every group
it has connections in (``group_add`` refreshes the channel's time; 10,000 connected users: 10,000
adds every 6 hours), and again as soon as Redis answers after a receive failed. Then, since
pushes sent meanwhile may be lost, every connection catches up from its log
(``LiveConsumer.catch_up``: one HMGET each, the missing entries if any, or ``resync`` ``lost``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol, cast

from channels.layers import BaseChannelLayer, get_channel_layer
from channels_redis.core import RedisChannelLayer
from django.conf import settings

from infra.redis import get_redis
from live.protocol import BATCH

log = logging.getLogger(__name__)
CHANNEL_PREFIX = "live-gateway"
RETRY_S = 1.0
TAKE_AT_ONCE = 500  # messages per round trip (``Hub._take``)
BLOCK_S = 5  # a pop's wait for the first message, as channels-redis's own receive
DEFAULT_GROUP_EXPIRY_S = 86_400  # channels-redis's


class Member(Protocol):
    def push(self, message: dict[str, Any]) -> None: ...

    def catch_up(self) -> None: ...


class Hub:
    def __init__(self) -> None:
        self.members: dict[str, list[Member]] = {}  # group -> connections of this process
        self.changes: dict[str, asyncio.Task[None]] = {}  # group -> its latest add or discard
        self.channel = ""
        self.layer: BaseChannelLayer | None = None
        self.receiver: asyncio.Task[None] | None = None
        self.refresher: asyncio.Task[None] | None = None
        # Channel-layer calls in flight: its connection pool (100) refuses more rather than
        # waiting, which a burst of reconnecting devices would otherwise hit.
        self.slots = asyncio.Semaphore(64)

    async def join(self, group: str, member: Member) -> None:
        """Add ``member`` to ``group``; returns once this process's channel is in the group."""
        await self._start()
        members = self.members.setdefault(group, [])
        members.append(member)
        if len(members) == 1:
            self._change(group, add=True)
        change = self.changes.get(group)
        if change is None:
            return
        try:
            await asyncio.shield(change)
        except BaseException:
            self.leave(group, member)
            raise

    def leave(self, group: str, member: Member) -> None:
        """Remove ``member``; the last one of a group takes the channel out of it (in the
        background, after any change of the group still under way)."""
        members = self.members.get(group)
        if members is None or member not in members:
            return
        members.remove(member)
        if not members:
            del self.members[group]
            self._change(group, add=False)

    def _change(self, group: str, *, add: bool) -> asyncio.Task[None]:
        change = self._apply(self.changes.get(group), group, add)
        task = asyncio.get_running_loop().create_task(change)
        self.changes[group] = task
        task.add_done_callback(lambda done: self._changed(group, done))
        return task

    async def rejoin(self) -> None:
        """Add the channel again to every group of this process's connections (after any change
        of each still under way); raises when one failed."""
        changes = [self._change(group, add=True) for group in list(self.members)]
        for failure in await asyncio.gather(*changes, return_exceptions=True):
            if isinstance(failure, BaseException):
                raise failure

    def _changed(self, group: str, done: asyncio.Task[None]) -> None:
        if self.changes.get(group) is done:
            del self.changes[group]
        if not done.cancelled() and done.exception() is not None:
            log.warning("live: group %s not changed: %r", group, done.exception())

    async def _apply(self, previous: asyncio.Task[None] | None, group: str, add: bool) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        assert self.layer is not None
        change = self.layer.group_add if add else self.layer.group_discard
        async with self.slots:
            await change(group, self.channel)

    async def _start(self) -> None:
        if self.receiver is not None and not self.receiver.done():
            return
        self.layer = get_channel_layer(settings.LIVE_CHANNEL_LAYER)
        assert self.layer is not None
        if not self.channel:
            self.channel = await self.layer.new_channel(CHANNEL_PREFIX)
        loop = asyncio.get_running_loop()
        self.receiver = loop.create_task(self._receive())
        if self.refresher is None or self.refresher.done():
            self.refresher = loop.create_task(self._refresh())

    async def _receive(self) -> None:
        while True:
            try:
                messages = await self._take()
            except Exception as exc:  # Redis down: keep trying, pushes resume when it is back
                log.warning("live: the gateway's channel receive failed: %r", exc)
                await self._recover()
                continue
            for message in messages:
                for item in message["items"] if message.get("type") == BATCH else [message]:
                    for member in self.members.get(str(item.get("group")), ()):
                        member.push(item)

    async def _take(self) -> list[dict[str, Any]]:
        """The messages waiting on this process's channel, up to ``TAKE_AT_ONCE`` per round
        trip, oldest first; when there are none, one blocking pop (``BLOCK_S``).

        Channels' own ``receive`` takes one message per call in three round trips (a clean-up
        script, ``BZPOPMIN``, a backup ``ZADD``, then a clean-up ``ZREM``): one gateway process
        received ~800 messages/s while four processes pushed 1,000 1:1 sends a second to it, its
        CPU at 32%, the frames 4 s late after 10 s and climbing (scripts/bench_live.py
        --push-rates, BENCHMARKS.md). This reads the channel's sorted set as channels-redis
        writes it (its key, its serializer); the backup queue it drops only guarded against a
        receive cancelled mid-way, which here happens only when the process stops, and its
        devices resume from their logs."""
        layer = cast(RedisChannelLayer, self.layer)
        key = layer.prefix + layer.non_local_name(self.channel)
        connection = layer.connection(layer.consistent_hash(self.channel))
        popped = await connection.zpopmin(key, TAKE_AT_ONCE)
        if not popped:
            one = await connection.bzpopmin(key, timeout=BLOCK_S)
            popped = [] if one is None else [(one[1], one[2])]
        messages = [layer.deserialize(member) for member, _ in popped]
        return [m for m in messages if m.pop("__asgi_channel__", self.channel) == self.channel]

    async def _recover(self) -> None:
        """Once Redis answers again: back in every group, then every connection catches up
        (once the data Redis it reads answers too, its breaker closed: else each catch-up would
        fail and close its connection)."""
        while True:
            await asyncio.sleep(RETRY_S)
            try:
                await self.rejoin()
                await asyncio.to_thread(lambda: get_redis().ping())
            except Exception as exc:
                log.warning("live: the gateway's groups not joined again yet: %r", exc)
                continue
            self.catch_up_all()
            return

    def catch_up_all(self) -> None:
        """Every connection of this process reads from its log what it was not sent."""
        for members in list(self.members.values()):
            for member in list(members):
                member.catch_up()

    async def _refresh(self) -> None:
        """Every quarter of the layer's ``group_expiry``, the channel back in its groups."""
        expiry = getattr(self.layer, "group_expiry", DEFAULT_GROUP_EXPIRY_S)
        while True:
            await asyncio.sleep(expiry / 4)
            try:
                await self.rejoin()
            except Exception as exc:  # Redis down: _recover rejoins once it is back
                log.warning("live: the gateway's groups not refreshed: %r", exc)


hub = Hub()
