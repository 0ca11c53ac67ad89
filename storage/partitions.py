"""Monthly RANGE partitions of the content table (``messaging_message``) on MariaDB/MySQL.

The partition column is the msgkey, whose top bits are the send time, so a month is a msgkey range:

    PARTITION p<YYYYMM> VALUES LESS THAN (lower_bound(first instant of the next month, UTC))
    PARTITION pmax      VALUES LESS THAN MAXVALUE

Partitions run without gaps from the oldest kept month; the oldest also holds anything older.
New months are split off ``pmax`` (``REORGANIZE PARTITION pmax``), which costs nothing while
``pmax`` is empty, so ``manage.py content_partitions`` keeps a few months ahead of the clock. Cold
months go with ``DROP PARTITION``: a metadata change, not a row-by-row delete.
SQLite has no partitioning: every function here is for ``connection.vendor == "mysql"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from storage import msgkey

TABLE = "messaging_message"
MAXVALUE = "pmax"
_NAME = re.compile(r"^p(\d{4})(\d{2})$")


@dataclass(frozen=True, order=True)
class Month:
    year: int
    month: int

    @classmethod
    def of(cls, when: datetime) -> Month:
        utc = when.astimezone(UTC)
        return cls(utc.year, utc.month)

    @classmethod
    def parse(cls, text: str) -> Month:
        """``YYYY-MM`` → Month; ValueError on anything else."""
        parsed = datetime.strptime(text, "%Y-%m")
        return cls(parsed.year, parsed.month)

    def plus(self, months: int) -> Month:
        index = self.year * 12 + self.month - 1 + months
        return Month(index // 12, index % 12 + 1)

    @property
    def first_instant(self) -> datetime:
        return datetime(self.year, self.month, 1, tzinfo=UTC)

    @property
    def name(self) -> str:
        return f"p{self.year:04d}{self.month:02d}"

    @property
    def bound(self) -> int:
        """The smallest msgkey of the next month: this month's ``VALUES LESS THAN``."""
        return msgkey.lower_bound(self.plus(1).first_instant)

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"


def month_of_partition(name: str) -> Month | None:
    match = _NAME.match(name)
    return Month(int(match[1]), int(match[2])) if match else None


def months_between(first: Month, last: Month) -> list[Month]:
    months, month = [], first
    while month <= last:
        months.append(month)
        month = month.plus(1)
    return months


def partition_clause(months: list[Month]) -> str:
    parts = [f"PARTITION {m.name} VALUES LESS THAN ({m.bound})" for m in months]
    return ", ".join([*parts, f"PARTITION {MAXVALUE} VALUES LESS THAN MAXVALUE"])


def existing(cursor: Any) -> list[Month] | None:
    """The table's monthly partitions, oldest first; None when the table is not partitioned."""
    cursor.execute(
        "SELECT PARTITION_NAME FROM information_schema.PARTITIONS "
        "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s ORDER BY PARTITION_ORDINAL_POSITION",
        [TABLE],
    )
    names = [row[0] for row in cursor.fetchall()]
    if not names or names == [None]:
        return None
    return [m for m in map(month_of_partition, names) if m is not None]


def partition_table(cursor: Any, first: Month, last: Month) -> list[Month]:
    """Partition the (unpartitioned) table into ``first``..``last`` plus ``pmax``."""
    months = months_between(first, last)
    cursor.execute(f"ALTER TABLE {TABLE} PARTITION BY RANGE (msgkey) ({partition_clause(months)})")
    return months


def add_months(cursor: Any, through: Month) -> list[Month]:
    """Split the months after the newest partition, up to ``through``, off ``pmax``."""
    current = existing(cursor) or []
    start = current[-1].plus(1) if current else Month.of(datetime.now(UTC))
    months = months_between(start, through)
    if months:
        cursor.execute(
            f"ALTER TABLE {TABLE} REORGANIZE PARTITION {MAXVALUE} INTO ({partition_clause(months)})"
        )
    return months


def rows_in(cursor: Any, month: Month) -> int:
    cursor.execute(f"SELECT COUNT(*) FROM {TABLE} PARTITION ({month.name})")
    return int(cursor.fetchone()[0])


def drop_before(cursor: Any, cutoff: Month) -> list[tuple[Month, int]]:
    """Drop every monthly partition older than ``cutoff``; returns (month, rows dropped)."""
    doomed = [m for m in existing(cursor) or [] if m < cutoff]
    dropped = [(m, rows_in(cursor, m)) for m in doomed]
    if doomed:
        cursor.execute(f"ALTER TABLE {TABLE} DROP PARTITION {', '.join(m.name for m in doomed)}")
    return dropped


def unpartition(cursor: Any) -> None:
    if existing(cursor) is not None:
        cursor.execute(f"ALTER TABLE {TABLE} REMOVE PARTITIONING")
