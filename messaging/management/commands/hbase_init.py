"""``manage.py hbase_init``: create Missive's HBase tables, pre-split on the salt byte.

Idempotent: existing tables are left as they are.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import happybase
from django.core.management.base import BaseCommand, CommandError

from infra import hbase
from infra.hbase_tables import TABLES, ensure_tables, full_name


class Command(BaseCommand):
    help = "Create Missive's HBase tables (pre-split into 16 salt regions); safe to run again."
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        opts = hbase.options()
        try:
            created = ensure_tables()
        except Exception as exc:
            where = f"{opts['HOST']}:{opts['THRIFT2_PORT']}"
            raise CommandError(f"no HBase Thrift2 gateway answers at {where} ({exc})") from exc
        for spec in TABLES:
            name = full_name(spec.name).decode()
            state = "created" if name in created else "exists"
            regions = hbase.call(partial(_region_count, spec.name))
            self.stdout.write(f"{name}: {state} ({regions} regions, family {spec.family})")


def _region_count(table: str, conn: happybase.Connection) -> int:
    return len(conn.table(table).regions())
