"""``manage.py content_partitions``: keep monthly content partitions ahead of the clock.

Adds the coming months (``--months``, default 3) by splitting them off ``pmax``; running it again
adds nothing. ``--drop-before YYYY-MM`` drops the partitions of colder months (archive them first).
On SQLite it says partitions are a MariaDB feature and exits 0.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from storage import partitions
from storage.partitions import Month


class Command(BaseCommand):
    help = "Add the coming monthly partitions of the content table (MariaDB); drop cold ones."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--months", type=int, default=3, help="keep partitions this many months ahead (0-120)"
        )
        parser.add_argument(
            "--drop-before", metavar="YYYY-MM", help="drop the partitions of months before this one"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        months, cutoff = self._validate(options["months"], options["drop_before"])
        if connection.vendor != "mysql":
            self.stdout.write(
                f"Content partitions are a MariaDB/MySQL feature; this {connection.vendor} "
                "database keeps messages in one table. Nothing to do."
            )
            return
        this_month = Month.of(datetime.now(UTC))
        with connection.cursor() as cursor:
            self._add(cursor, this_month, this_month.plus(months))
            if cutoff is not None:
                self._drop(cursor, cutoff)

    def _validate(self, months: int, drop_before: str | None) -> tuple[int, Month | None]:
        if not 0 <= months <= 120:
            raise CommandError(f"--months must be between 0 and 120, not {months}")
        if drop_before is None:
            return months, None
        try:
            cutoff = Month.parse(drop_before)
        except ValueError:
            msg = f"--drop-before must be YYYY-MM (e.g. 2026-01), not {drop_before!r}"
            raise CommandError(msg) from None
        if cutoff > Month.of(datetime.now(UTC)):
            raise CommandError(f"refusing to drop {cutoff} or later: it is not a cold month yet")
        return months, cutoff

    def _add(self, cursor: Any, this_month: Month, through: Month) -> None:
        if partitions.existing(cursor) is None:
            made = partitions.partition_table(cursor, this_month.plus(-1), through)
            self.stdout.write(f"partitioned {partitions.TABLE} by month: {_span(made)} and pmax")
            return
        added = partitions.add_months(cursor, through)
        for month in added:
            self.stdout.write(f"added {month.name} ({month}, msgkey < {month.bound})")
        if not added:
            newest = (partitions.existing(cursor) or [this_month])[-1]
            self.stdout.write(f"nothing to add: partitions run through {newest}")

    def _drop(self, cursor: Any, cutoff: Month) -> None:
        dropped = partitions.drop_before(cursor, cutoff)
        for month, rows in dropped:
            self.stdout.write(f"dropped {month.name} ({month}, {rows} messages)")
        if not dropped:
            self.stdout.write(f"nothing to drop before {cutoff}")


def _span(months: list[Month]) -> str:
    return f"{months[0].name}..{months[-1].name}" if months else "no months"
