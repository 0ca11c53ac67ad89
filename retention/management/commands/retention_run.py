"""``manage.py retention_run [--dry-run] [--json] [--kind K[,K]]``

Ages out what is past its kind's horizon (RETENTION_*_DAYS; retention/services.py), the same
service the hourly beat task ``retention.run`` calls. ``--dry-run`` walks the same data and says
what would go, per kind, with counts, and changes nothing. ``--kind`` limits the run to some of
campaign_inbox, history, events, ledger. A table, or with ``--json`` the report as one object;
progress goes to stderr every few seconds. Bad input: one line on stderr, a non-zero exit.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from infra.cli import CommaList
from retention.selectors import RetentionError
from retention.services import KINDS, RetentionReport, retention_run

PROGRESS_EVERY_S = 2.0


def kind(text: str) -> str:
    if text not in KINDS:
        raise ValueError(text)
    return text


def render(report: RetentionReport) -> list[str]:
    head = "would go (dry run)" if report.dry_run else "went"
    lines = [f"retention at {report.now}: {head}"]
    for item in report.kinds:
        if not item.days:
            lines.append(f"  {item.kind:<15} kept for ever")
            continue
        counts = ", ".join(f"{n:,} {name.replace('_', ' ')}" for name, n in item.counts.items())
        lines.append(
            f"  {item.kind:<15} older than {item.cutoff} ({item.days} d): {counts or 'nothing'}"
        )
    return lines


class Command(BaseCommand):
    help = "Age out data past its retention (RETENTION_*_DAYS); --dry-run says what would go."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="count, change nothing")
        parser.add_argument("--json", action="store_true", help="the report as one JSON object")
        parser.add_argument(
            "--kind", action=CommaList, type=kind, help=f"some of {', '.join(KINDS)} [all]"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self._last = 0.0
        try:
            report = retention_run(
                dry_run=options["dry_run"], kinds=options["kind"] or KINDS, progress=self._progress
            )
        except RetentionError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(asdict(report)))
        else:
            self.stdout.write("\n".join(render(report)))

    def _progress(self, what: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._last < PROGRESS_EVERY_S and done != total:
            return
        self._last = now
        of = f" of {total:,}" if total else ""
        self.stderr.write(f"retention: {what} {done:,}{of}")
