"""``manage.py unread_rebuild [--uid U ...] [--all]``: recompute unread counters from the truth.

Each user's counters are recomputed from their conversations' read positions and the inbox, and
replaced atomically. Prints how many users were scanned, how many had drifted, how many
conversations were fixed and the total drift (sum of |stored - true| over conversations).
``--all`` walks every owner with a keyset cursor, then drops counters of users who hold no
conversation any more. Group positions (read position, mention and hidden-for-me markers) are
repaired from MySQL too, for the same users (``--all``: every group member); it prints how many
were fixed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.console import Console
from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from groups.selectors import all_member_uids
from groups.services import member_positions_repair
from infra.cli import CommaList
from unread.rebuild import RebuildStats
from unread.selectors import unread_counter_owners
from unread.services import unread_counters_rebuild


class Command(BaseCommand):
    help = "Recompute unread counters from conversations and the inbox, and report the drift."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--uid",
            type=int,
            action=CommaList,
            metavar="U",
            help="rebuild these users (repeatable)",
        )
        parser.add_argument("--all", action="store_true", help="rebuild every user")

    def handle(self, *args: Any, **options: Any) -> None:
        if bool(options["uid"]) == options["all"]:
            raise CommandError("give either --uid U [U ...] or --all")
        if options["all"]:
            stats = self._rebuild_all()
            chunks = _chunks(all_member_uids(), 500)
            groups_fixed = sum(member_positions_repair(uids=chunk) for chunk in chunks)
        else:
            stats = unread_counters_rebuild(dict.fromkeys(options["uid"]))
            groups_fixed = member_positions_repair(uids=dict.fromkeys(options["uid"]))
        self.stdout.write(
            f"users scanned: {stats.users}\n"
            f"users with drift: {stats.users_with_drift}\n"
            f"conversations fixed: {stats.conversations_fixed}\n"
            f"total drift: {stats.total_drift}\n"
            f"users left, written to during each recount (run again): {stats.busy}\n"
            f"group positions fixed: {groups_fixed}"
        )

    def _rebuild_all(self) -> RebuildStats:
        stats = RebuildStats()
        columns = (SpinnerColumn(), TextColumn("rebuilding unread counters"), MofNCompleteColumn())
        with Progress(*columns, TimeElapsedColumn(), console=Console(stderr=True)) as progress:
            task = progress.add_task("users", total=None)
            owners = unread_counter_owners()
            for chunk in _chunks(owners, 500):
                unread_counters_rebuild(chunk, stats)
                progress.update(task, completed=stats.users)
        return stats


def _chunks(items: Iterable[int], size: int) -> Iterator[list[int]]:
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk
