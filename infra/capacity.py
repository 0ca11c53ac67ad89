"""The capacity planner: how big each tier must be, from per-node figures measured on this machine.

``manage.py capacity_plan`` turns a load (inbox entries per year, users, peak fan-out, peak reads)
into a cluster: Celery workers per queue, Redis masters and memory, RegionServers and disk with
replication, MySQL read replicas, and shows every step of the arithmetic so an operator can check
it by hand. The per-node figures are not guesses: ``scripts/measure_capacity.py`` measures them
with the project's own code on the real services and stores them with the date and the machine in
``infra/capacity_measured.json`` (re-measure with that one command).

The sizing rule for every tier is the same: nodes = ceil(load / (per-node capacity x target
utilisation)), the larger of the storage bound and the throughput bound. Production write-ups size
the inbox by hand the same way (150 billion entries a year at ~50 bytes = 7.5 TB before
replication); ``tests/infra/test_capacity.py`` checks the planner against that figure.

Retention caps growth: with ``--campaign-share`` (the share of entries that are campaign copies)
the inbox holds campaign copies for RETENTION_CAMPAIGN_INBOX_DAYS and the rest for
RETENTION_HISTORY_DAYS (the command's defaults are the configured policy), so the disk is the
steady state a year of running reaches, not a year of writes.

Every throughput is measured per core: work per CPU-second of the server process that did it, so
a figure does not depend on how many other processes shared the measuring machine's cores. A node
is then sized by the cores it has, and each tier states its assumption in the plan: a Celery
worker is one process per core (run enough processes to keep each core busy), a Redis master is one
core (commands run on one thread), a RegionServer and a MySQL server of N cores do N times the
work of one (linear; HBase's and InnoDB's write paths are not perfectly so, which the utilisation
margin absorbs).

The MySQL primary takes every write the replicas do not: each campaign recipient upserts its
conversation with the sender (``conversations_touch_owners``, batches of BULK_BATCH_SIZE) and its
batch's ledger rows, each 1:1 send its message and both conversations, and with the SQL inbox each
recipient an inbox row too. Its sizing says whether one primary suffices or how to split the load.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

MEASURED_FILE = Path(__file__).with_name("capacity_measured.json")
TB = 1e12
GB = 1e9


class PlanError(ValueError):
    """A load or a measurement the planner cannot size (its message is one readable sentence)."""


@dataclass(frozen=True)
class Measured:
    """Per-node figures measured on one machine (``scripts/measure_capacity.py``)."""

    date: str
    machine: str
    command: str
    hbase_bytes_per_inbox_entry: float
    hbase_rows_per_s_per_core: float  # per CPU-second of the RegionServers' JVM
    hbase_thrift_rows_per_s_per_core: float  # per CPU-second of the Thrift gateway
    fanout_per_s_per_core: float  # recipients per CPU-second of the worker processes
    redis_bytes_per_user: float
    redis_bytes_per_active_user: float
    redis_ops_per_s_per_core: float  # per CPU-second of redis-server
    mysql_cold_pages_per_s_per_core: float  # the rest: per CPU-second of mariadbd
    mysql_bytes_per_conversation: float
    mysql_conversation_rows_per_s_per_core: float  # bulk upserts, new rows
    mysql_conversation_updates_per_s_per_core: float  # bulk upserts, existing rows
    mysql_inbox_rows_per_s_per_core: float  # the SQL inbox's bulk rows
    mysql_campaign_recipients_per_s_per_core: float  # a whole campaign (HBase inbox)
    mysql_sends_per_s_per_core: float  # whole 1:1 sends (HBase inbox)
    mysql_sql_inbox_sends_per_s_per_core: float  # whole 1:1 sends, SQL inbox
    wall: dict[str, float] = field(default_factory=dict)  # wall-clock rates of the same runs
    notes: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Measured:
        names = {f.name for f in fields(cls)}
        missing = sorted(n for n in names - set(data) if n not in ("notes", "wall"))
        if missing:
            raise PlanError(f"the measurements lack {', '.join(missing)}")
        return cls(**{k: v for k, v in data.items() if k in names})


def load_measured(path: Path = MEASURED_FILE) -> Measured:
    try:
        return Measured.from_mapping(json.loads(path.read_text()))
    except FileNotFoundError:
        raise PlanError(
            f"no measurements at {path}: run scripts/measure_capacity.py first"
        ) from None
    except (ValueError, TypeError) as exc:
        raise PlanError(f"the measurements at {path} are unreadable: {exc}") from None


@dataclass(frozen=True)
class Load:
    """What the site needs; every figure is checked positive by ``check``."""

    messages_per_year: float  # inbox entries written per year (a campaign: one per recipient)
    users: float
    peak_fanout: float  # recipients/s at peak across both channels
    peak_unread_reads: float = 100_000.0  # unread + conversation-list requests/s reaching Redis
    peak_cold_reads: float = 2_000.0  # conversation-list pages/s reaching MySQL (cache misses)
    peak_sends: float = 5_000.0  # 1:1 sends/s at peak (each writes on the MySQL primary)
    active_fraction: float = 0.1  # users whose conversation list is cached (24 h TTL)
    redis_ops_per_read: float = 6.0  # commands per unread request (the fast path's pipeline)
    retention_years: float = 1.0
    priority_share: float = 0.1  # share of the peak fan-out on the priority channel
    entry_bytes: float | None = None  # overrides the measured bytes per inbox entry
    hbase_replication: int = 3  # HDFS block replicas
    redis_replicas: int = 1  # replicas per Redis master
    redis_node_memory_gb: float = 25.0  # memory a Redis master may use
    regionserver_disk_tb: float = 8.0
    regionserver_cores: float = 16.0
    mysql_cores: float = 16.0  # cores per MySQL replica
    mysql_primary_cores: float = 16.0
    conversations_per_user: float = 50.0
    utilisation: float = 0.6  # target share of a node's measured capacity
    # Retention (RETENTION_*_DAYS; None: kept for ever): in a steady state a kind holds only its
    # horizon's worth of entries, whatever the years run.
    campaign_share: float | None = None  # share of the entries that are campaign copies
    campaign_retention_days: float | None = None
    history_retention_days: float | None = None
    events_retention_days: float | None = None  # a campaign's batch ledger (bulk/ledger.py)
    ledger_bytes_per_recipient: float = 12.0  # assumed: a uid in a batch's JSON list, and the row

    def check(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and not (isinstance(value, int | float) and value > 0):
                raise PlanError(f"--{f.name.replace('_', '-')} must be a positive number")
        if (self.campaign_share or 0) > 1:
            raise PlanError("--campaign-share is at most 1")
        if self.utilisation > 1 or self.active_fraction > 1 or self.priority_share >= 1:
            raise PlanError(
                "--utilisation and --active-fraction are at most 1, --priority-share below 1"
            )


@dataclass(frozen=True)
class Step:
    what: str
    arithmetic: str
    value: float
    unit: str = ""


@dataclass
class Tier:
    name: str
    assumes: str = ""  # how a node's capacity follows from the per-core figure
    steps: list[Step] = field(default_factory=list)
    verdict: str = ""

    def add(self, what: str, arithmetic: str, value: float, unit: str = "") -> float:
        self.steps.append(Step(what, arithmetic, value, unit))
        return value


def nodes(load: float, per_node: float, utilisation: float) -> int:
    return max(1, math.ceil(load / (per_node * utilisation)))


def plan(load: Load, m: Measured) -> list[Tier]:
    load.check()
    return [
        _celery(load, m),
        _redis(load, m),
        _hbase(load, m),
        _mysql(load, m),
        _mysql_primary(load, m),
    ]


def _celery(load: Load, m: Measured) -> Tier:
    t = Tier(
        "Celery workers (one process per core)",
        "a worker is one core: recipients per CPU-second of the measured worker processes; run "
        "enough processes (-c) to keep each core busy, a process waits on the stores",
    )
    u, rate = load.utilisation, m.fanout_per_s_per_core
    for queue, share in (
        ("bulk.daily", 1 - load.priority_share),
        ("bulk.priority", load.priority_share),
    ):
        need = load.peak_fanout * share
        t.add(
            f"{queue} workers",
            f"ceil({_n(need)}/s / ({_n(rate)}/s per core x {u}))",
            nodes(need, rate, u),
        )
    return t


def _redis(load: Load, m: Measured) -> Tier:
    t = Tier(
        "Redis Cluster",
        "a master is one core (Redis runs commands on one thread): commands per CPU-second",
    )
    everyone = t.add(
        "memory, every user",
        f"{_n(load.users)} users x {m.redis_bytes_per_user:.0f} B",
        load.users * m.redis_bytes_per_user / GB,
        "GB",
    )
    active = load.users * load.active_fraction
    cached = t.add(
        "memory, cached lists",
        f"{_n(active)} active users x {m.redis_bytes_per_active_user:.0f} B",
        active * m.redis_bytes_per_active_user / GB,
        "GB",
    )
    memory = t.add("memory in all", f"{everyone:.1f} + {cached:.1f} GB", everyone + cached, "GB")
    by_mem = t.add(
        "masters for memory",
        f"ceil({memory:.1f} GB / ({load.redis_node_memory_gb:g} GB x {load.utilisation}))",
        nodes(memory, load.redis_node_memory_gb, load.utilisation),
    )
    ops = load.peak_unread_reads * load.redis_ops_per_read + load.peak_fanout * 2
    by_ops = t.add(
        "masters for commands",
        f"ceil(({_n(load.peak_unread_reads)} reads/s x {load.redis_ops_per_read:g} + "
        f"{_n(load.peak_fanout)} recipients/s x 2) / ({_n(m.redis_ops_per_s_per_core)}/s per "
        f"core x {load.utilisation}))",
        nodes(ops, m.redis_ops_per_s_per_core, load.utilisation),
    )
    masters = t.add(
        "masters",
        f"max({by_mem:.0f}, {by_ops:.0f}, 3: a cluster's minimum)",
        max(by_mem, by_ops, 3),
    )
    t.add("replicas", f"{masters:.0f} x {load.redis_replicas}", masters * load.redis_replicas)
    return t


def _hbase(load: Load, m: Measured) -> Tier:
    t = Tier(
        "HBase (inbox)",
        f"a RegionServer of {load.regionserver_cores:g} cores writes {load.regionserver_cores:g} x "
        "the rows per CPU-second of the measured RegionServers (linear)",
    )
    size = load.entry_bytes or m.hbase_bytes_per_inbox_entry
    source = "given" if load.entry_bytes else "measured"
    entries = _kept_entries(t, load)
    raw = t.add(
        "disk before replication",
        f"{_n(entries)} entries x {size:g} B ({source})",
        entries * size / TB,
        "TB",
    )
    disk = t.add(
        f"disk with replication x{load.hbase_replication}",
        f"{raw:.2f} TB x {load.hbase_replication}",
        raw * load.hbase_replication,
        "TB",
    )
    by_disk = t.add(
        "RegionServers for disk",
        f"ceil({disk:.2f} TB / ({load.regionserver_disk_tb:g} TB x {load.utilisation}))",
        nodes(disk, load.regionserver_disk_tb, load.utilisation),
    )
    per_server = t.add(
        "rows/s per RegionServer",
        f"{_n(m.hbase_rows_per_s_per_core)}/s per core x {load.regionserver_cores:g} cores",
        m.hbase_rows_per_s_per_core * load.regionserver_cores,
    )
    by_rate = t.add(
        "RegionServers for writes",
        f"ceil({_n(load.peak_fanout)} rows/s / ({_n(per_server)} rows/s x {load.utilisation}))",
        nodes(load.peak_fanout, per_server, load.utilisation),
    )
    t.add("RegionServers", f"max({by_disk:.0f}, {by_rate:.0f})", max(by_disk, by_rate))
    t.add(
        "Thrift gateway cores",
        f"ceil({_n(load.peak_fanout)} rows/s / ({_n(m.hbase_thrift_rows_per_s_per_core)}/s per "
        f"core x {load.utilisation}))",
        nodes(load.peak_fanout, m.hbase_thrift_rows_per_s_per_core, load.utilisation),
    )
    return t


def horizon_years(days: float | None, years: float) -> float:
    """How many years of a kind a store holds after ``years`` of running: its retention caps it."""
    return years if days is None else min(days / 365.0, years)


def _horizon_text(days: float | None, years: float) -> str:
    return f"{years:g} y (kept for ever)" if days is None else f"min({days:g} d, {years:g} y)"


def _campaign_days(load: Load) -> float | None:
    """Nothing in an inbox outlives the history horizon, campaign copies included."""
    kinds = [d for d in (load.campaign_retention_days, load.history_retention_days) if d]
    return min(kinds) if kinds else None


def _kept_entries(t: Tier, load: Load) -> float:
    """Inbox entries held at the end of ``retention_years``: campaign copies and the rest (1:1
    history) each capped by their retention (RETENTION_*_DAYS)."""
    years, share = load.retention_years, load.campaign_share or 0.0
    campaign, days = load.messages_per_year * share, _campaign_days(load)
    kept_campaign = t.add(
        "campaign copies kept",
        f"{_n(campaign)}/y ({share:g} of entries) x {_horizon_text(days, years)}",
        campaign * horizon_years(days, years),
    )
    rest, history = load.messages_per_year - campaign, load.history_retention_days
    kept_rest = t.add(
        "1:1 entries kept",
        f"{_n(rest)}/y x {_horizon_text(history, years)}",
        rest * horizon_years(history, years),
    )
    return kept_campaign + kept_rest


def _ledger(t: Tier, load: Load) -> None:
    """The batch ledger: a row per 1,000 recipients, kept K days after its campaign ended and,
    while campaign copies age out, until they have (it lists who holds one)."""
    campaign = load.messages_per_year * (load.campaign_share or 0.0)
    spans = [d for d in (load.events_retention_days, _campaign_days(load)) if d]
    days = None if load.events_retention_days is None else max(spans)
    per = load.ledger_bytes_per_recipient
    t.add(
        "batch ledger kept",
        f"{_n(campaign)} recipients/y x {_horizon_text(days, load.retention_years)} x {per:g} B",
        campaign * horizon_years(days, load.retention_years) * per / TB,
        "TB",
    )


def _mysql(load: Load, m: Measured) -> Tier:
    t = Tier(
        "MySQL (read replicas, table sizes)",
        f"a replica of {load.mysql_cores:g} cores serves {load.mysql_cores:g} x the pages per "
        "CPU-second of the measured mariadbd (linear)",
    )
    per_replica = m.mysql_cold_pages_per_s_per_core * load.mysql_cores
    t.add(
        "pages/s per replica",
        f"{_n(m.mysql_cold_pages_per_s_per_core)}/s per core x {load.mysql_cores:g} cores",
        per_replica,
    )
    t.add(
        "read replicas",
        f"ceil({_n(load.peak_cold_reads)} pages/s / ({_n(per_replica)}/s x {load.utilisation}))",
        nodes(load.peak_cold_reads, per_replica, load.utilisation),
    )
    t.add(
        "conversation table",
        f"{_n(load.users)} users x {load.conversations_per_user:g} conversations x "
        f"{m.mysql_bytes_per_conversation:.0f} B",
        load.users * load.conversations_per_user * m.mysql_bytes_per_conversation / TB,
        "TB",
    )
    _ledger(t, load)
    return t


def _mysql_primary(load: Load, m: Measured) -> Tier:
    """The primary's writes (HBase inbox): campaigns and 1:1 sends in cores; the SQL inbox too."""
    t = Tier(
        "MySQL primary (writes)",
        f"a primary of {load.mysql_primary_cores:g} cores does {load.mysql_primary_cores:g} x the "
        "work per CPU-second of the measured mariadbd (linear); one primary takes every write",
    )
    rows = _write_rows(t, load.peak_fanout, load.peak_sends)
    upserts, rest = _campaign_cores(t, load, m)
    one_to_one = _send_cores(t, "cores, 1:1 sends", load.peak_sends, m.mysql_sends_per_s_per_core)
    cores = t.add(
        "cores needed",
        f"({upserts:.2f} + {rest:.2f} + {one_to_one:.2f}) / {load.utilisation}",
        (upserts + rest + one_to_one) / load.utilisation,
        "cores",
    )
    primaries = _primaries(t, "primaries needed", cores, load)
    sql = _sql_inbox(t, load, m, (upserts, rest))
    t.verdict = _verdict(primaries, cores, rows, load) + (
        f" With the SQL inbox: {sql} {'primary' if sql == 1 else 'primaries'}."
    )
    return t


