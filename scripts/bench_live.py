"""Live delivery under load: what one gateway process holds, and how fast a message reaches a
socket.

    python scripts/bench_live.py [--connections 2000] [--rate 200] [--seconds 10] [--pairs 50]
                                 [--api-workers 2]
    python scripts/bench_live.py --campaign [--recipients 100000] [--online 5000] [--workers 2]
                                 [--batch-size 4000]
    python scripts/bench_live.py --push-rates 250,500,1000 [--seconds 10] [--pairs 200]
                                 [--pushers 4]
    python scripts/bench_live.py --group-members 100000 [--online 2000]

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
3. ``--campaign`` (instead of 1 and 2): a business account with ``--recipients`` followers,
   ``--online`` of them (evenly spread over the batches) connected to the gateway, one campaign
   launched and delivered by ``--workers`` real Celery workers on ``bulk.daily`` (channel
   unthrottled, batches of ``--batch-size``); every connected recipient must receive its frame
   (the missing are counted and listed), and for each frame the time from its batch's push (the
   frame's own timestamp, the cursor's ms: taken right after the batch's rows committed and its
   counters were written) to its arrival: p50, p99, max (goal: p99 under 1 s with 100,000
   recipients and 5,000 connected); and the campaign's own fan-out rate, recipients per second
   from its start to its end: ``--online 0`` gives the same campaign with nobody connected, the
   rate the pushes must not slow by more than 5%, with the workers' own CPU time (the gateway
   and the client share the 2 cores, and slow the workers' wall clock by what they use).
4. ``--push-rates`` (instead of 1 and 2): the gateway side of item 2 at rates the API cannot
   reach on this machine. ``--pushers`` processes stand in for the API's: each makes a 1:1
   send's last step, ``messaging.pushes.message_sent`` (the receiver's devices and the
   sender's, one Redis round trip, then the channel layer), for its share of each rate for
   ``--seconds``, to ``--pairs`` receivers connected to the gateway. For each message, the time
   from ``message_sent`` returning (the POST answers right after it) to its frame arriving: p50,
   p99, max, the frames missing, and the gateway's CPU, one row per rate. What it leaves out is
   the rest of the POST (its stores and Django), which this machine serves at ~70/s.
5. ``--group-members`` (instead of 1 and 2): a group of that many members, ``--online`` of them
   (spread evenly) connected to the gateway; one group message sent through
   ``groups.services.group_message_send``, its pushes made by a real Celery worker on the
   ``messaging`` queue (``live.group_push``). Counted: the frames the connected members receive
   (every one must), the members whose live log got the message (only the online: an offline
   member costs nothing but its place in one Redis call per 4,000 members), and the time from
   the send returning to the frames: p50, p99, max.
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

import psutil
import websockets
from bench_groups import Uids, make_group
from benchkit import cpu_s, serve

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
        started = time.monotonic()
        answer = self._post(raw)
        self.done[answer["msgkey"]] = (started, time.monotonic())

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
            arrived[frame["message"]["msgkey"]] = time.monotonic()  # one clock for all processes


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
    total, started = int(rate * seconds), time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        for n in range(total):
            time.sleep(max(0.0, started + n / rate - time.monotonic()))
            pool.submit(sender.send, n, receivers[n % len(receivers)])
    return total / (time.monotonic() - started)


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
        print(f"  {name}: {spread(values)}")


def spread(values: list[float]) -> str:
    """p50, p99 and max of ``values`` (ms). Inclusive percentiles: the default ("exclusive")
    extrapolates past the largest value on small samples, which printed a p99 above the max."""
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return f"p50 {cuts[49]:.1f} ms, p99 {cuts[98]:.1f} ms, max {max(values):.1f} ms"


# -- 3. a campaign to connected recipients ------------------------------------------------------
CAMPAIGN_FIRST_UID = 7_100_000_001


def seed_campaign(recipients: int, batch_size: int) -> tuple[int, list[int]]:
    """A new business account (no per-receiver cap) followed by ``recipients`` users, the daily
    channel unthrottled; returns the sender and the followers."""
    from django.db import connection

    from bulk.models import ChannelSetting, SenderPolicy
    from config.celery import app
    from messaging.models import Account

    sender = 7_800_000_000 + int(time.time()) % 100_000_000  # a new sender each run
    Account.objects.create(uid=sender, kind="business", name=f"bench live {sender}")
    SenderPolicy.objects.create(sender_uid=sender, per_receiver_limit=0)
    followers = list(range(CAMPAIGN_FIRST_UID, CAMPAIGN_FIRST_UID + recipients))
    with connection.cursor() as cur:
        for start in range(0, recipients, 10_000):
            values = ",".join(
                f"({uid},{sender},NOW())" for uid in followers[start : start + 10_000]
            )
            cur.execute(
                "INSERT INTO messaging_follow (follower_uid, followee_uid, followed_at) "
                f"VALUES {values}"
            )
    ChannelSetting.objects.update_or_create(
        channel="daily", defaults={"rate_per_s": 10**9, "batch_size": batch_size}
    )
    app.control.purge()
    return sender, followers


def start_workers(count: int, queue: str = "bulk.daily") -> list[subprocess.Popen[bytes]]:
    """``count`` Celery worker processes on ``queue`` (one task at a time each)."""
    cmd = [sys.executable, "-m", "celery", "-A", "config", "--quiet", "worker", "-Q", queue]
    cmd += ["-c", "1", "--without-gossip", "--without-mingle", "-l", "ERROR"]
    env = {**os.environ, **ENV}
    return [
        subprocess.Popen([*cmd, "-n", f"benchlive{i}@%h"], cwd=ROOT, env=env) for i in range(count)
    ]


def launch(sender: int) -> int:
    from bulk import services

    campaign, _ = services.campaign_create(
        sender_uid=sender,
        content={"type": "text", "text": "bench live campaign"},
        audience=services.AudienceChoice("followers", {}, None),
        channel="daily",
    )
    return int(campaign.pk)


def campaign_state(campaign_id: int) -> tuple[str, int]:
    """Status and recipients delivered."""
    from bulk.models import Campaign

    found = Campaign.objects.get(pk=campaign_id)
    return str(found.status), int(found.delivered)


def campaign_rate(campaign_id: int) -> float:
    """Recipients per second of the campaign's own run (its start to its end, in MySQL)."""
    from django.utils import timezone

    from bulk.models import Campaign

    found = Campaign.objects.get(pk=campaign_id)
    return found.processed / max(found.running_s(timezone.now()), 1e-3)


