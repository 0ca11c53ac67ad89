"""Live delivery under load: what one gateway process holds, and how fast a message reaches a
socket.

    python scripts/bench_live.py [--connections 2000] [--rate 200] [--seconds 10] [--pairs 50]
                                 [--api-workers 2]

``--connections 0`` or ``--seconds 0`` skips a measurement.

Runs one gateway process as production would (uvicorn serving ``config.asgi``, uvloop and
httptools, the WebSocket settings of ``live.gateway_worker``: wsproto, no permessage-deflate)
on loopback, against database ``bench_live`` (created and migrated here) and Redis databases 8/9.
Two measurements, each printed with its conditions:

1. idle connections: ``--connections`` WebSockets opened to the one process (each receives its
   ``hello``), then the process's resident memory before and after, and per connection (goal:
   10,000 in under 200 MB);
2. latency: ``--pairs`` receivers connected to the gateway, ``POST /api/v1/messages`` sent to
   them at ``--rate`` per second for ``--seconds`` (16 client threads, keep-alive) through an API
   server of ``--api-workers`` gunicorn/uvicorn workers, and for each message the time
   from its POST returning (and from its POST starting) to its frame arriving on the receiver's
   socket: p50, p99, max (goal: p99 under 50 ms at 1,000 sends/s).
The client runs on the same machine and shares its cores with the gateway.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import websockets
from benchkit import serve

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB_NAME = "bench_live"
ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DJANGO_SECRET_KEY": "bench-only-not-secret",  # DEBUG off needs a key (infra/deploy.py)
    "DATABASE_URL": f"mysql://missive:missive@127.0.0.1:3306/{DB_NAME}",
    "REDIS_URL": "redis://127.0.0.1:6379/8",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/9",
    "LOG_LEVEL": "ERROR",
}
os.environ.update(ENV)
FIRST_UID = 7_000_000_001
SENDER = 7_900_000_001


def prepare() -> str:
    """Database, an API client with the ``users`` scope; returns its token."""
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", port=3306, user="missive", passwd="missive")
    conn.cursor().execute(
        f"CREATE DATABASE IF NOT EXISTS {DB_NAME} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    )
    conn.close()
    import django

    django.setup()
    from django.core.management import call_command

    from api.clients import api_client_create
    from api.models import ApiClient
    from infra.redis import get_redis

    call_command("migrate", verbosity=0)
    get_redis().flushdb()
    ApiClient.objects.filter(name="bench-live").delete()
    return api_client_create(name="bench-live", scopes=["users"])[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_gateway(port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "uvicorn", "config.asgi:application", "--port", str(port)]
    cmd += ["--loop", "uvloop", "--http", "httptools", "--log-level", "warning"]
    cmd += ["--backlog", "4096", "--timeout-keep-alive", "30", *gateway_flags()]
    return serve(cmd, port, {**os.environ, **ENV}, "gateway")


def gateway_flags() -> list[str]:
    """The WebSocket settings production runs with (``live.gateway_worker``), as uvicorn flags;
    ``BENCH_LIVE_UVICORN_DEFAULTS=1`` measures uvicorn's defaults instead."""
    from live.gateway_worker import GATEWAY_FLAGS

    return [] if os.environ.get("BENCH_LIVE_UVICORN_DEFAULTS") == "1" else GATEWAY_FLAGS


def start_api(port: int, workers: int) -> subprocess.Popen[bytes]:
    """The HTTP API as production runs it (gunicorn, uvicorn workers), apart from the gateway."""
    cmd = [sys.executable, "-m", "gunicorn", "config.asgi:application", "-b", f"127.0.0.1:{port}"]
    cmd += ["-w", str(workers), "-k", "live.gateway_worker.GatewayWorker", "--log-level", "warning"]
    return serve(cmd, port, {**os.environ, **ENV}, "API server", settle_s=2)  # workers imported


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def url(port: int, uid: int, device: str) -> str:
    from live.services import token_mint

    token = token_mint(uid=uid, device_id=device).token
    return f"ws://127.0.0.1:{port}/live/v1?token={token}"


# -- 1. idle connections ---------------------------------------------------------------------
async def open_many(port: int, count: int) -> list[Any]:
    opened: list[Any] = []
    for start in range(0, count, 200):  # 200 handshakes at a time
        batch = [_open(port, FIRST_UID + i) for i in range(start, min(count, start + 200))]
        opened += await asyncio.gather(*batch)
    return opened