def _write_rows(t: Tier, fanout: float, sends: float) -> float:
    campaign = t.add(
        "conversation rows/s, campaigns",
        f"{_n(fanout)} recipients/s x 1 row (the recipient's conversation with the sender)",
        fanout,
    )
    one_to_one = t.add(
        "conversation rows/s, 1:1 sends",
        f"{_n(sends)} sends/s x 2 rows (both sides)",
        sends * 2,
    )
    return t.add("conversation rows/s", f"{_n(campaign)} + {_n(one_to_one)}", campaign + one_to_one)


def _send_cores(t: Tier, what: str, sends: float, per_core: float) -> float:
    return t.add(
        what,
        f"{_n(sends)} sends/s / {_n(per_core)} sends/s per core (whole sends measured)",
        sends / per_core,
        "cores",
    )


def _campaign_cores(t: Tier, load: Load, m: Measured) -> tuple[float, float]:
    """The upserts at the slower of new and existing rows, plus the rest of a campaign's writes
    and reads on the primary (ledger, audience): the whole campaign's cost less its upserts."""
    fresh, updates = (
        m.mysql_conversation_rows_per_s_per_core,
        m.mysql_conversation_updates_per_s_per_core,
    )
    slower = min(fresh, updates)
    upserts = t.add(
        "cores, campaign upserts",
        f"{_n(load.peak_fanout)} rows/s / {_n(slower)} rows/s per core (the slower of new rows "
        f"{_n(fresh)}, existing {_n(updates)})",
        load.peak_fanout / slower,
        "cores",
    )
    whole = 1e6 / m.mysql_campaign_recipients_per_s_per_core
    rest_us = max(0.0, whole - 1e6 / fresh)
    rest = t.add(
        "cores, rest of a campaign",
        f"{_n(load.peak_fanout)} recipients/s x max(0, {whole:.1f} - {1e6 / fresh:.1f} µs) "
        "(a whole campaign's µs per recipient less its new rows': ledger, audience reads)",
        load.peak_fanout * rest_us / 1e6,
        "cores",
    )
    return upserts, rest


