"""The channel layer's connections (``CHANNEL_LAYERS`` in config/settings.py): a command on a
pooled connection that Redis closed, as a restart closes them, goes again on a new connection,
once; what the layer carries arrives once, in order."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import redis
from channels_redis.core import RedisChannelLayer
from django.conf import settings


def layer_named(name: str) -> RedisChannelLayer:
    """The live layer as settings configure it, its connections named ``name``."""
    config: Any = settings.CHANNEL_LAYERS[settings.LIVE_CHANNEL_LAYER]["CONFIG"]
    hosts = [{**host, "client_name": name} for host in config["hosts"]]
    return RedisChannelLayer(**{**config, "hosts": hosts})


def close_connections(name: str) -> int:
    """Redis closes every connection named ``name`` (and no one else's): how many."""
    client = redis.Redis.from_url(settings.LIVE_REDIS_URL)
    try:
        ids = [found["id"] for found in client.client_list() if found["name"] == name]
        for client_id in ids:
            client.client_kill_filter(_id=client_id)
        return len(ids)
    finally:
        client.close()


async def receive_across_a_closed_connection(name: str) -> tuple[int, list[Any]]:
    layer = layer_named(name)
    channel = await layer.new_channel("live-test")
    receiving = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(0.3)  # blocked in BZPOPMIN on its pooled connection
    closed = await asyncio.to_thread(close_connections, name)
    for n in (1, 2):
        await layer.send(channel, {"type": "live.test", "n": n})
    first = await asyncio.wait_for(receiving, 10)
    got = [first, await asyncio.wait_for(layer.receive(channel), 10)]
    await layer.close_pools()
    return closed, [message["n"] for message in got]


def test_a_receive_whose_connection_redis_closed_goes_on_and_gets_each_message_once() -> None:
    closed, got = asyncio.run(receive_across_a_closed_connection(f"live-test-{os.getpid()}"))

    assert closed == 1
    assert got == [1, 2]