async def receive_campaign(ws: Any, uid: int, arrived: dict[int, tuple[float, int]]) -> None:
    """The first campaign frame on ``ws``: when it arrived and its cursor's ms (its push)."""
    async for raw in ws:
        frame = json.loads(raw)
        if frame.get("type") == "message":
            arrived[uid] = (time.time(), int(frame["cursor"].rsplit(".", 1)[1]))
            return


async def campaign(port: int, args: argparse.Namespace) -> None:
    sender, followers = await asyncio.to_thread(seed_campaign, args.recipients, args.batch_size)
    step = max(1, len(followers) // args.online) if args.online else 1
    online = followers[::step][: args.online]
    started = time.monotonic()
    sockets = await open_uids(port, online, "campaign")
    print(f"campaign: {len(sockets):,} recipients connected in {time.monotonic() - started:.1f} s")
    arrived: dict[int, tuple[float, int]] = {}
    readers = [
        asyncio.create_task(receive_campaign(ws, u, arrived))
        for ws, u in zip(sockets, online, strict=True)
    ]
    workers = start_workers(args.workers)
    try:
        await asyncio.sleep(5)  # the workers import and connect
        cpu_before = cpu_s([w.pid for w in workers], descendants=True)
        launched = time.time()
        campaign_id = await asyncio.to_thread(launch, sender)
        status, delivered = await wait_campaign(campaign_id, arrived, len(online))
        took = time.time() - launched
        rate = await asyncio.to_thread(campaign_rate, campaign_id)
        cpu = cpu_s([w.pid for w in workers], descendants=True) - cpu_before
    finally:
        for proc in workers:
            proc.terminate()
        for proc in workers:
            proc.wait(timeout=60)
    for task in readers:
        task.cancel()
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    report_campaign(args, status, delivered, took, online, arrived)
    print(f"  fan-out: {rate:,.0f} recipients/s (the campaign's start to its end); ", end="")
    print(f"the workers' CPU {cpu:.2f} s, {cpu * 1e6 / max(delivered, 1):.1f} us a recipient")
    if arrived:
        pushed = sorted(ms / 1000 - launched for _, ms in arrived.values())
        came = sorted(at - launched for at, _ in arrived.values())
        print(f"  after the launch: pushes from {pushed[0]:.2f} to {pushed[-1]:.2f} s, ", end="")
        print(f"frames from {came[0]:.2f} to {came[-1]:.2f} s")


async def open_uids(port: int, uids: list[int], device: str) -> list[Any]:
    opened: list[Any] = []
    for start in range(0, len(uids), 200):  # 200 handshakes at a time
        batch = uids[start : start + 200]
        opened += await asyncio.gather(*(_open_device(port, uid, device) for uid in batch))
    return opened


async def _open_device(port: int, uid: int, device: str) -> Any:
    ws = await websockets.connect(url(port, uid, device), open_timeout=60, ping_interval=None)
    await ws.recv()  # hello
    return ws


async def wait_campaign(
    campaign_id: int, arrived: dict[int, tuple[float, int]], expected: int
) -> tuple[str, int]:
    """Until the campaign ended and every frame arrived, or 10 s after it ended."""
    ended_at = 0.0
    while True:
        status, delivered = await asyncio.to_thread(campaign_state, campaign_id)
        if status in ("finished", "failed", "cancelled"):
            ended_at = ended_at or time.monotonic()
            if len(arrived) >= expected or time.monotonic() - ended_at > 10:
                return status, delivered
        await asyncio.sleep(0.2)


def report_campaign(
    args: argparse.Namespace,
    status: str,
    delivered: int,
    took: float,
    online: list[int],
    arrived: dict[int, tuple[float, int]],
) -> None:
    missing = [uid for uid in online if uid not in arrived]
    print(
        f"campaign: {args.recipients:,} recipients, {len(online):,} connected, batches of ", end=""
    )
    print(f"{args.batch_size:,}, {args.workers} workers: {status}, ", end="")
    print(f"{delivered:,} delivered, the last frame {took:.1f} s after the launch")
    print(f"  frames received {len(arrived):,} of {len(online):,}, missing {len(missing)}", end="")
    print(f": {missing[:20]}" if missing else "")
    if arrived:
        waits = [(at - ms / 1000) * 1000 for at, ms in arrived.values()]
        print(f"  from the batch's push (the frame's cursor) to the frame: {spread(waits)}")


# -- 4. the gateway at a push rate the API cannot reach here -----------------------------------
def pusher(index: int, rate: float, seconds: float, receivers: list[int], start_at: float) -> None:
    """A stand-in for one API process's pushes (run in its own process): a 1:1 send's last step,
    ``messaging.pushes.message_sent``, ``rate`` times a second for ``seconds`` from ``start_at``
    (``time.monotonic``: one clock for every process on the machine). Prints, as JSON, each
    message's msgkey and when its push returned."""
    import django

    django.setup()
    from messaging.models import Message
    from messaging.pushes import message_sent
    from storage.msgkey import compose, created_at, now_ms

    done: list[tuple[str, float]] = []
    for n in range(int(rate * seconds)):
        time.sleep(max(0.0, start_at + n / rate - time.monotonic()))
        msgkey = compose(now_ms(), index, n % 4096)
        body = {"type": "text", "text": f"push {n}"}
        message = Message(msgkey=msgkey, sender_uid=SENDER, type="text", body=body)
        message.created_at = created_at(msgkey)
        message_sent(message, receivers[(n * 7 + index) % len(receivers)])
        done.append((str(msgkey), time.monotonic()))
    print(json.dumps(done))


def start_pushers(
    args: argparse.Namespace, rate: float, receivers: list[int], start_at: float
) -> list[subprocess.Popen[str]]:
    share = rate / args.pushers
    code = "import sys, json, bench_live; bench_live.pusher(*json.loads(sys.argv[1]))"
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                code,
                json.dumps([i + 1, share, args.seconds, receivers, start_at]),
            ],
            cwd=ROOT / "scripts",
            env={**os.environ, **ENV},
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(args.pushers)
    ]