def _primaries(t: Tier, what: str, cores: float, load: Load) -> int:
    return int(
        t.add(
            what,
            f"ceil({cores:.2f} cores / {load.mysql_primary_cores:g} cores per primary)",
            max(1, math.ceil(cores / load.mysql_primary_cores)),
        )
    )


def _sql_inbox(t: Tier, load: Load, m: Measured, campaign: tuple[float, float]) -> int:
    """The same load with the SQL inbox: a campaign adds an inbox row per recipient (bulk), a
    1:1 send its two inbox rows (its own measurement)."""
    t.add(
        "SQL inbox: inbox rows/s",
        f"{_n(load.peak_fanout)} recipients/s x 1 + {_n(load.peak_sends)} sends/s x 2",
        load.peak_fanout + 2 * load.peak_sends,
    )
    rows = t.add(
        "SQL inbox: cores, campaign rows",
        f"{_n(load.peak_fanout)} rows/s / {_n(m.mysql_inbox_rows_per_s_per_core)} rows/s per core",
        load.peak_fanout / m.mysql_inbox_rows_per_s_per_core,
        "cores",
    )
    per_send = m.mysql_sql_inbox_sends_per_s_per_core
    sends = _send_cores(t, "SQL inbox: cores, 1:1 sends", load.peak_sends, per_send)
    upserts, rest = campaign
    cores = t.add(
        "SQL inbox: cores needed",
        f"({upserts:.2f} + {rest:.2f} + {rows:.2f} + {sends:.2f}) / {load.utilisation}",
        (upserts + rest + rows + sends) / load.utilisation,
        "cores",
    )
    return _primaries(t, "SQL inbox: primaries needed", cores, load)


