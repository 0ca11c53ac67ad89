"""Fan-out and 1:1 sends with 1 ms more on every round trip to MariaDB and Redis (toxiproxy).

    python scripts/bench_latency.py [--recipients 100000] [--repeat 3] [--realistic]
                                    [--sends 300] [--rate 20] [--profile]

Starts toxiproxy (``scripts/services start toxiproxy``, API on 127.0.0.1:8474) and puts one proxy
in front of each store Missive talks to on the SQL inbox: the MariaDB primary (3306), its replica
(3307) and the Redis server (6379), which holds the data databases and the Celery broker's (one
server, one proxy). HBase is not proxied (the SQL inbox's fan-out does not write it). The
"1 ms toxic" is a toxiproxy ``latency`` toxic of 1 ms, no jitter, on the **downstream** stream
(store to Missive) of every proxy: each answer comes 1 ms later, so each round trip pays 1 ms
(toxiproxy's latency is whole milliseconds: 0.5 ms a direction cannot be asked for).

In one run, three conditions side by side:

- **direct**: Missive pointed straight at the stores;
- **proxy**: through the proxies, no toxic (the proxy's own cost);
- **+1 ms**: through the proxies with the 1 ms toxic.

(a) fan-out: for each repeat, each condition in turn (the order turning from repeat to repeat),
one campaign on the SQL inbox to ``--recipients`` new recipients (bench_fanout.py's seeding,
workers, launch and exactly-once check, imported from it), on fresh ``celery worker`` processes
whose store URLs point at the stores or at the proxies, each warmed by an untimed campaign of one
batch per worker first. Timed from launch until ``finished``; medians and the ratios +1 ms /
direct (the goal: at least 0.8), +1 ms / proxy and proxy / direct, and the median of the same
ratios taken within each repeat. ``--profile`` adds each campaign's per-stage batch times
(BULK_PROFILE): a stage's extra ms under the toxic is about the round trips it waits for.

(b) 1:1 sends: ``POST /api/v1/messages`` against an API server (gunicorn + uvicorn workers, as
production runs it) pointed at the stores, then at the proxies without and with the toxic:
``--sends`` sends at a steady ``--rate`` from one sequential keep-alive client (after 20 untimed
warm-up sends), one sender to 50 receivers in turn; p50, p99 and max of the time to the answer
(the goal: p99 under 50 ms with the toxic).

Runs on the services of ``scripts/services up``, in bench_fanout's database (missive_bench) and
Redis databases 14/15. Its proxies are removed at the end, also on errors, Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
# The stores every process of this run uses when direct (forced, not defaulted: a test
# environment's DATABASE_URL names the tests' database).
DIRECT = {
    "DATABASE_URL": "mysql://missive:missive@127.0.0.1:3306/missive_bench",
    "DATABASE_REPLICA_URL": "mysql://missive:missive@127.0.0.1:3307/missive_bench",
    "REDIS_URL": "redis://127.0.0.1:6379/14",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15",
    "INBOX_BACKEND": "sql",
    "LOG_LEVEL": "ERROR",
}
os.environ.update(DIRECT)
os.environ.pop("CELERY_RESULT_BACKEND", None)  # the broker's, proxied with it
os.environ.pop("LIVE_REDIS_URL", None)  # the data Redis', proxied with it

import bench_fanout as fan  # noqa: E402  (sets Django up on the environment above)
from benchkit import prepare_stores, serve  # noqa: E402
from django.conf import settings  # noqa: E402

from api.clients import api_client_create  # noqa: E402
from api.models import ApiClient  # noqa: E402

TOXIPROXY = ("127.0.0.1", 8474)
STORES = {"mariadb": 3306, "mariadb-replica": 3307, "redis": 6379}
TOXIC = {
    "name": "bench_latency",
    "type": "latency",
    "stream": "downstream",
    "toxicity": 1.0,
    "attributes": {"latency": 1, "jitter": 0},
}
CONDITIONS = ("direct", "proxy", "+1 ms")
SENDER, FIRST_RECEIVER, RECEIVERS = 8_900_000_001, 8_000_000_001, 50


# -- toxiproxy -----------------------------------------------------------------------------------
def toxiproxy(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """One call to toxiproxy's HTTP API (as tests/api/test_network_faults.py makes them)."""
    conn = http.client.HTTPConnection(*TOXIPROXY, timeout=5)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None)
        response = conn.getresponse()
        raw = response.read()
        if response.status >= 300:
            raise RuntimeError(f"toxiproxy {method} {path}: {response.status} {raw!r}")
        return json.loads(raw) if raw else None
    finally:
        conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proxy_name(store: str) -> str:
    return f"bench-latency-{os.getpid()}-{store}"


