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
    hbase_rows_per_s_per_regionserver: float
    fanout_per_s_per_worker: float
    redis_bytes_per_user: float
    redis_bytes_per_active_user: float
    redis_ops_per_s_per_master: float
    mysql_cold_pages_per_s_per_core: float
    mysql_bytes_per_conversation: float
    notes: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Measured:
        names = {f.name for f in fields(cls)}
        missing = sorted(n for n in names - set(data) if n != "notes")
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
    active_fraction: float = 0.1  # users whose conversation list is cached (24 h TTL)
    redis_ops_per_read: float = 6.0  # commands per unread request (the fast path's pipeline)
    retention_years: float = 1.0
    priority_share: float = 0.1  # share of the peak fan-out on the priority channel
    entry_bytes: float | None = None  # overrides the measured bytes per inbox entry
    hbase_replication: int = 3  # HDFS block replicas
    redis_replicas: int = 1  # replicas per Redis master
    redis_node_memory_gb: float = 25.0  # memory a Redis master may use
    regionserver_disk_tb: float = 8.0
    mysql_cores: float = 16.0  # cores per MySQL replica
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
    steps: list[Step] = field(default_factory=list)

    def add(self, what: str, arithmetic: str, value: float, unit: str = "") -> float:
        self.steps.append(Step(what, arithmetic, value, unit))
        return value


def nodes(load: float, per_node: float, utilisation: float) -> int:
    return max(1, math.ceil(load / (per_node * utilisation)))


def plan(load: Load, m: Measured) -> list[Tier]:
    load.check()
    return [_celery(load, m), _redis(load, m), _hbase(load, m), _mysql(load, m)]


def _celery(load: Load, m: Measured) -> Tier:
    t = Tier("Celery workers (one process per core)")
    u, rate = load.utilisation, m.fanout_per_s_per_worker
    for queue, share in (
        ("bulk.daily", 1 - load.priority_share),
        ("bulk.priority", load.priority_share),
    ):
        need = load.peak_fanout * share
        t.add(
            f"{queue} workers",
            f"ceil({_n(need)}/s / ({_n(rate)}/s per worker x {u}))",
            nodes(need, rate, u),
        )
    return t


def _redis(load: Load, m: Measured) -> Tier:
    t = Tier("Redis Cluster")
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
        f"{_n(load.peak_fanout)} recipients/s x 2) / ({_n(m.redis_ops_per_s_per_master)}/s x "
        f"{load.utilisation}))",
        nodes(ops, m.redis_ops_per_s_per_master, load.utilisation),
    )
    masters = t.add(
        "masters",
        f"max({by_mem:.0f}, {by_ops:.0f}, 3: a cluster's minimum)",
        max(by_mem, by_ops, 3),
    )
    t.add("replicas", f"{masters:.0f} x {load.redis_replicas}", masters * load.redis_replicas)
    return t


def _hbase(load: Load, m: Measured) -> Tier:
    t = Tier("HBase (inbox)")
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
    by_rate = t.add(
        "RegionServers for writes",
        f"ceil({_n(load.peak_fanout)} rows/s / ({_n(m.hbase_rows_per_s_per_regionserver)} rows/s "
        f"x {load.utilisation}))",
        nodes(load.peak_fanout, m.hbase_rows_per_s_per_regionserver, load.utilisation),
    )
    t.add("RegionServers", f"max({by_disk:.0f}, {by_rate:.0f})", max(by_disk, by_rate))
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
    t = Tier("MySQL (primary + read replicas)")
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


def render(tiers: list[Tier], m: Measured) -> str:
    lines = [f"measured {m.date} on {m.machine} ({m.command})"]
    for tier in tiers:
        lines.append("")
        lines.append(tier.name)
        for s in tier.steps:
            value = f"{s.value:,.2f} {s.unit}" if s.unit else f"{s.value:,.0f}"
            lines.append(f"  {s.what:<34} {value:>14}   = {s.arithmetic}")
    return "\n".join(lines)


def _n(value: float) -> str:
    """A count the way an operator writes it: 150e9 -> 150,000,000,000."""
    return f"{value:,.0f}"
