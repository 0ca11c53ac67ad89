"""The multiplexed asyncio Redis client (infra/redis_mux.py) against the test Redis: concurrent
pipelines share one connection and each gets its own replies, error replies come back as values,
the URL's database is selected, and a lost, refused or silent connection raises RedisUnavailable
and is replaced on the next call."""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis
import pytest
from django.conf import settings

from infra.redis import get_redis
from infra.redis_mux import MuxRedis, RedisUnavailable


def run(main: Any) -> Any:
    return asyncio.run(main)


def test_concurrent_pipelines_each_get_their_own_replies() -> None:
    get_redis().mset({f"mux:{n}": n for n in range(200)})

    async def main() -> list[list[Any]]:
        client = MuxRedis(settings.REDIS_URL)
        try:
            return await asyncio.gather(
                *(client.pipeline([["GET", f"mux:{n}"], ["INCR", f"mux:{n}"]]) for n in range(200))
            )
        finally:
            await client.aclose()

    assert run(main()) == [[str(n).encode(), n + 1] for n in range(200)]


def test_it_reads_the_database_the_url_names_and_returns_error_replies() -> None:
    get_redis().set("mux:here", "yes")  # the test database (REDIS_URL names it)

    async def main() -> list[Any]:
        client = MuxRedis(settings.REDIS_URL)
        try:
            return await client.pipeline([["GET", "mux:here"], ["HGETALL", "mux:here"]])
        finally:
            await client.aclose()

    found, wrong_type = run(main())
    assert found == b"yes"
    assert isinstance(wrong_type, hiredis.ReplyError)


def test_a_lost_connection_fails_its_callers_and_the_next_call_reconnects() -> None:
    async def main() -> tuple[Any, ...]:
        client = MuxRedis(settings.REDIS_URL)
        try:
            [own] = await client.pipeline([["CLIENT", "ID"]])
            replies: list[Any] = await asyncio.gather(  # one write: Redis closes after the first
                client.pipeline([["CLIENT", "KILL", "ID", own, "SKIPME", "no"]]),
                client.pipeline([["PING"]]),
                return_exceptions=True,
            )
            again = await client.pipeline([["CLIENT", "ID"], ["PING"]])
            return own, *replies, again
        finally:
            await client.aclose()

    own, killed, lost, (new_id, pong) = run(main())
    assert killed == [1]
    assert isinstance(lost, RedisUnavailable)
    assert (pong, new_id != own) == (b"PONG", True)


@pytest.mark.parametrize("url", ["redis://:wrong@127.0.0.1:6379/4", "redis://127.0.0.1:6379/999"])
def test_a_refused_auth_or_select_raises_redis_unavailable(url: str) -> None:
    async def main() -> None:
        client = MuxRedis(url)
        with pytest.raises(RedisUnavailable, match="handshake refused"):
            await client.pipeline([["PING"]])

    run(main())


def test_nothing_listening_raises_redis_unavailable() -> None:
    async def main() -> None:
        client = MuxRedis("redis://127.0.0.1:1/0")
        with pytest.raises(RedisUnavailable):
            await client.pipeline([["PING"]])

    run(main())


def test_a_silent_server_raises_redis_unavailable_after_the_timeout() -> None:
    async def main() -> None:
        accepted: list[asyncio.StreamWriter] = []

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)  # reads nothing, answers nothing

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = MuxRedis(f"redis://127.0.0.1:{port}/0", timeout_s=0.2)
        try:
            with pytest.raises(RedisUnavailable, match="no reply within"):
                await client.pipeline([["PING"]])
        finally:
            await client.aclose()
            for writer in accepted:
                writer.close()
            server.close()
            await server.wait_closed()

    run(main())
