"""``manage.py campaign_watch ID [--interval 0.5] [--exit-on-pause] [--timeout S]``

A live progress bar of one campaign (processed = delivered + skipped + failed, out of the planned
total; rate; ETA; status) until it is finished, cancelled or failed (exit 0); into a file or a
pipe, a plain line of the same instead, every 10 s and at each change of status. A pause prints its
reason and keeps watching (a budget pause resumes by itself), unless ``--exit-on-pause``. A store
that does not answer (MariaDB frozen, Redis restarting), as the watch starts or mid-way, is waited
out like a pause: one line says so, the bar shows ``waiting``, and the watch goes on once it
answers (``--timeout`` still holds).
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connections
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from bulk.models import Campaign, CampaignStatus
from bulk.selectors import campaign_progress
from infra.store_errors import store_unavailable

FINAL = (CampaignStatus.FINISHED, CampaignStatus.CANCELLED, CampaignStatus.FAILED)


def console_for(command: BaseCommand) -> Console:
    """A rich console on the command's real stream (Django's wrapper appends newlines)."""
    return Console(file=getattr(command.stdout, "_out", sys.stdout))


def _columns() -> tuple[Any, ...]:
    return (
        TextColumn("campaign {task.fields[id]} [bold]{task.fields[status]}[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}/s"),
        TextColumn("eta {task.fields[eta]}"),
    )


def _show(bar: Progress, task: TaskID, progress: dict[str, Any], campaign: Campaign) -> None:
    planned_total = campaign.total if campaign.planned or campaign.total else None
    bar.update(
        task,
        completed=campaign.processed,
        total=planned_total,
        status=progress["status"],
        rate=f"{progress['rate_per_s']:,.1f}",
        eta="—" if progress["eta_s"] is None else f"{progress['eta_s']:,.0f}s",
    )


def summary(campaign: Campaign) -> str:
    return (
        f"Campaign {campaign.pk} {campaign.status}: {campaign.delivered} delivered of "
        f"{campaign.total}; skipped {campaign.skipped_quota} quota, {campaign.skipped_blocked} "
        f"blocked, {campaign.skipped_invalid} invalid, {campaign.skipped_duplicate} duplicate; "
        f"{campaign.failed} failed."
    )


def watch(
    campaign_id: int,
    *,
    console: Console,
    interval: float = 0.5,
    exit_on_pause: bool = False,
    timeout: float | None = None,
) -> Campaign:
    """Poll the campaign and redraw the bar until it ends (or pauses, with ``exit_on_pause``)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    reported_pause = ""
    polled = _until_answered(campaign_id, console, interval, deadline)  # before any bar
    lines = PlainLines(console)
    with Progress(*_columns(), console=console) as bar:
        task = bar.add_task("", id=campaign_id, status="", rate="0", eta="—", total=None)
        waiting = functools.partial(bar.update, task, status="waiting")
        while True:
            campaign, progress = polled
            _show(bar, task, progress, campaign)
            lines.show(campaign, progress)
            if campaign.status in FINAL:
                break
            if campaign.status == CampaignStatus.PAUSED:
                if campaign.pause_reason != reported_pause:
                    reported_pause = campaign.pause_reason
                    reason = reported_pause or "no reason given"
                    console.print(f"Campaign {campaign_id} paused: {reason}", soft_wrap=True)
                if exit_on_pause:
                    break
            else:
                reported_pause = ""
            _check_deadline(deadline, campaign_id, f"still {campaign.status}")
            time.sleep(interval)
            polled = _until_answered(campaign_id, console, interval, deadline, waiting)
    console.print(summary(campaign), soft_wrap=True)  # one line, however narrow the terminal
    return campaign


OUTAGE = "a store is not answering (MariaDB or Redis); still watching."
PLAIN_EVERY_S = 10.0


