"""The binlog follower's table: where it has applied the binlog up to.

``BinlogPosition``: one row per follower (``name``; one follower per primary, ``default``),
``gtid`` the MariaDB GTID state (``domain-server-seq`` per domain, comma-separated) of the last
transaction whose changes reached the caches. position.py says why it lives in MariaDB.
"""

from __future__ import annotations

from django.db import models


class BinlogPosition(models.Model):
    name = models.CharField(max_length=64, primary_key=True)
    gtid = models.CharField(max_length=1024, help_text="MariaDB GTID state applied up to")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name} @ {self.gtid}"