async def push_rates(port: int, pid: int, args: argparse.Namespace) -> None:
    receivers = [FIRST_UID + i for i in range(args.pairs)]
    sockets = await open_uids(port, receivers, "pushes")
    arrived: dict[str, float] = {}
    readers = [asyncio.create_task(receive(ws, arrived)) for ws in sockets]
    rows = []
    for rate in [float(r) for r in args.push_rates.split(",")]:
        arrived.clear()
        gateway = psutil.Process(pid)
        start_at = time.monotonic() + 8  # the pushers import Django meanwhile
        procs = start_pushers(args, rate, receivers, start_at)
        await asyncio.sleep(start_at - time.monotonic())
        cpu_before = sum(gateway.cpu_times()[:2])
        outputs = await asyncio.gather(*(asyncio.to_thread(p.communicate) for p in procs))
        cpu_s = sum(gateway.cpu_times()[:2]) - cpu_before  # over the pushes' window
        wall_s = time.monotonic() - start_at
        await asyncio.sleep(2)  # the last frames
        done = dict(item for out, _ in outputs for item in json.loads(out))
        rows.append(push_row(rate, done, arrived, cpu_s, wall_s))
        print(rows[-1])
    for task in readers:
        task.cancel()
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    print(
        f"pushes: {args.pushers} pusher processes, {args.pairs} receivers connected to one "
        f"gateway process, {args.seconds:.0f} s per rate; from message_sent returning to the frame"
    )
    for row in rows:
        print(f"  {row}")


