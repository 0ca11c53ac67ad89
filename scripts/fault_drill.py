"""The operator's fault drill: a campaign on a live server through each store frozen or killed.

    python scripts/fault_drill.py [--recipients 20000] [--hold 30]
        [--faults redis,mariadb,hbase-thrift,replica,regionserver] [--backend hbase] [--clients 1]
    python scripts/fault_drill.py --redis-cluster --faults redis-master

What an operator tries before trusting a deployment (and what issue 20 is judged by), on the
services of ``scripts/services up``, in a database, Redis databases and HBase table prefix of its
own (``missive_drill``, 8/9, ``drill``). It starts the processes as docs/operations.md runs them:
the API (gunicorn with the gateway worker, 2 processes), one Celery worker on the ``messaging``
and ``bulk.daily`` queues and one ``celery beat``. For each fault, in turn:

1. a business account with ``--recipients`` followers (every 101st has blocked it) launches a
   daily campaign through ``POST /campaigns`` (the channel paced so that it lasts ~40 s);
2. client threads (``--clients`` per endpoint) call the API without pause for the whole
   campaign: a follower's unread counts, their history with the sender, their conversation
   list, the campaign's progress, and 1:1 sends (each retried with its ``client_msg_id`` until
   accepted), each request with a 30-s client timeout;
3. once a quarter is delivered, the store is frozen (``scripts/services freeze``: SIGSTOP,
   connections open, nothing answers) or, for ``replica`` and ``regionserver`` (the second of
   HBase's three), killed with -9; ``--hold`` seconds later it is thawed (started again);
4. once the campaign has finished, every recipient is checked: one inbox entry from the sender,
   one conversation, unread 1; no blocked follower reached; every accepted 1:1 send stored once.

``--redis-cluster`` puts every data key on the Redis Cluster of ``scripts/services`` (:7000-7005;
its one database, shared with the cluster pass of ``make test``: not at the same time) and adds
the fault ``redis-master``: the master holding the counters' epoch (a key every user's unread
read shares) is frozen, its replica is promoted meanwhile, and the master rejoins as a replica
(``scripts/services start redis-cluster``). The answers for users whose own keys are on that
master are counted apart from everyone else's (rows "... its" and "... rest").

Per fault it prints the answers given while the store was out, per endpoint: how many, by
status, the slowest and the 99th percentile, and how many went unanswered for 10 s or more; then
the same after it came back, and the checks. Exits non-zero when a check fails, a request got a
500 or went unanswered for 10 s.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchkit import create_database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PORT = 8791
DRILL_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DJANGO_SECRET_KEY": "drill-only-not-secret-" + "x" * 40,  # DEBUG off needs one
    "DJANGO_DEBUG": "0",
    "DATABASE_URL": "mysql://missive:missive@127.0.0.1:3306/missive_drill",
    "DATABASE_REPLICA_URL": "mysql://missive:missive@127.0.0.1:3307/missive_drill",
    "REDIS_URL": "redis://127.0.0.1:6379/8",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/9",
    "HBASE_TABLE_PREFIX": "drill",
    "REDIS_CLUSTER": "0",
}
CLUSTER = "--redis-cluster" in sys.argv  # read before Django's settings are
if CLUSTER:
    DRILL_ENV.update(REDIS_CLUSTER="1", REDIS_URL="redis://127.0.0.1:7000/0")
for _name in ("LIVE_REDIS_URL", "CELERY_RESULT_BACKEND", "BULK_BATCH_SIZE"):
    os.environ.pop(_name, None)  # the test environment's, if any: the drill's own stores only
os.environ.update(DRILL_ENV)
UNANSWERED_S = 10.0
LOGS = ROOT / "var" / "drill"  # api.log, worker.log, beat.log
ENDPOINTS = ("unread", "history", "conversations", "campaign", "send")
FAULTS = {  # name: (scripts/services action down, action up, service)
    "redis": ("freeze", "thaw", "redis"),
    "mariadb": ("freeze", "thaw", "mariadb"),
    "hbase-thrift": ("freeze", "thaw", "hbase-thrift"),
    "replica": ("kill", "start", "mariadb-replica"),
    "regionserver": ("kill", "start", "hbase-regionserver:2"),  # one of three, its regions move
    # one of three frozen (a long GC pause): its ZooKeeper session ends, its regions move, and
    # once thawed it finds itself dead and exits (scripts/services restarts it: hbase-heal). Not
    # in the default list: on the local filesystem scripts/services runs HBase on, nothing fences
    # the frozen server (HDFS's lease recovery does), and the writes it acknowledges on waking,
    # after its WAL was split, are lost (docs/operations.md, "When a store goes down"), and
    # hbase:meta may be left placing regions on the dead instance (BENCHMARKS.md): a drill HBase
    # to wipe afterwards (scripts/services stop hbase; rm -r var/services/hbase/data)
    "regionserver-freeze": ("freeze", "thaw", "hbase-regionserver:2"),
    "redis-master": ("freeze", "thaw", "redis-cluster-node"),  # --redis-cluster: :PORT at run time
}
PER_USER = ("unread", "history", "conversations")
SHORT = {"conversations": "convs"}


create_database("missive_drill")

import django  # noqa: E402

django.setup()

from django.db import OperationalError, connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from api.clients import api_client_create  # noqa: E402
from bulk.models import Campaign, ChannelSetting, SenderPolicy  # noqa: E402
from config.celery import app  # noqa: E402
from infra.redis import get_redis  # noqa: E402
from messaging.models import Account, Block, Conversation, Follow  # noqa: E402
from storage.counters import keys as unread_keys  # noqa: E402
from storage.inbox.hbase import TABLE as HBASE_TABLE  # noqa: E402


# -- the processes ---------------------------------------------------------------------------------
def services(action: str, name: str) -> None:
    subprocess.run([str(ROOT / "scripts" / "services"), action, name], cwd=ROOT, check=True)


def start(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    return subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=out, start_new_session=True)


@contextmanager
def deployment(backend: str) -> Iterator[None]:
    """The API, one worker and beat, as docs/operations.md runs them; stopped on the way out."""
    LOGS.mkdir(parents=True, exist_ok=True)
    os.environ["INBOX_BACKEND"] = backend
    py = sys.executable
    procs = [
        start(
            [
                py,
                "-m",
                "gunicorn",
                "config.asgi:application",
                "-k",
                "live.gateway_worker.GatewayWorker",
                "-w",
                "2",
                "-b",
                f"127.0.0.1:{PORT}",
                "--no-control-socket",
            ],
            LOGS / "api.log",
        ),
        start(
            [
                py,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "-Q",
                "messaging,bulk.daily",
                "-c",
                "2",
                "-n",
                "drill@%h",
                "--without-gossip",
                "--without-mingle",
            ],
            LOGS / "worker.log",
        ),
        start(
            [py, "-m", "celery", "-A", "config", "beat", "--schedule", str(LOGS / "beat-schedule")],
            LOGS / "beat.log",
        ),
    ]
    try:
        wait_until(lambda: _answers("/healthz"), 60, "the API did not start")
        yield
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def _answers(path: str) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=2)
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except OSError:
        return False


def wait_until(check: Callable[[], bool], timeout: float, why: str, every: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OperationalError:  # this process's own connection, through a MariaDB fault
            connection.close()
        time.sleep(every)
    raise SystemExit(f"fault drill: {why} within {timeout:.0f} s")


# -- the data --------------------------------------------------------------------------------------
@dataclass
class Scene:
    sender: int
    followers: list[int]
    blocked: set[int]
    tokens: dict[str, str]
    talkers: tuple[int, int]  # a 1:1 sender and receiver

    @property
    def expected(self) -> set[int]:
        return set(self.followers) - self.blocked


def prepare() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("hbase_init", verbosity=0)
    get_redis().flushdb()
    app.control.purge()


def scene(n: int, first: int) -> Scene:
    sender, talker, listener = first, first + n + 1, first + n + 2
    followers = list(range(first + 1, first + n + 1))
    Account.objects.create(uid=sender, kind="business", name=f"drill shop {sender}")
    SenderPolicy.objects.create(sender_uid=sender, per_receiver_limit=1)
    now = timezone.now()
    Follow.objects.bulk_create(
        [Follow(follower_uid=u, followee_uid=sender, followed_at=now) for u in followers],
        batch_size=5000,
    )
    blocked = set(followers[::101])
    Block.objects.bulk_create([Block(owner_uid=u, blocked_uid=sender) for u in blocked])
    tokens = {
        "campaigns": api_client_create(
            name=f"drill-shop-{sender}", scopes=["campaigns"], sender_uids=[sender]
        )[1],
        "inbox": api_client_create(name=f"drill-app-{sender}", scopes=["inbox", "users"])[1],
    }
    return Scene(sender, followers, blocked, tokens, (talker, listener))


# -- the clients -----------------------------------------------------------------------------------
@dataclass
class Answer:
    at: float
    endpoint: str
    status: int  # 0: no answer within the client's timeout (or the connection failed)
    seconds: float
    uid: int = 0  # the user read (unread, history, conversations)
    request_id: str = ""  # the API's X-Request-ID: its lines in api.log


@dataclass
class Clients:
    scene: Scene
    campaign_id: int = 0
    answers: list[Answer] = field(default_factory=list)
    accepted: set[str] = field(default_factory=set)
    stop: threading.Event = field(default_factory=threading.Event)
    sends: Iterator[int] = field(default_factory=itertools.count)

    def run(self, n: int) -> list[threading.Thread]:
        """``n`` threads per endpoint, each calling its endpoint without pause."""
        threads = [
            threading.Thread(target=self._loop, args=(kind, i, n), daemon=True)
            for kind in ENDPOINTS
            for i in range(n)
        ]
        for thread in threads:
            thread.start()
        return threads

    def _loop(self, kind: str, i: int, n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        follower = itertools.cycle(sorted(self.scene.expected)[i::n])
        while not self.stop.is_set():
            conn = self._one(conn, kind, next(follower))
            time.sleep(0.02)

    def _one(
        self, conn: http.client.HTTPConnection, kind: str, uid: int
    ) -> http.client.HTTPConnection:
        s = self.scene
        if kind == "send":
            return self._send(conn)
        token, path = (
            s.tokens["inbox"],
            {
                "unread": f"/api/v1/users/{uid}/unread",
                "history": f"/api/v1/users/{uid}/conversations/{s.sender}/messages",
                "conversations": f"/api/v1/users/{uid}/conversations?limit=20",
                "campaign": f"/api/v1/campaigns/{self.campaign_id}",
            }[kind],
        )
        if kind == "campaign":
            token = s.tokens["campaigns"]
        status, seconds, conn, rid = request(conn, "GET", path, token, None)
        self.answers.append(Answer(time.time(), kind, status, seconds, uid, rid))
        return conn

    def _send(self, conn: http.client.HTTPConnection) -> http.client.HTTPConnection:
        """One 1:1 send, retried with the same client_msg_id until the API accepts it."""
        talker, listener = self.scene.talkers
        msg_id = f"drill-{talker}-{next(self.sends)}"
        body = {
            "sender_uid": talker,
            "receiver_uid": listener,
            "client_msg_id": msg_id,
            "content": {"type": "text", "text": msg_id},
        }
        while True:
            status, seconds, conn, rid = request(
                conn, "POST", "/api/v1/messages", self.scene.tokens["inbox"], body
            )
            self.answers.append(Answer(time.time(), "send", status, seconds, request_id=rid))
            if status in (200, 201):
                self.accepted.add(msg_id)
                return conn
            if self.stop.is_set() and status != 503 and status != 0:
                return conn
            time.sleep(0.2)


def request(
    conn: http.client.HTTPConnection, method: str, path: str, token: str, body: Any
) -> tuple[int, float, http.client.HTTPConnection, str]:
    """(status, seconds, the connection to use next, the answer's X-Request-ID or "")."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    started = time.perf_counter()
    rid = ""
    try:
        conn.request(method, path, json.dumps(body) if body else None, headers)
        response = conn.getresponse()
        response.read()
        status, rid = response.status, response.getheader("X-Request-ID") or ""
    except (OSError, http.client.HTTPException):
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        status = 0
    return status, time.perf_counter() - started, conn, rid


# -- one fault -------------------------------------------------------------------------------------
@dataclass
class Outcome:
    fault: str
    down_at: float
    up_at: float
    answers: list[Answer]
    problems: list[str]
    finish_s: float
    its_users: set[int] = field(default_factory=set)  # redis-master: users on the frozen master


def launch(scene: Scene) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    body = {
        "sender_uid": scene.sender,
        "content": {"type": "text", "text": f"drill {scene.sender}"},
        "audience": {"type": "followers"},
        "channel": "daily",
    }
    headers = {
        "Authorization": f"Bearer {scene.tokens['campaigns']}",
        "Content-Type": "application/json",
        "Idempotency-Key": f"drill-{scene.sender}",
    }
    conn.request("POST", "/api/v1/campaigns", json.dumps(body), headers)
    response = conn.getresponse()
    answer = json.loads(response.read())
    if response.status != 201:
        raise SystemExit(f"fault drill: the campaign was not created: {response.status} {answer}")
    return int(answer["id"])


def drill(fault: str, args: argparse.Namespace, first: int) -> Outcome:
    down, up, name = FAULTS[fault]
    s = scene(args.recipients, first)
    clients = Clients(s)
    clients.campaign_id = launch(s)
    started = time.monotonic()
    threads = clients.run(args.clients)
    quarter = len(s.expected) // 4
    wait_until(lambda: delivered(clients.campaign_id) >= quarter, 120, "a quarter was not sent")
    its_users: set[int] = set()
    if fault == "redis-master":
        port = master_port(unread_keys.EPOCH)
        name, its_users = f"{name}:{port}", {u for u in s.expected if user_port(u) == port}
    down_at = time.time()
    print(f"  {fault}: {down} {name} at {delivered(clients.campaign_id):,} delivered", flush=True)
    services(down, name)
    try:
        time.sleep(args.hold)
    finally:
        services(up, name)
        if fault == "redis-master":
            services("start", "redis-cluster")  # six nodes again, the old master a replica
    up_at = time.time()
    wait_until(lambda: finished(clients.campaign_id), 600, "the campaign did not finish")
    finish_s = time.monotonic() - started
    time.sleep(2)
    clients.stop.set()
    for thread in threads:
        thread.join(timeout=60)
    problems = check(s, clients)
    return Outcome(fault, down_at, up_at, list(clients.answers), problems, finish_s, its_users)


def master_port(key: str) -> int:
    client: Any = get_redis()
    return int(client.get_node_from_key(key).port)


def user_port(uid: int) -> int:
    return master_port(unread_keys.unread(uid))


def delivered(campaign_id: int) -> int:
    return int(Campaign.objects.get(pk=campaign_id).delivered)


def finished(campaign_id: int) -> bool:
    return str(Campaign.objects.get(pk=campaign_id).status) == "finished"


def check(s: Scene, clients: Clients) -> list[str]:
    """Every recipient exact; every accepted 1:1 send stored once."""
    problems = []
    campaign = Campaign.objects.get(pk=clients.campaign_id)
    want = (len(s.expected), len(s.blocked), 0)
    got = (campaign.delivered, campaign.skipped_blocked, campaign.failed)
    if got != want:
        problems.append(f"campaign delivered/blocked/failed {got}, expected {want}")
    owners = inbox_owners(s.sender)
    if sorted(owners) != sorted(s.expected):
        extra, missing = len(owners) - len(set(owners)), len(s.expected - set(owners))
        problems.append(f"inbox: {missing} recipients without the message, {extra} duplicates")
    conversations = set(
        Conversation.objects.filter(peer_uid=s.sender).values_list("owner_uid", flat=True)
    )
    if conversations != s.expected:
        problems.append(f"conversations: {len(conversations ^ s.expected)} wrong")
    pipe = get_redis().pipeline(transaction=False)
    for uid in sorted(s.expected):
        pipe.hget(unread_keys.unread(uid), f"p:{s.sender}")
    wrong = sum(1 for value in pipe.execute() if value != b"1")
    if wrong:
        problems.append(f"{wrong} recipients with unread != 1")
    problems += sends_stored_once(s, clients.accepted)
    return problems


def inbox_owners(sender: int) -> list[int]:
    from infra import hbase

    if os.environ["INBOX_BACKEND"] == "sql":
        with connection.cursor() as cur:
            cur.execute("SELECT owner_uid FROM messaging_inbox WHERE peer_uid = %s", [sender])
            return [int(row[0]) for row in cur.fetchall()]
    peer = sender.to_bytes(8, "big")

    def scan(conn: Any) -> list[int]:
        rows = conn.table(HBASE_TABLE).scan(filter=b"KeyOnlyFilter()", batch_size=5000)
        return [int.from_bytes(k[1:9], "big") for k, _ in rows if k[9:17] == peer]

    return list(hbase.call(scan))


def sends_stored_once(s: Scene, accepted: set[str]) -> list[str]:
    talker, listener = s.talkers
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    texts: list[str] = []
    path = f"/api/v1/users/{listener}/conversations/{talker}/messages?limit=100"
    cursor = None
    while True:
        status, page = get_json(conn, path + (f"&before={cursor}" if cursor else ""), s)
        if status != 200:
            return [f"history of the 1:1 sends answered {status}"]
        texts += [m["content"]["text"] for m in page["results"] if m["content"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    problems = []
    if len(texts) != len(set(texts)):
        problems.append(f"1:1 sends: {len(texts) - len(set(texts))} stored twice")
    if missing := accepted - set(texts):
        problems.append(f"1:1 sends: {len(missing)} accepted but not stored")
    return problems


def get_json(conn: http.client.HTTPConnection, path: str, s: Scene) -> tuple[int, Any]:
    conn.request("GET", path, headers={"Authorization": f"Bearer {s.tokens['inbox']}"})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


# -- the report ------------------------------------------------------------------------------------
def report(outcome: Outcome, hold: float) -> list[str]:
    print(
        f"  {outcome.fault}: out for {outcome.up_at - outcome.down_at:.0f} s; campaign finished "
        f"{outcome.finish_s:.0f} s after its launch"
    )
    bad: list[str] = []
    for phase, lo, hi in (
        ("while out", outcome.down_at, outcome.up_at),
        ("after", outcome.up_at, float("inf")),
    ):
        print(
            f"    {phase:13} {'requests':>8} {'200/201':>8} {'503':>6} {'other':>6} "
            f"{'no answer':>9} {'p99 s':>7} {'max s':>7} {'>=1 s':>6} {'>=10 s':>7}"
            + (f" {'last 503':>9}" if phase == "after" else "")
        )
        for endpoint, mine in rows(outcome, lo, hi):
            ok = sum(1 for a in mine if a.status in (200, 201))
            unavailable = sum(1 for a in mine if a.status == 503)
            none = sum(1 for a in mine if a.status == 0)
            other = len(mine) - ok - unavailable - none
            seconds = sorted(a.seconds for a in mine)
            p99 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.99))]
            slow = sum(1 for a in mine if a.seconds >= UNANSWERED_S)
            waited = sum(1 for a in mine if a.seconds >= 1)  # a timeout, not a slow answer
            print(
                f"    {endpoint:13} {len(mine):8,} {ok:8,} {unavailable:6,} {other:6,} "
                f"{none:9,} {p99:7.2f} {seconds[-1]:7.2f} {waited:6,} {slow:7,}"
                + (f" {_last_503(mine, outcome.up_at):>9}" if phase == "after" else "")
            )
            fives = sum(1 for a in mine if a.status >= 500 and a.status != 503)
            if fives or none or slow:
                bad.append(
                    f"{outcome.fault} {phase} {endpoint}: {fives} 5xx other than 503, "
                    f"{none} unanswered, {slow} took >= {UNANSWERED_S:.0f} s"
                )
    slowest(outcome)
    verdict = "; ".join(outcome.problems) if outcome.problems else "every recipient exact"
    print(f"    checks: {verdict}", flush=True)
    return bad + [f"{outcome.fault}: {p}" for p in outcome.problems]


