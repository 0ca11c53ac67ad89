"""The follower's position: the GTID state of the last transaction whose changes reached the
caches, one row of ``BinlogPosition`` per follower.

Kept in MariaDB, not Redis:
- it must outlive Redis. Redis restarting empty, or a failover losing its last second, would
  lose the position or move it back; lost, the follower could not tell where to resume, and the
  HBase tier (which outlived Redis) would miss what changed meanwhile;
- it is a fact about this primary's binlog and replicates with it: a promoted replica carries
  the position in the same GTID domains;
- it adds no dependency: when MariaDB does not answer there is no binlog to follow either.
Its own write is a binlog transaction too: ``save`` returns that transaction's GTID
(``@@last_gtid``) so the follower never counts its own save as progress to save again.
Written with one ``INSERT ... ON DUPLICATE KEY UPDATE`` (MariaDB only, as the binlog is).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection

from cachesync.models import BinlogPosition

DEFAULT = "default"  # one follower per primary
TABLE = BinlogPosition._meta.db_table


@dataclass
class Gtids:
    """A MariaDB GTID state: the last ``domain-server-seq`` per replication domain."""

    by_domain: dict[int, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Gtids:
        found = [g.strip() for g in text.split(",") if g.strip()]
        return cls({int(g.split("-", 1)[0]): g for g in found})

    def advance(self, gtid: str) -> None:
        self.by_domain[int(gtid.split("-", 1)[0])] = gtid

    def text(self) -> str:
        return ",".join(self.by_domain[d] for d in sorted(self.by_domain))


def load(name: str = DEFAULT) -> str | None:
    row = BinlogPosition.objects.filter(name=name).values_list("gtid", flat=True).first()
    return None if row is None else str(row)


def save(gtid: str, name: str = DEFAULT) -> str:
    """Store the position; returns the GTID of this very write."""
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {TABLE} (name, gtid, updated_at) VALUES (%s, %s, UTC_TIMESTAMP(6)) "
            "ON DUPLICATE KEY UPDATE gtid = VALUES(gtid), updated_at = VALUES(updated_at)",
            [name, gtid],
        )
        cur.execute("SELECT @@last_gtid")
        row = cur.fetchone()
    return str(row[0]) if row and row[0] else ""


def primary_now() -> str:
    """The primary's binlog position now (a follower without a saved position starts here)."""
    with connection.cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos")
        row = cur.fetchone()
    return str(row[0]) if row and row[0] else ""