def push_row(
    rate: float, done: dict[str, float], arrived: dict[str, float], cpu_s: float, wall_s: float
) -> str:
    """One rate's figures; the gateway's CPU seconds ``cpu_s`` over the pushes' ``wall_s``."""
    waits = [(arrived[k] - returned) * 1000 for k, returned in done.items() if k in arrived]
    reached = len(done) / wall_s
    spent = f"gateway CPU {cpu_s / wall_s * 100:.0f}% of a core"
    figures = spread(waits) if waits else "no frame"
    missing = len(done) - len(waits)
    return f"{rate:,.0f}/s asked, {reached:,.0f}/s pushed: {figures}; missing {missing}; {spent}"


# -- 5. a group message to a big group with some members online ---------------------------------
def group_send(gid: int, sender: int) -> float:
    """Send one message to the group; returns when the send returned (``time.monotonic``)."""
    from groups.services import group_message_send

    content = {"type": "text", "text": "to the whole group"}
    group_message_send(
        gid=gid, sender_uid=sender, content=content, client_msg_id=f"live-{time.time_ns()}"
    )
    return time.monotonic()


def logged_since(uids: list[int], ms: int) -> int:
    """How many of ``uids`` have an entry newer than ``ms`` in their live log."""
    from infra.redis import get_redis
    from live import keys

    found = 0
    for start in range(0, len(uids), 5000):
        pipe = get_redis().pipeline(transaction=False)
        for uid in uids[start : start + 5000]:
            pipe.xrevrange(keys.log(uid), count=1)
        for last in pipe.execute():
            found += bool(last) and int(last[0][1][b"ms"]) >= ms  # ids are 0-<position>
    return found