class PlainLines:
    """Where no bar can be drawn (the output is a file or a pipe: a log, cron, CI), a line of
    progress at the first poll, at each change of status and every PLAIN_EVERY_S seconds between,
    until the summary; without it such a watch printed nothing until the campaign ended."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.console, self.clock = console, clock
        self.on = not console.is_terminal
        self.status = ""
        self.at = 0.0

    def show(self, campaign: Campaign, progress: dict[str, Any]) -> None:
        now = self.clock()
        if not self.on or campaign.status in FINAL:  # the summary line follows
            return
        if campaign.status == self.status and now - self.at < PLAIN_EVERY_S:
            return
        self.status, self.at = campaign.status, now
        self.console.print(progress_line(campaign, progress), soft_wrap=True)


def progress_line(campaign: Campaign, progress: dict[str, Any]) -> str:
    """``Campaign 7 running: 120,000 of 1,000,000 (12.0%), 35,123.4/s, eta 25 s``."""
    done, total = campaign.processed, campaign.total
    if campaign.planned:
        of = f"{total:,} ({100 * done / total:.1f}%)" if total else "0"
    else:
        of = f"{total:,} planned so far" if total else "?"
    eta = "—" if progress["eta_s"] is None else f"{progress['eta_s']:,.0f} s"
    rate = f"{progress['rate_per_s']:,.1f}/s"
    return f"Campaign {campaign.pk} {campaign.status}: {done:,} of {of}, {rate}, eta {eta}"


def _until_answered(
    campaign_id: int,
    console: Console,
    interval: float,
    deadline: float | None,
    waiting: Callable[[], object] = lambda: None,
) -> tuple[Campaign, dict[str, Any]]:
    """The next poll that the stores answer (a missing campaign: CommandError). A store that does
    not answer is said once, waited out (``waiting`` shows it, ``--timeout`` holds), and its
    answering again is said too: as the watch starts and mid-way alike."""
    polled = _poll(campaign_id)
    if polled is not None:
        return polled
    console.print(f"Campaign {campaign_id}: {OUTAGE}", soft_wrap=True)
    while polled is None:
        waiting()
        _check_deadline(deadline, campaign_id, "waiting for the stores")
        time.sleep(interval)
        polled = _poll(campaign_id)
    console.print(f"Campaign {campaign_id}: the stores answer again.", soft_wrap=True)
    return polled


def _poll(campaign_id: int) -> tuple[Campaign, dict[str, Any]] | None:
    """The campaign and its progress; None while a store does not answer (the database
    connections are dropped, so the next poll connects afresh: one that lost its server stays
    broken)."""
    try:
        campaign = Campaign.objects.filter(pk=campaign_id).first()
        if campaign is None:
            raise CommandError(f"No campaign {campaign_id}.")
        return campaign, campaign_progress(campaign)
    except Exception as exc:
        if not store_unavailable(exc):
            raise
        connections.close_all()  # not close_old_connections: its ping would wait as well
        return None


def _check_deadline(deadline: float | None, campaign_id: int, state: str) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise CommandError(f"Campaign {campaign_id} {state} at the timeout.")


MAX_ID = (1 << 63) - 1


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:  # also refuses nan
        raise ValueError(text)
    return value


def campaign_id(text: str) -> int:
    value = int(text)
    if not 0 < value <= MAX_ID:
        raise ValueError(text)
    return value


class Command(BaseCommand):
    help = "Watch a campaign's progress until it finishes, is cancelled or fails."
    # Django's start-up checks (infra/checks.py) would end the watch when a store does not answer
    # as it starts; the watch waits that out as it does mid-way. They still run when the database
    # fails otherwise (a wrong password, no such database), to name the setting and the address.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("campaign_id", type=campaign_id)
        parser.add_argument("--interval", type=positive_float, default=0.5, help="seconds")
        parser.add_argument("--exit-on-pause", action="store_true")
        parser.add_argument("--timeout", type=positive_float, help="give up after N seconds")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            watch(
                options["campaign_id"],
                console=console_for(self),
                interval=options["interval"],
                exit_on_pause=options["exit_on_pause"],
                timeout=options["timeout"],
            )
        except DatabaseError as exc:  # not an outage (those are waited out): what the checks say
            self.check()
            raise CommandError(f"The database refused the watch's query: {exc}") from exc