@contextmanager
def proxies() -> Iterator[dict[int, int]]:
    """A proxy per store on a free loopback port: {store port: proxy port}; removed on the way
    out."""
    subprocess.run([str(ROOT / "scripts" / "services"), "start", "toxiproxy"], check=True)
    made, ports = [], {}
    try:
        for store, upstream in STORES.items():
            name, port = proxy_name(store), free_port()
            listen, target = f"127.0.0.1:{port}", f"127.0.0.1:{upstream}"
            toxiproxy("POST", "/proxies", {"name": name, "listen": listen, "upstream": target})
            made.append(name)
            ports[upstream] = port
        yield ports
    finally:
        for name in made:
            toxiproxy("DELETE", f"/proxies/{name}")
        print(f"removed the proxies {', '.join(made)}")


@contextmanager
def latency(names: list[str]) -> Iterator[None]:
    """The 1 ms toxic on every proxy (existing connections included), removed on the way out."""
    added = []
    try:
        for name in names:
            toxiproxy("POST", f"/proxies/{name}/toxics", TOXIC)
            added.append(name)
        yield
    finally:
        for name in added:
            toxiproxy("DELETE", f"/proxies/{name}/toxics/{TOXIC['name']}")


def through(env: dict[str, str], ports: dict[int, int]) -> dict[str, str]:
    """``env``'s store URLs with each store's port replaced by its proxy's."""
    routed = {}
    for name, url in env.items():
        parts = urlsplit(url)
        if parts.port in ports:
            netloc = parts.netloc.replace(f":{parts.port}", f":{ports[parts.port]}")
            url = urlunsplit(parts._replace(netloc=netloc))
        routed[name] = url
    return routed


