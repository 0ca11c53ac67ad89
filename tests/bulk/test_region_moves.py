"""Regions of the inbox table move between HBase RegionServers in the middle of a campaign's
fan-out (the Java Admin's move, scripts/hbase/RegionTool.java), with real Celery workers
delivering on the HBase inbox: the campaign still finishes, every recipient exactly once.

A move closes the region on one server and opens it on the next; writes that meet the closed
region fail over inside the Thrift gateway's HBase client (NotServingRegion, relocate, retry) or,
past its retries, come back to the batch, which is retried as a whole (its puts are idempotent).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from bulk.models import Campaign, CampaignStatus, ChannelSetting
from infra import hbase
from infra.hbase_tables import full_name
from storage.inbox import _cached
from tests.bulk.helpers import Scenario, business_with_followers, launch
from tests.bulk.test_faults import assert_every_recipient_exact, beat_and_status
from tests.conftest import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.faults, pytest.mark.hbase_faults, pytest.mark.hbase]
ROOT = Path(__file__).resolve().parents[2]
RECIPIENTS = 4000
MOVES = 8  # half of the 16 salt regions
LEASE_S = 3


def region_tool(*args: str) -> subprocess.Popen[str]:
    classpath = f"{ROOT / 'var' / 'services' / 'hbase' / 'conf'}:{ROOT / 'var' / 'hbase' / 'lib'}/*"
    tool = str(ROOT / "scripts" / "hbase" / "RegionTool.java")
    return subprocess.Popen(
        [
            "java",
            f"-Dhbase.log.dir={ROOT / 'var' / 'services' / 'hbase'}",
            "-Dhbase.log.file=tools.log",
            "-cp",
            classpath,
            tool,
            *args,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def regions_by_server() -> dict[str, str]:
    regions = hbase.call(lambda conn: conn.client.getTableRegions(full_name("inbox")))
    return {r.name.decode(): f"{r.serverName.decode()}:{r.port}" for r in regions}


@pytest.fixture
def slow_campaign(workers: Any, uids: Any) -> Iterator[Scenario]:
    """An HBase-inbox campaign slow enough (250 a second) for the moves to land inside it."""
    workers.env.update({"INBOX_BACKEND": "hbase", "BULK_LEASE_S": str(LEASE_S)})
    with override_settings(INBOX_BACKEND="hbase", BULK_LEASE_S=LEASE_S):
        _cached.cache_clear()
        ChannelSetting.objects.create(channel="daily", rate_per_s=250, batch_size=250)
        scenario = business_with_followers(uids(RECIPIENTS + 1), blocked_every=101)
        workers.start(queues="bulk.daily", concurrency=2)
        yield scenario
    _cached.cache_clear()
    hbase.reset_pools()


def test_regions_moved_between_regionservers_mid_campaign(slow_campaign: Scenario) -> None:
    before = regions_by_server()
    tool = region_tool("move", full_name("inbox").decode(), str(MOVES), "--on-stdin")
    assert tool.stdout is not None
    assert tool.stdin is not None
    try:
        assert tool.stdout.readline().strip() == "ready"
        campaign = launch(slow_campaign)
        wait_for(lambda: Campaign.objects.get(pk=campaign.pk).delivered >= 500, timeout=120)
        tool.stdin.write("go\n")
        tool.stdin.flush()
        moved = [tool.stdout.readline()]
        during = Campaign.objects.get(pk=campaign.pk)  # right after the first move
        moved += list(tool.stdout)
        assert tool.wait(timeout=300) == 0
    finally:
        tool.kill()
    assert during.delivered < len(slow_campaign.expected), "the moves came too late"
    assert all(line.startswith("moved ") for line in moved)
    assert len(moved) == MOVES
    after = regions_by_server()
    assert sum(before[name] != after[name] for name in before) == MOVES
    wait_for(
        lambda: beat_and_status(campaign.pk) == CampaignStatus.FINISHED, timeout=300, every=0.5
    )
    assert_every_recipient_exact(Campaign.objects.get(pk=campaign.pk), slow_campaign)
