"""``manage.py capacity_plan --messages-per-year 150e9 --users 300e6 --peak-fanout 30000 ...``:
the cluster each tier needs, with the arithmetic shown (``infra/capacity.py``)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from infra import capacity

REQUIRED = {"messages_per_year", "users", "peak_fanout"}
# The configured retention policy (0 = kept for ever: no cap).
POLICY = {
    "campaign_retention_days": "RETENTION_CAMPAIGN_INBOX_DAYS",
    "history_retention_days": "RETENTION_HISTORY_DAYS",
    "events_retention_days": "RETENTION_EVENTS_DAYS",
}
HELP = {
    "messages_per_year": "inbox entries written per year (a campaign writes one per recipient)",
    "users": "users holding unread counters",
    "peak_fanout": "campaign recipients per second at peak, both channels",
    "peak_sends": "1:1 sends per second at peak (writes on the MySQL primary) [default 5000]",
    "entry_bytes": "bytes per inbox entry instead of the measured figure",
    "campaign_share": "share of the entries that are campaign copies [none]",
    **{f: f"days kept, 0 = for ever [configured: {s}]" for f, s in POLICY.items()},
}


def default(name: str, fallback: Any) -> Any:
    setting = POLICY.get(name)
    return getattr(settings, setting) if setting else fallback


def days(value: float | None) -> float | None:
    return value or None  # 0: kept for ever


class Command(BaseCommand):
    help = "Print the cluster each tier needs for a load, from figures measured on this machine."

    def add_arguments(self, parser: CommandParser) -> None:
        for f in fields(capacity.Load):
            kind = int if f.type in ("int", int) else float
            parser.add_argument(
                f"--{f.name.replace('_', '-')}",
                type=kind,
                required=f.name in REQUIRED,
                default=None if f.name in REQUIRED else default(f.name, f.default),
                help=HELP.get(f.name, f"[default {f.default}]"),
            )
        parser.add_argument("--measured", type=Path, default=capacity.MEASURED_FILE)

    def handle(self, *args: Any, **options: Any) -> None:
        given = {f.name: options[f.name] for f in fields(capacity.Load)}
        load = capacity.Load(**{**given, **{f: days(given[f]) for f in POLICY}})
        try:
            load.check()
            measured = capacity.load_measured(options["measured"])
            self.stdout.write(capacity.render(capacity.plan(load, measured), measured))
        except capacity.PlanError as exc:
            raise CommandError(str(exc)) from None