async def receive_group(ws: Any, gid: int, arrived: dict[int, float], uid: int) -> None:
    """The first message frame of group ``gid`` on ``ws`` (the run sends one)."""
    async for raw in ws:
        frame = json.loads(raw)
        if frame.get("type") == "message" and frame["conversation"].get("gid") == str(gid):
            arrived[uid] = time.monotonic()
            return


async def group_message(port: int, args: argparse.Namespace) -> None:
    started = time.monotonic()
    gid, members = await asyncio.to_thread(make_group, Uids(), args.group_members)
    print(f"group: {len(members):,} members added in {time.monotonic() - started:.1f} s")
    step = max(1, (len(members) - 1) // args.online) if args.online else 1
    online = members[1::step][: args.online]
    sockets = await open_uids(port, online, "group")
    workers = start_workers(1, "messaging")
    arrived: dict[int, float] = {}
    readers = [
        asyncio.create_task(receive_group(ws, gid, arrived, uid))
        for ws, uid in zip(sockets, online, strict=True)
    ]
    try:
        await asyncio.sleep(5)  # the worker imports and connects
        since_ms = int(time.time() * 1000)
        returned = await asyncio.to_thread(group_send, gid, members[0])
        deadline = time.monotonic() + 60
        while len(arrived) < len(online) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await asyncio.sleep(1)  # the task's last chunks (members after the last connected one)
    finally:
        for proc in workers:
            proc.terminate()
            proc.wait(timeout=60)
    for task in readers:
        task.cancel()
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    logged = await asyncio.to_thread(logged_since, members, since_ms)
    waits = [(at - returned) * 1000 for at in arrived.values()]
    print(f"group message: {len(members):,} members, {len(online):,} connected; one worker")
    missing = len(online) - len(arrived)
    print(f"  frames received {len(arrived):,} of {len(online):,}, missing {missing}")
    print(f"  members whose live log got it: {logged:,} (the connected: {len(online):,})")
    if waits:
        print(f"  from the send returning to the frame: {spread(waits)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=2_000)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--api-workers", type=int, default=2)
    parser.add_argument("--campaign", action="store_true", help="mode 3 instead of 1 and 2")
    parser.add_argument("--recipients", type=int, default=100_000)
    parser.add_argument("--online", type=int, default=5_000)
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes")
    parser.add_argument("--batch-size", type=int, default=4_000)
    parser.add_argument("--push-rates", default="", help="comma-separated pushes/s: mode 4")
    parser.add_argument("--pushers", type=int, default=4, help="pusher processes in mode 4")
    parser.add_argument("--group-members", type=int, default=0, help="mode 5: the group's size")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the servers below on a kill
    token = prepare()
    port = free_port()
    gateway = start_gateway(port)
    api_port = free_port()
    alone = args.campaign or args.push_rates or args.group_members
    api = None if alone else start_api(api_port, args.api_workers)
    try:
        print(f"{os.cpu_count()} cores; one uvicorn gateway process (uvloop, httptools", end="")
        print(f" {' '.join(gateway_flags())}); the client on the same machine")
        if args.campaign:
            asyncio.run(campaign(port, args))
            return
        if args.push_rates:
            asyncio.run(push_rates(port, gateway.pid, args))
            return
        if args.group_members:
            asyncio.run(group_message(port, args))
            return
        if args.connections:
            asyncio.run(idle(port, gateway.pid, args.connections))
        if args.seconds:
            asyncio.run(latency(port, api_port, token, args))
    finally:
        for proc in (gateway, api):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)


if __name__ == "__main__":
    main()