def slowest(outcome: Outcome) -> None:
    """The slowest answer while the store was out, and what the API logged for its request."""
    out = [a for a in outcome.answers if outcome.down_at <= a.at < outcome.up_at]
    if not out:
        return
    a = max(out, key=lambda answer: answer.seconds)
    print(f"    slowest: {a.endpoint} {a.status or 'no answer'} after {a.seconds:.2f} s", end="")
    print(f", request {a.request_id}" if a.request_id else "")
    for line in logged(a.request_id)[:6]:
        print(f"      {line}")


def logged(request_id: str) -> list[str]:
    """api.log's lines of one request: time, logger and message."""
    if not request_id or not (LOGS / "api.log").exists():
        return []
    found = []
    with open(LOGS / "api.log", encoding="utf-8", errors="replace") as log:
        for line in log:
            if request_id not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            found.append(f"{record['time'][11:23]} {record['logger']}: {record['message'][:110]}")
    return found


def rows(outcome: Outcome, lo: float, hi: float) -> Iterator[tuple[str, list[Answer]]]:
    """Each endpoint's answers in [lo, hi); per-user endpoints split in two when a cluster master
    was frozen: its users' and the others'."""
    for endpoint in ENDPOINTS:
        mine = [a for a in outcome.answers if a.endpoint == endpoint and lo <= a.at < hi]
        if not outcome.its_users or endpoint not in PER_USER:
            if mine:
                yield endpoint, mine
            continue
        for label, on_it in (("its", True), ("rest", False)):
            part = [a for a in mine if (a.uid in outcome.its_users) is on_it]
            if part:
                yield f"{SHORT.get(endpoint, endpoint)} {label}", part


