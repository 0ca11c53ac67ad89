"""``manage.py follows_import FILE``: load follow edges from a CSV file of any size.

Each line is ``follower_uid,followee_uid[,followed_at]`` where ``followed_at`` is ISO-8601 (naive
means UTC) or unix seconds, and defaults to the time of the import; a header line is skipped. The
file is streamed and written in batches of 5,000 with ``bulk_create(ignore_conflicts=True)``, so
memory stays flat, a line repeated (or a follow already stored) is kept once, and a re-run after
an interruption is safe. Bad lines are counted and skipped, and the first few are shown with their
line numbers and reasons.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from messaging.models import Follow

BATCH = 5000
SAMPLES = 5
MAX_UID = (1 << 63) - 1
PROGRESS_FROM_BYTES = 4 << 20  # a progress bar for files over 4 MB
MAX_LINE = 4096  # bytes; a real line is under 80
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)


class BadLine(ValueError):
    pass


@dataclass
class Report:
    lines: int = 0
    good: int = 0
    bad: int = 0
    header: bool = False
    samples: list[tuple[int, str]] = field(default_factory=list)

    def reject(self, number: int, reason: str) -> None:
        self.bad += 1
        if len(self.samples) < SAMPLES:
            self.samples.append((number, reason))


def parse_uid(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise BadLine(f"{name} {text[:40]!r} is not an integer") from None
    if not 0 < value <= MAX_UID:
        raise BadLine(f"{name} {value} is out of range (1 to 2^63-1)")
    return value


def parse_when(text: str, default: datetime) -> datetime:
    """ISO-8601 (naive means UTC) or unix seconds (a bare number), within 1970..9998."""
    if not text:
        return default
    try:
        if text.replace(".", "", 1).isdigit():
            when = datetime.fromtimestamp(float(text), tz=UTC)
        else:
            parsed = datetime.fromisoformat(text)
            when = parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
            when = when.astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        raise BadLine(f"followed_at {text[:40]!r} is neither ISO-8601 nor unix seconds") from None
    if not EARLIEST <= when < LATEST:
        raise BadLine(f"followed_at {text[:40]!r} is outside 1970 to 9998")
    return when


def parse_line(line: str, default_when: datetime) -> Follow:
    fields = [f.strip().strip('"') for f in line.split(",")]
    if not 2 <= len(fields) <= 3:
        raise BadLine(f"expected 2 or 3 comma-separated fields, found {len(fields)}")
    follower = parse_uid(fields[0], "follower_uid")
    followee = parse_uid(fields[1], "followee_uid")
    if follower == followee:
        raise BadLine("a user cannot follow themselves")
    when = parse_when(fields[2] if len(fields) == 3 else "", default_when)
    return Follow(follower_uid=follower, followee_uid=followee, followed_at=when)


def is_header(line: str) -> bool:
    return "follower" in line.lower()


class Command(BaseCommand):
    help = "Import follows from CSV lines follower_uid,followee_uid[,followed_at]."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="CSV file (a header line is allowed)")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"])
        try:
            fh = path.open("rb")
            size = path.stat().st_size
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
        with fh, self._progress(size) as progress:
            task = progress.add_task("follows", total=size)
            report = self._import(fh, lambda n: progress.advance(task, n))
        self._print(report)

    def _progress(self, size: int) -> Progress:
        columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn())
        return Progress(
            *columns,
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
            disable=size < PROGRESS_FROM_BYTES,
        )

    def _import(self, fh: BinaryIO, advance: Callable[[int], None]) -> Report:
        report, now = Report(), datetime.now(UTC)
        batch: list[Follow] = []
        for number, line in self._lines(fh, advance):
            report.lines += 1
            if line is None:
                report.reject(number, f"line is longer than {MAX_LINE} bytes")
                continue
            if report.lines == 1 and is_header(line):
                report.header = True
                continue
            try:
                batch.append(parse_line(line, now))
            except BadLine as bad:
                report.reject(number, str(bad))
                continue
            report.good += 1
            if len(batch) >= BATCH:
                Follow.objects.bulk_create(batch, ignore_conflicts=True)
                batch = []
        if batch:
            Follow.objects.bulk_create(batch, ignore_conflicts=True)
        return report

    @staticmethod
    def _lines(fh: BinaryIO, advance: Callable[[int], None]) -> Iterator[tuple[int, str | None]]:
        """Non-blank lines with their 1-based numbers, decoded leniently (bad bytes → U+FFFD).

        A line over MAX_LINE bytes is skipped unread and yielded as None: one huge line (a binary
        file by mistake) never sits in memory.
        """
        number, pending = 0, 0
        while raw := fh.readline(MAX_LINE):
            number += 1
            pending += len(raw)
            if len(raw) == MAX_LINE and not raw.endswith(b"\n"):
                while (rest := fh.readline(MAX_LINE)) and not rest.endswith(b"\n"):
                    pending += len(rest)
                pending += len(rest)
                yield number, None
                continue
            if pending >= 1 << 20:
                advance(pending)
                pending = 0
            line = raw.decode("utf-8", errors="replace").strip().lstrip("\ufeff")
            if line:
                yield number, line
        advance(pending)

    def _print(self, report: Report) -> None:
        header = " (header skipped)" if report.header else ""
        self.stdout.write(
            f"{report.lines} lines read{header}: {report.good} good lines stored (a repeated "
            f"line or a follow already stored is kept once), {report.bad} bad lines skipped"
        )
        for number, reason in report.samples:
            self.stdout.write(f"  line {number}: {reason}")
        if report.bad > len(report.samples):
            self.stdout.write(f"  … and {report.bad - len(report.samples)} more bad lines")
