"""One channel-layer receiver per gateway process, not one per connection.

Channels gives every consumer a channel of its own and a receive loop on it: with
``channels-redis`` that is, per idle connection, a buffer queue, the consumer's dispatch task and
two more tasks waiting on the layer's receive lock and on that queue. Measured with
tracemalloc on 1,000 idle connections (2026-11-24), that machinery and the per-push
``close_old_connections`` thread hop of Channels' dispatch came to ~13 KB of the ~44 KB a
connection held (permessage-deflate off).

``hub`` instead holds ONE channel for the process (``live-gateway.<process>!<random>``) and one
task receiving on it. A user's group (``keys.group``) holds that channel once while any of the
user's connections is on this process (the first joins it, the last leaves it); a push names its
group (``pusher`` adds ``group``) and the hub hands it to each local connection of that group
(``LiveConsumer.push``). Group changes of one group run one after the other, in order, so a
leave and a quick re-join cannot end with the channel out of the group; ``join`` returns once the
channel is in the group (the consumer reads the log only then: no gap).

The process's channel has its own capacity (``CHANNEL_LAYERS`` ``channel_capacity``): every push
to this process waits there, not only one connection's.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings

log = logging.getLogger(__name__)
CHANNEL_PREFIX = "live-gateway"
RETRY_S = 1.0


class Member(Protocol):
    def push(self, message: dict[str, Any]) -> None: ...


class Hub:
    def __init__(self) -> None:
        self.members: dict[str, list[Member]] = {}  # group -> connections of this process
        self.changes: dict[str, asyncio.Task[None]] = {}  # group -> its latest add or discard
        self.channel = ""
        self.layer: BaseChannelLayer | None = None
        self.receiver: asyncio.Task[None] | None = None
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

    def _change(self, group: str, *, add: bool) -> None:
        change = self._apply(self.changes.get(group), group, add)
        task = asyncio.get_running_loop().create_task(change)
        self.changes[group] = task
        task.add_done_callback(lambda done: self._changed(group, done))

    def _changed(self, group: str, done: asyncio.Task[None]) -> None:
        if self.changes.get(group) is done:
            del self.changes[group]
        if not done.cancelled() and done.exception() is not None:
            log.warning("live: group %s not changed: %r", group, done.exception())

    async def _apply(self, previous: asyncio.Task[None] | None, group: str, add: bool) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        assert self.layer is not None
        async with self.slots:
            if add:
                await self.layer.group_add(group, self.channel)
            else:
                await self.layer.group_discard(group, self.channel)

    async def _start(self) -> None:
        if self.receiver is not None and not self.receiver.done():
            return
        self.layer = get_channel_layer(settings.LIVE_CHANNEL_LAYER)
        assert self.layer is not None
        if not self.channel:
            self.channel = await self.layer.new_channel(CHANNEL_PREFIX)
        self.receiver = asyncio.get_running_loop().create_task(self._receive())

    async def _receive(self) -> None:
        assert self.layer is not None
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except Exception as exc:  # Redis down: keep trying, pushes resume when it is back
                log.warning("live: the gateway's channel receive failed: %r", exc)
                await asyncio.sleep(RETRY_S)
                continue
            for member in self.members.get(str(message.get("group")), ()):
                member.push(message)


hub = Hub()