def _verdict(primaries: int, cores: float, rows: float, load: Load) -> str:
    if primaries == 1:
        return (
            f"One primary suffices: {cores:.1f} of its {load.mysql_primary_cores:g} cores for "
            f"{_n(rows)} conversation rows/s."
        )
    return (
        f"One primary does not suffice ({cores:.1f} cores for {_n(rows)} conversation rows/s): "
        f"split the writes over {primaries} primaries by sharding the conversation table by "
        "owner_uid (a batch's sorted owners split by range), or write fewer conversation "
        "rows per recipient (a campaign's conversation kept in the cache tiers only, or one "
        "row per sender and audience instead of one per recipient)."
    )


def render(tiers: list[Tier], m: Measured) -> str:
    lines = [f"measured {m.date} on {m.machine} ({m.command})"]
    for tier in tiers:
        lines.append("")
        lines.append(tier.name)
        if tier.assumes:
            lines.append(f"  (assumes {tier.assumes})")
        for s in tier.steps:
            value = f"{s.value:,.2f} {s.unit}" if s.unit else f"{s.value:,.0f}"
            lines.append(f"  {s.what:<34} {value:>14}   = {s.arithmetic}")
        if tier.verdict:
            lines.append(f"  {tier.verdict}")
    return "\n".join(lines)


def _n(value: float) -> str:
    """A count the way an operator writes it: 150e9 -> 150,000,000,000."""
    return f"{value:,.0f}"
