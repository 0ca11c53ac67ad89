"""The capacity planner: the hand sizing of the production write-ups comes out of it, every tier is
sized from the measured per-core figures with its arithmetic shown, the MySQL primary's writes say
whether one primary suffices, and bad input is one line."""

from __future__ import annotations

import json
import math
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from infra import capacity

FIGURES = {
    "date": "2026-11-23 21:00 UTC",
    "machine": "test machine",
    "command": "python scripts/measure_capacity.py",
    "hbase_bytes_per_inbox_entry": 40.0,
    "hbase_rows_per_s_per_core": 2_000,
    "hbase_thrift_rows_per_s_per_core": 10_000,
    "fanout_per_s_per_core": 1_000,
    "redis_bytes_per_user": 200,
    "redis_bytes_per_active_user": 4_000,
    "redis_ops_per_s_per_core": 100_000,
    "mysql_cold_pages_per_s_per_core": 300,
    "mysql_bytes_per_conversation": 150,
    "mysql_conversation_rows_per_s_per_core": 100_000,  # 10 µs a new row
    "mysql_conversation_updates_per_s_per_core": 50_000,  # 20 µs an existing one
    "mysql_inbox_rows_per_s_per_core": 200_000,
    "mysql_campaign_recipients_per_s_per_core": 40_000,  # 25 µs: 15 µs beyond the upsert
    "mysql_sends_per_s_per_core": 1_000,
    "mysql_sql_inbox_sends_per_s_per_core": 800,
}
LOAD = ["--messages-per-year", "150e9", "--users", "300e6", "--peak-fanout", "30000"]


@pytest.fixture
def measured(tmp_path: Path) -> Path:
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(FIGURES))
    return path


def plan(*args: str) -> str:
    out = StringIO()
    call_command("capacity_plan", *args, stdout=out)
    return out.getvalue()


def line(text: str, what: str) -> str:
    return next(row for row in text.splitlines() if row.strip().split("  ")[0] == what)


def test_the_hand_sizing_150_billion_entries_at_50_bytes_is_7_5_tb(measured: Path) -> None:
    out = plan(*LOAD, "--entry-bytes", "50", "--measured", str(measured))
    assert "7.50 TB" in line(out, "disk before replication")
    assert "150,000,000,000 entries x 50 B (given)" in line(out, "disk before replication")
    assert "22.50 TB" in line(out, "disk with replication x3")


def test_every_tier_is_sized_from_the_measured_figures(measured: Path) -> None:
    out = plan(*LOAD, "--measured", str(measured))
    daily = math.ceil(30_000 * 0.9 / (1_000 * 0.6))  # 45 workers
    assert line(out, "bulk.daily workers").split()[2] == str(daily)
    assert "6.00 TB" in line(out, "disk before replication")  # 150e9 x 40 B measured
    disk_rs = math.ceil(18.0 / (8 * 0.6))  # 18 TB replicated over 8 TB disks at 60%
    assert line(out, "RegionServers for disk").split()[3] == str(disk_rs)
    assert "32,000   = 2,000/s per core x 16 cores" in line(out, "rows/s per RegionServer")
    write_rs = math.ceil(30_000 / (32_000 * 0.6))  # 2 RegionServers of 16 cores for the writes
    assert line(out, "RegionServers for writes").split()[3] == str(write_rs)
    assert line(out, "Thrift gateway cores").split()[3] == str(math.ceil(30_000 / 6_000))
    memory_gb = 300e6 * 200 / 1e9 + 30e6 * 4_000 / 1e9  # 60 + 120 GB
    assert f"{memory_gb:,.2f} GB" in line(out, "memory in all")
    assert line(out, "masters").split()[1] == str(math.ceil(memory_gb / (25 * 0.6)))
    assert "measured 2026-11-23 21:00 UTC on test machine" in out


def test_each_node_is_sized_by_its_cores_and_the_plan_says_so(measured: Path) -> None:
    out = plan(*LOAD, "--regionserver-cores", "8", "--measured", str(measured))
    assert "(assumes a RegionServer of 8 cores writes 8 x the rows per CPU-second" in out
    assert "(assumes a master is one core" in out
    assert "(assumes a worker is one core" in out
    assert "16,000   = 2,000/s per core x 8 cores" in line(out, "rows/s per RegionServer")


def test_the_mysql_primary_sizes_its_writes_in_cores(measured: Path) -> None:
    out = plan(*LOAD, "--peak-sends", "2000", "--measured", str(measured))
    assert "30,000 recipients/s x 1 row" in line(out, "conversation rows/s, campaigns")
    assert "4,000   = 2,000 sends/s x 2 rows" in line(out, "conversation rows/s, 1:1 sends")
    assert "34,000   = 30,000 + 4,000" in line(out, "conversation rows/s")
    # 30,000 rows/s at the slower of new (100,000/s) and existing rows (50,000/s per core)
    assert "0.60 cores   = 30,000 rows/s / 50,000 rows/s per core" in line(
        out, "cores, campaign upserts"
    )
    # a whole campaign costs 25 µs a recipient on the primary, the new row 10 of them
    assert "0.45 cores   = 30,000 recipients/s x max(0, 25.0 - 10.0 µs)" in line(
        out, "cores, rest of a campaign"
    )
    assert "2.00 cores   = 2,000 sends/s / 1,000 sends/s per core" in line(out, "cores, 1:1 sends")
    cores = (0.6 + 0.45 + 2.0) / 0.6  # 5.08 at 60%
    assert f"{cores:.2f} cores   = (0.60 + 0.45 + 2.00) / 0.6" in line(out, "cores needed")
    assert line(out, "primaries needed").split()[2] == "1"
    sql = (0.6 + 0.45 + 30_000 / 200_000 + 2_000 / 800) / 0.6  # 6.17 with the SQL inbox
    assert f"{sql:.2f} cores" in line(out, "SQL inbox: cores needed")
    assert (
        f"One primary suffices: {cores:.1f} of its 16 cores for 34,000 conversation rows/s" in out
    )


def test_a_write_load_beyond_one_primary_says_how_to_split_it(measured: Path) -> None:
    out = plan(*LOAD, "--peak-sends", "20000", "--measured", str(measured))
    cores = (0.6 + 0.45 + 20.0) / 0.6  # 35.08: three primaries of 16 cores
    assert f"ceil({cores:.2f} cores / 16 cores per primary)" in line(out, "primaries needed")
    assert line(out, "primaries needed").split()[2] == "3"
    assert "One primary does not suffice" in out
    assert (
        "split the writes over 3 primaries by sharding the conversation table by owner_uid" in out
    )
    out = plan(
        *LOAD, "--peak-sends", "20000", "--mysql-primary-cores", "64", "--measured", str(measured)
    )
    assert "One primary suffices" in out


def test_the_shipped_measurements_plan_a_cluster() -> None:
    figures = capacity.load_measured()
    out = plan(*LOAD)
    assert f"measured {figures.date}" in out
    assert int(line(out, "RegionServers").split()[1]) >= 1
    assert int(line(out, "primaries needed").split()[2]) >= 1


def test_bad_input_is_one_readable_line(measured: Path, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--users must be a positive number"):
        plan("--messages-per-year", "1e9", "--users", "-5", "--peak-fanout", "10")
    with pytest.raises(CommandError, match=r"run scripts/measure_capacity\.py first"):
        plan(*LOAD, "--measured", str(tmp_path / "absent.json"))
    (tmp_path / "partial.json").write_text(json.dumps({"date": "x"}))
    with pytest.raises(CommandError, match="the measurements lack"):
        plan(*LOAD, "--measured", str(tmp_path / "partial.json"))
