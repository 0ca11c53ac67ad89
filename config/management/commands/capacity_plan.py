"""``manage.py capacity_plan --messages-per-year 150e9 --users 300e6 --peak-fanout 30000 ...``:
the cluster each tier needs, with the arithmetic shown (``config/capacity.py``)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config import capacity

REQUIRED = {"messages_per_year", "users", "peak_fanout"}
HELP = {
    "messages_per_year": "inbox entries written per year (a campaign writes one per recipient)",
    "users": "users holding unread counters",
    "peak_fanout": "campaign recipients per second at peak, both channels",
    "entry_bytes": "bytes per inbox entry instead of the measured figure",
}


class Command(BaseCommand):
    help = "Print the cluster each tier needs for a load, from figures measured on this machine."

    def add_arguments(self, parser: CommandParser) -> None:
        for f in fields(capacity.Load):
            kind = int if f.type in ("int", int) else float
            parser.add_argument(
                f"--{f.name.replace('_', '-')}",
                type=kind,
                required=f.name in REQUIRED,
                default=None if f.name in REQUIRED else f.default,
                help=HELP.get(f.name, f"[default {f.default}]"),
            )
        parser.add_argument("--measured", type=Path, default=capacity.MEASURED_FILE)

    def handle(self, *args: Any, **options: Any) -> None:
        load = capacity.Load(**{f.name: options[f.name] for f in fields(capacity.Load)})
        try:
            load.check()
            measured = capacity.load_measured(options["measured"])
            self.stdout.write(capacity.render(capacity.plan(load, measured), measured))
        except capacity.PlanError as exc:
            raise CommandError(str(exc)) from None