def _last_503(answers: list[Answer], up_at: float) -> str:
    """How long after the store came back the last 503 was asked ("-": none): the breaker's
    reset time and probe, as a client sees them."""
    last = max((a.at for a in answers if a.status == 503), default=None)
    return "-" if last is None else f"{last - up_at:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=20_000)
    parser.add_argument("--hold", type=float, default=30.0, help="seconds each store is out")
    parser.add_argument("--faults", default="", help="default: all but redis-master")
    parser.add_argument("--backend", choices=["hbase", "sql"], default="hbase")
    parser.add_argument("--clients", type=int, default=1, help="threads per endpoint")
    parser.add_argument(
        "--redis-cluster", action="store_true", help="data keys on the Redis Cluster (:7000)"
    )
    args = parser.parse_args()
    default = [f for f in FAULTS if f not in ("redis-master", "regionserver-freeze")]
    faults = [f for f in (args.faults or ",".join(default)).split(",") if f]
    if unknown := set(faults) - set(FAULTS):
        parser.error(f"unknown faults: {', '.join(sorted(unknown))} (known: {', '.join(FAULTS)})")
    if "redis-master" in faults and not args.redis_cluster:
        parser.error("the fault redis-master needs --redis-cluster")
    prepare()
    # paced so that a campaign lasts ~40 s: the fault lands in its middle
    ChannelSetting.objects.update_or_create(
        channel="daily", defaults={"rate_per_s": max(args.recipients // 40, 1), "batch_size": 250}
    )
    print(
        f"fault drill {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {len(faults)} "
        f"faults, each held {args.hold:.0f} s, a {args.recipients:,}-follower daily campaign on "
        f"the {args.backend} inbox, {args.clients} client per endpoint without pause",
        flush=True,
    )
    bad: list[str] = []
    first = int(time.time()) * 100_000
    with deployment(args.backend):
        for n, fault in enumerate(faults):
            outcome = drill(fault, args, first + n * (args.recipients + 10))
            bad += report(outcome, args.hold)
    if bad:
        print("FAILED:\n  " + "\n  ".join(bad))
        raise SystemExit(1)
    print("every fault: no 500, no request unanswered for 10 s, every recipient exact")


if __name__ == "__main__":
    main()
