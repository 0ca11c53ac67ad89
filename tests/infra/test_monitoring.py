"""The alert rules and the Grafana dashboard in docs/monitoring/: valid for Prometheus's own
checker (promtool, unpacked by ``scripts/promtool up``), their alerts fire as their unit tests say,
and every Missive series they name is one that ``/metrics`` exports."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from django.test import Client

from tests.conftest import ROOT

MONITORING = ROOT / "docs" / "monitoring"
SERIES = re.compile(r"\bmissive_[a-z_]+")
SUFFIXES = ("_bucket", "_count", "_sum")


def promtool(*args: str, cwd: Path = MONITORING) -> subprocess.CompletedProcess[str]:
    found = subprocess.run([str(ROOT / "scripts" / "promtool"), "path"], capture_output=True)
    assert found.returncode == 0, "promtool missing: run scripts/promtool up (make test does)"
    binary = found.stdout.decode().strip()
    return subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def dashboard_exprs() -> list[str]:
    board = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]]


def test_the_alert_rules_pass_promtool_check() -> None:
    result = promtool("check", "rules", "alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_alerts_fire_as_their_unit_tests_expect() -> None:
    result = promtool("test", "rules", "alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    """Each panel's query, checked by promtool as a recording rule (the same PromQL parser)."""
    rules = [
        {"record": f"missive_dashboard:panel_{i}", "expr": expr}
        for i, expr in enumerate(dashboard_exprs())
    ]
    (tmp_path / "panels.yml").write_text(
        json.dumps({"groups": [{"name": "panels", "rules": rules}]})
    )
    result = promtool("check", "rules", "panels.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.django_db
def test_every_series_the_rules_and_dashboard_name_is_exported() -> None:
    Client().get("/api/v1/schema/")  # one request, so the request histogram has a series
    reply = Client().get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert reply.status_code == 200
    exported = set(SERIES.findall(reply.content.decode()))
    named = set(SERIES.findall((MONITORING / "alerts.yml").read_text()))
    named |= {name for expr in dashboard_exprs() for name in SERIES.findall(expr)}
    missing = {n for n in named if n not in exported and _base(n) not in exported}
    assert not missing, f"named in docs/monitoring but not exported at /metrics: {sorted(missing)}"


def _base(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name