@contextmanager
def environ(values: dict[str, str]) -> Iterator[None]:
    """``values`` in os.environ (what the processes started inside inherit), then back."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# -- (a) fan-out ---------------------------------------------------------------------------------
@dataclass
class Bench:
    args: argparse.Namespace
    env: dict[str, dict[str, str]]  # condition -> store URLs
    toxic: Callable[[], Any]  # the latency context manager, ready to enter
    base: int

    def next_audience(self, n: int) -> tuple[int, range]:
        sender, self.base = self.base, self.base + n + 1
        return sender, range(sender + 1, sender + 1 + n)


def campaign(bench: Bench, condition: str) -> float:
    """One timed campaign on fresh workers under ``condition``; its rate (recipients/s)."""
    args = bench.args
    sender, recipients = bench.next_audience(args.recipients)
    fan.seed(sender, recipients, args.realistic)
    if args.realistic:
        fan.seed_realistic(sender, recipients, args.workers)
    warm_sender, warm = bench.next_audience(args.workers * args.batch_size)
    fan.seed(warm_sender, warm)
    with environ(bench.env[condition]):
        procs = fan.start_workers("sql", args.workers, 1, profile=args.profile)
    try:
        with bench.toxic() if condition == "+1 ms" else _nothing():
            fan.run_campaign(warm_sender, None)
            seconds, done = fan.run_campaign(sender, None, args.realistic)
    finally:
        fan.stop(procs)
    problems = fan.verify("sql", sender, recipients, done)
    rate = len(recipients) / seconds
    print(
        f"  {condition:7} {rate:>9,.0f} recipients/s ({seconds:.2f} s) exactly-once: "
        f"{'OK' if not problems else 'FAILED ' + '; '.join(problems)}",
        flush=True,
    )
    if args.profile:
        fan.print_profile(done.pk)
    if problems:
        raise SystemExit(f"exactly-once check FAILED ({condition})")
    return rate


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def fanout(bench: Bench) -> None:
    rates: dict[str, list[float]] = {c: [] for c in CONDITIONS}
    for run in range(bench.args.repeat):
        print(f"(a) fan-out, repeat {run + 1} of {bench.args.repeat}", flush=True)
        # the order turns from repeat to repeat: a campaign runs on the tables and the buffer
        # pool the one before it left, and no condition should always come first or last
        for condition in CONDITIONS[run % 3 :] + CONDITIONS[: run % 3]:
            rates[condition].append(campaign(bench, condition))
    med = {c: statistics.median(r) for c, r in rates.items()}
    print(f"(a) fan-out, medians of {bench.args.repeat}:")
    for condition in CONDITIONS:
        runs = " · ".join(f"{r:,.0f}" for r in rates[condition])
        print(f"  {condition:7} {med[condition]:>9,.0f} recipients/s  (runs {runs})")
    print(
        f"  ratio +1 ms / direct {med['+1 ms'] / med['direct']:.2f} (goal >= 0.8), "
        f"+1 ms / proxy {med['+1 ms'] / med['proxy']:.2f}, "
        f"proxy / direct {med['proxy'] / med['direct']:.2f}"
    )
    paired = [(t / d, t / p) for d, p, t in zip(*(rates[c] for c in CONDITIONS), strict=True)]
    print(
        "  within each repeat, median: +1 ms / direct "
        f"{statistics.median(r for r, _ in paired):.2f}, +1 ms / proxy "
        f"{statistics.median(r for _, r in paired):.2f} (repeats: "
        + " · ".join(f"{r:.2f}/{q:.2f}" for r, q in paired)
        + ")"
    )


# -- (b) 1:1 sends -------------------------------------------------------------------------------
def start_api(port: int, workers: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """The HTTP API as production runs it (gunicorn, uvicorn workers) on ``env``'s stores."""
    cmd = [sys.executable, "-m", "gunicorn", "config.asgi:application", "-b", f"127.0.0.1:{port}"]
    cmd += ["-w", str(workers), "-k", "uvicorn_worker.UvicornWorker", "--log-level", "warning"]
    return serve(cmd, port, {**os.environ, **env}, "API server")


