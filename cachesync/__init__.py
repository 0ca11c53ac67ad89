"""Caches that follow the database: MariaDB's GTID row binlog into the conversation-list cache.

A DBA's fix, a backfill or a migration changes MySQL rows behind the application's back; the
cache tiers (Redis, HBase ``convlist``) would keep serving the old rows. ``cache_follow`` (one
process per MariaDB primary) reads the primary's binlog as a replica does and turns each
committed change into the pushes the application itself makes after its own writes
(``storage.convcache.writer``: mtime compare-and-set, never a regression):

- changes.py   row events → a ``ChangeSet`` (which conversations to push, bump or forget, which
               messages changed); pure, no I/O
- rows.py      a rows event's row images, read from its bytes (the library's decoder as fallback)
- held.py      which changed conversations every tier holds at their mtime already (not pushed)
- services.py  ``changes_apply``: one ``ChangeSet`` through the application's own functions
- position.py  the applied GTID position, in MariaDB (table ``cachesync_binlogposition``)
- lag.py       the follower's lag, published in Redis and read at scrape (``/metrics``)
- binlog.py    the loop: stream, apply at each commit (batched while behind), wait out outages,
               save, resume
"""