async def _open(port: int, uid: int) -> Any:
    ws = await websockets.connect(url(port, uid, "idle"), open_timeout=60, ping_interval=None)
    await ws.recv()  # hello
    return ws


async def idle(port: int, pid: int, count: int) -> None:
    before = rss_mb(pid)
    started = time.monotonic()
    sockets = await open_many(port, count)
    took = time.monotonic() - started
    await asyncio.sleep(3)
    after = rss_mb(pid)
    print(f"idle connections: {len(sockets)} open on one gateway process in {took:.1f} s")
    print(f"  gateway RSS {before:.0f} MB before, {after:.0f} MB after: ", end="")
    print(f"{after - before:.0f} MB for them, {(after - before) * 1024 / count:.1f} KB each")
    await asyncio.gather(*(ws.close() for ws in sockets))


# -- 2. latency ------------------------------------------------------------------------------
class Sender:
    """POST /messages from client threads, one keep-alive connection each."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token
        self.local = threading.local()
        self.done: dict[str, tuple[float, float]] = {}  # msgkey -> (started, returned)

    def send(self, n: int, receiver: int) -> None:
        body = {
            "sender_uid": SENDER,
            "receiver_uid": receiver,
            "client_msg_id": f"b{n}-{time.time_ns()}",
        }
        raw = json.dumps({**body, "content": {"type": "text", "text": f"bench {n}"}})
        started = time.perf_counter()
        answer = self._post(raw)
        self.done[answer["msgkey"]] = (started, time.perf_counter())

    def _post(self, raw: str) -> Any:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        conn.request("POST", "/api/v1/messages", body=raw, headers=headers)
        response = conn.getresponse()
        return json.loads(response.read())


async def receive(ws: Any, arrived: dict[str, float]) -> None:
    async for raw in ws:
        frame = json.loads(raw)
        if frame.get("type") == "message":
            arrived[frame["message"]["msgkey"]] = time.perf_counter()


async def latency(port: int, api_port: int, token: str, args: argparse.Namespace) -> None:
    receivers = [FIRST_UID + i for i in range(args.pairs)]
    sockets = [await _open(port, uid) for uid in receivers]
    arrived: dict[str, float] = {}
    readers = [asyncio.create_task(receive(ws, arrived)) for ws in sockets]
    sender = Sender(api_port, token)
    sent = await asyncio.to_thread(drive, sender, receivers, args.rate, args.seconds)
    await asyncio.sleep(2)
    for task in readers:
        task.cancel()
    report(sender.done, arrived, sent, args)


def drive(sender: Sender, receivers: list[int], rate: float, seconds: float) -> float:
    """Send at ``rate`` per second for ``seconds``; returns the rate achieved."""
    total, started = int(rate * seconds), time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        for n in range(total):
            time.sleep(max(0.0, started + n / rate - time.perf_counter()))
            pool.submit(sender.send, n, receivers[n % len(receivers)])
    return total / (time.perf_counter() - started)


def report(
    done: dict[str, tuple[float, float]],
    arrived: dict[str, float],
    rate: float,
    args: argparse.Namespace,
) -> None:
    after_return = [(arrived[k] - r) * 1000 for k, (_, r) in done.items() if k in arrived]
    after_start = [(arrived[k] - s) * 1000 for k, (s, _) in done.items() if k in arrived]
    print(f"latency: {len(done)} POST /messages at {rate:.0f}/s (asked {args.rate:.0f}/s)", end="")
    print(f" to {args.pairs} receivers, {len(arrived)} frames received")
    for name, values in (
        ("from the POST returning", after_return),
        ("from the POST starting", after_start),
    ):
        cuts = statistics.quantiles(values, n=100)
        print(f"  {name}: p50 {cuts[49]:.1f} ms, p99 {cuts[98]:.1f} ms, max {max(values):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=2_000)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--api-workers", type=int, default=2)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the servers below on a kill
    token = prepare()
    port = free_port()
    gateway = start_gateway(port)
    api_port = free_port()
    api = start_api(api_port, args.api_workers)
    try:
        print(f"{os.cpu_count()} cores; one uvicorn gateway process (uvloop, httptools", end="")
        print(f" {' '.join(gateway_flags())}); the client on the same machine")
        if args.connections:
            asyncio.run(idle(port, gateway.pid, args.connections))
        if args.seconds:
            asyncio.run(latency(port, api_port, token, args))
    finally:
        for proc in (gateway, api):
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