class Client:
    """One keep-alive connection, one send at a time."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.sent = 0

    def send(self) -> tuple[int, float]:
        """(status, seconds) of one POST /messages to the next receiver."""
        self.sent += 1
        body = {
            "sender_uid": SENDER,
            "receiver_uid": FIRST_RECEIVER + self.sent % RECEIVERS,
            "client_msg_id": f"lat-{time.time_ns()}",
            "content": {"type": "text", "text": f"latency {self.sent}"},
        }
        started = time.perf_counter()
        self.conn.request("POST", "/api/v1/messages", json.dumps(body), self.headers)
        response = self.conn.getresponse()
        response.read()
        return response.status, time.perf_counter() - started

    def close(self) -> None:
        self.conn.close()


def steady(client: Client, count: int, rate: float) -> list[tuple[int, float]]:
    started = time.perf_counter()
    answers = []
    for n in range(count):
        time.sleep(max(0.0, started + n / rate - time.perf_counter()))
        answers.append(client.send())
    return answers


def sends(port: int, token: str, args: argparse.Namespace, condition: str) -> list[float]:
    client = Client(port, token)
    try:
        for _ in range(20):
            client.send()
        answers = steady(client, args.sends, args.rate)
    finally:
        client.close()
    ms = [seconds * 1000 for _, seconds in answers]
    wrong = sum(status != 201 for status, _ in answers)
    cuts = statistics.quantiles(ms, n=100)
    print(
        f"  {condition:7} p50 {cuts[49]:5.1f} ms  p99 {cuts[98]:5.1f} ms  max {max(ms):6.1f} ms"
        f"  ({len(ms)} sends, {wrong} not 201)",
        flush=True,
    )
    return ms


def one_to_one(bench: Bench, token: str) -> None:
    args = bench.args
    print(
        f"(b) 1:1 sends: {args.sends} POST /api/v1/messages at {args.rate:g}/s, one sequential "
        f"keep-alive client, {args.api_workers} gunicorn/uvicorn workers, one sender to "
        f"{RECEIVERS} receivers in turn, 20 warm-up sends first",
        flush=True,
    )
    for servers in (("direct",), ("proxy", "+1 ms")):
        port = free_port()
        server = start_api(port, args.api_workers, bench.env[servers[0]])
        try:
            for condition in servers:
                with bench.toxic() if condition == "+1 ms" else _nothing():
                    sends(port, token, args, condition)
        finally:
            server.terminate()
            server.wait(timeout=30)


# -- main ----------------------------------------------------------------------------------------
def prepare(batch_size: int) -> str:
    """bench_fanout's setup (schema, clean Redis, trusted HBase index, empty queue, unthrottled
    daily channel), and an API client with the ``users`` scope: its token."""
    prepare_stores(batch_size)
    ApiClient.objects.filter(name="bench-latency").delete()
    return api_client_create(name="bench-latency", scopes=["users"])[1]


def conditions(args: argparse.Namespace, ports: dict[int, int]) -> None:
    routes = ", ".join(f"{store} {port} -> proxy {ports[port]}" for store, port in STORES.items())
    print(
        f"{os.cpu_count()} cores; proxies: {routes}; HBase not proxied\n"
        f"toxic (+1 ms): latency 1 ms, jitter 0, downstream (store -> Missive) on every proxy\n"
        f"(a) fan-out, SQL inbox: {args.recipients:,} recipients per campaign, new ones each "
        f"run, {args.workers} worker processes x 1, batches of {args.batch_size}, each worker set "
        f"fresh and warmed by an untimed campaign of {args.workers * args.batch_size:,}\n"
        f"    conditions: {fan.REALISTIC if args.realistic else fan.CHEAPEST}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--recipients", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="campaigns per condition (median)")
    parser.add_argument("--workers", type=int, default=4, help="worker processes")
    parser.add_argument("--batch-size", type=int, default=settings.BULK_BATCH_SIZE)
    parser.add_argument("--realistic", action="store_true", help="bench_fanout's --realistic")
    parser.add_argument("--profile", action="store_true", help="per-stage batch timings")
    parser.add_argument("--sends", type=int, default=300, help="timed 1:1 sends per condition")
    parser.add_argument("--rate", type=float, default=20, help="1:1 sends per second")
    parser.add_argument("--api-workers", type=int, default=2)
    parser.add_argument("--skip", choices=("fanout", "sends"), help="run only the other part")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the finally blocks clean up
    token = prepare(args.batch_size)
    with proxies() as ports:
        names = [proxy_name(store) for store in STORES]
        bench = Bench(
            args,
            {"direct": DIRECT, "proxy": through(DIRECT, ports), "+1 ms": through(DIRECT, ports)},
            lambda: latency(names),
            int(time.time()) * 10_000_000,
        )
        print(time.strftime("started %Y-%m-%d %H:%M:%S UTC", time.gmtime()))
        conditions(args, ports)
        if args.skip != "sends":
            one_to_one(bench, token)
        if args.skip != "fanout":
            fanout(bench)
        print(time.strftime("ended %H:%M:%S UTC", time.gmtime()))


if __name__ == "__main__":
    main()
