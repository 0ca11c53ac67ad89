"""The capacity planner: the hand sizing of the production write-ups comes out of it, every tier is
sized from the measured per-node figures with its arithmetic shown, and bad input is one line."""

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
    "hbase_rows_per_s_per_regionserver": 20_000,
    "fanout_per_s_per_worker": 1_000,
    "redis_bytes_per_user": 200,
    "redis_bytes_per_active_user": 4_000,
    "redis_ops_per_s_per_master": 100_000,
    "mysql_cold_pages_per_s_per_core": 300,
    "mysql_bytes_per_conversation": 150,
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
    memory_gb = 300e6 * 200 / 1e9 + 30e6 * 4_000 / 1e9  # 60 + 120 GB
    assert f"{memory_gb:,.2f} GB" in line(out, "memory in all")
    assert line(out, "masters").split()[1] == str(math.ceil(memory_gb / (25 * 0.6)))
    assert "measured 2026-11-23 21:00 UTC on test machine" in out


def test_the_shipped_measurements_plan_a_cluster() -> None:
    figures = capacity.load_measured()
    out = plan(*LOAD)
    assert f"measured {figures.date}" in out
    assert int(line(out, "RegionServers").split()[1]) >= 1


def test_bad_input_is_one_readable_line(measured: Path, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--users must be a positive number"):
        plan("--messages-per-year", "1e9", "--users", "-5", "--peak-fanout", "10")
    with pytest.raises(CommandError, match=r"run scripts/measure_capacity\.py first"):
        plan(*LOAD, "--measured", str(tmp_path / "absent.json"))
    (tmp_path / "partial.json").write_text(json.dumps({"date": "x"}))
    with pytest.raises(CommandError, match="the measurements lack"):
        plan(*LOAD, "--measured", str(tmp_path / "partial.json"))
