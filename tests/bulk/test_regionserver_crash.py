"""A RegionServer killed with -9 in the middle of a campaign's fan-out on the HBase inbox
(``scripts/services kill hbase-regionserver:N``), with real Celery workers delivering.

ZooKeeper declares the server dead when its session expires (10 s for the RegionServers,
scripts/services), and the master splits its WAL and reopens its regions on the two others
(ServerCrashProcedure). Until then the Thrift gateway's client waits on those regions: a worker's
call times out and its batch is put back, to be retried whole (its puts are idempotent). The
campaign finishes with every recipient exactly once; a read of the dead server's regions answers
again (the test prints after how long); the conversation list answers all along from its other
tiers (Redis, MariaDB). The server is started again, and the inbox regions spread back over all
three (``RegionTool.java spread``), whatever the outcome.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from bulk.models import Campaign, CampaignStatus, ChannelSetting
from infra import breakers, hbase
from infra.hbase_tables import full_name
from infra.redis import get_redis
from messaging.models import Conversation
from storage.counters import keys as counter_keys
from storage.inbox import _cached, get_inbox
from storage.inbox.hbase import salt
from tests.api.factories import Api
from tests.bulk.helpers import Scenario, business_with_followers, launch
from tests.bulk.test_faults import assert_every_recipient_exact, beat_and_status, services
from tests.bulk.test_region_moves import region_tool
from tests.conftest import wait_for
from tests.infra.test_metrics import scrape, value

pytestmark = [pytest.mark.worker, pytest.mark.faults, pytest.mark.hbase_faults, pytest.mark.hbase]
ROOT = Path(__file__).resolve().parents[2]
HBASE_DIR = ROOT / "var" / "services" / "hbase"
RECIPIENTS = 2000
LEASE_S = 3
API_TIMEOUT_MS = 2000  # an API process's HBase timeout (STORE_TIMEOUTS): the probes' resolution
BREAKER_GAUGE = "missive_store_breaker_state"
BACK_WITHIN_S = 180  # a bound for the wait, not a figure the test asserts


def regions_by_port(table: bytes) -> dict[bytes, int]:
    """Each region's start key and the port of the RegionServer serving it."""
    regions = hbase.call(lambda conn: conn.client.getTableRegions(table))
    return {r.startKey: r.port for r in regions}


def regionserver_number(port: int) -> int:
    """The N of ``hbase-regionserver:N`` listening on ``port`` (its JVM's command line)."""
    flag = f"-Dhbase.regionserver.port={port}".encode()
    for pidfile in HBASE_DIR.glob("regionserver-*.pid"):
        cmdline = Path(f"/proc/{pidfile.read_text().strip()}/cmdline")
        if cmdline.exists() and flag in cmdline.read_bytes().split(b"\0"):
            return int(pidfile.stem.rsplit("-", 1)[1])
    raise AssertionError(f"no RegionServer of scripts/services listens on {port}")


def victim_port() -> int:
    """A RegionServer serving inbox regions but not hbase:meta (two of the three qualify)."""
    inbox = regions_by_port(full_name("inbox"))
    meta = set(regions_by_port(b"hbase:meta").values())
    candidates = sorted(set(inbox.values()) - meta)
    assert candidates, f"every inbox region is on the hbase:meta server: {inbox}"
    return max(candidates, key=list(inbox.values()).count)


def delivered_in(scenario: Scenario, salts: set[bytes], n: int = 1) -> list[int]:
    """``n`` recipients already delivered whose inbox rows live in one of ``salts``' regions."""
    owners = Conversation.objects.filter(peer_uid=scenario.sender).values_list(
        "owner_uid", flat=True
    )
    inbox = get_inbox()
    found = (u for u in owners if salt(u) in salts and inbox.count(u, scenario.sender) == 1)
    chosen = list(itertools.islice(found, n))
    assert len(chosen) == n, "not enough delivered recipients in the doomed regions yet"
    return chosen


def unread_due_a_repair(api: Api, owners: list[int]) -> list[float]:
    """As after a Redis restart (the counters' epoch moved), each owner's unread read first
    rebuilds their counters from the inbox: here from the dead server's regions. Each answers
    200 with the count Redis holds (1); the seconds each took."""
    get_redis().set(counter_keys.EPOCH, "moved-by-the-test")
    seconds = []
    for uid in owners:
        started = time.monotonic()
        assert api.unread(uid)["total"] == 1
        seconds.append(time.monotonic() - started)
    return seconds


def history_answers(api: Api, owner: int, peer: int, msgkey: int) -> bool:
    """GET the owner's history with ``peer``: True once it answers with the message."""
    breakers.reset()  # the store's own recovery, not this process's breaker (1 s more at most)
    status, body = api.call("GET", f"/users/{owner}/conversations/{peer}/messages")
    return status == 200 and [int(m["msgkey"]) for m in body["results"]] == [msgkey]


def alternating_reads(api: Api, owners: list[tuple[str, int]], peer: int) -> list[tuple[str, int]]:
    """Three rounds of one history read per (name, owner), in turn: (the name, the status). Two
    reads of a dead server's rows in a row are what opened HBase's one breaker for everyone."""
    return [
        (who, api.call("GET", f"/users/{uid}/conversations/{peer}/messages")[0])
        for _ in range(3)
        for who, uid in owners
    ]


def listed(api: Api, owner: int, peer: int) -> bool:
    """The conversation list answers (no 500 nor 503) and shows the conversation with ``peer``."""
    status, body = api.call("GET", f"/users/{owner}/conversations")
    assert status == 200, f"the conversation list failed during the crash: {status} {body}"
    return peer in {int(c["peer_uid"]) for c in body["results"]}


@pytest.fixture
def campaign_setup(workers: Any, uids: Callable[[int], list[int]]) -> Iterator[Scenario]:
    """An HBase-inbox campaign of RECIPIENTS at 250 a second (8 s: the kill lands inside it),
    two daily workers, short leases, the API's HBase timeout in this process."""
    workers.env.update({"INBOX_BACKEND": "hbase", "BULK_LEASE_S": str(LEASE_S)})
    timeouts = {**settings.HBASE, "TIMEOUT_MS": API_TIMEOUT_MS}
    with override_settings(INBOX_BACKEND="hbase", BULK_LEASE_S=LEASE_S, HBASE=timeouts):
        _cached.cache_clear()
        hbase.reset_pools()
        ChannelSetting.objects.create(channel="daily", rate_per_s=250, batch_size=125)
        scenario = business_with_followers(uids(RECIPIENTS + 1), blocked_every=101)
        workers.start(queues="bulk.daily", concurrency=2)
        yield scenario
    _cached.cache_clear()
    hbase.reset_pools()


@pytest.fixture
def restart_regionserver() -> Iterator[list[int]]:
    """Whatever the test killed (its N appended) is started again, the inbox spread over all."""
    killed: list[int] = []
    yield killed
    for n in killed:
        services("start", f"hbase-regionserver:{n}")
        tool = region_tool("spread", full_name("inbox").decode())
        assert tool.wait(timeout=300) == 0, "RegionTool spread failed"
        hbase.reset_pools()


def back_after(api: Api, owner: int, peer: int, msgkey: int, since: float) -> tuple[float, int]:
    """Seconds from ``since`` until the owner's history answers with the message; before each
    try, a conversation-list read, which must answer. Returns the seconds and those reads."""
    lists = 0
    while True:
        assert listed(api, owner, peer), "the conversation list lost the campaign's conversation"
        lists += 1
        if history_answers(api, owner, peer, msgkey):
            return time.monotonic() - since, lists
        waited = time.monotonic() - since
        assert waited < BACK_WITHIN_S, f"the dead server's regions still fail after {waited:.0f}s"
        time.sleep(0.5)


def test_a_regionserver_killed_mid_campaign(
    campaign_setup: Scenario, restart_regionserver: list[int], bff: Api
) -> None:
    scenario, started = campaign_setup, time.monotonic()
    port = victim_port()
    by_salt = {k[:1] or b"\x00": at for k, at in regions_by_port(full_name("inbox")).items()}
    doomed = {s for s, at in by_salt.items() if at == port}
    campaign = launch(scenario)
    wait_for(lambda: Campaign.objects.get(pk=campaign.pk).delivered >= RECIPIENTS // 4, timeout=120)
    (owner, *due), msgkey = (
        delivered_in(scenario, doomed, 4),
        Campaign.objects.get(pk=campaign.pk).msgkey,
    )
    (elsewhere,) = delivered_in(scenario, set(by_salt) - doomed)
    assert msgkey is not None
    assert history_answers(bff, elsewhere, scenario.sender, msgkey)
    wait_for(lambda: hbase.regions.server_of("inbox", b"\x00") != "")  # this process's map
    restart_regionserver.append(regionserver_number(port))
    killed_at = time.monotonic()
    services("kill", f"hbase-regionserver:{restart_regionserver[0]}")
    during = Campaign.objects.get(pk=campaign.pk).delivered
    reads = alternating_reads(
        bff, [("dead", owner), ("dead", owner), ("live", elsewhere)], scenario.sender
    )
    # the dead server's rows fail (503); the live servers' rows never do: each RegionServer has
    # its own breaker (infra/hbase.py), so the dead one's no-answers close nothing to others
    assert {status for who, status in reads if who == "live"} == {200}, reads
    unread_s = unread_due_a_repair(bff, due)
    # the first repair met the dead regions and was put off; the next were put off at once,
    # not each after HBase's timeout (HBase's own breaker stays closed in a partial outage)
    assert max(unread_s[1:]) < 0.5, unread_s
    samples = scrape()
    gauges = {dict(labels)["breaker"] for name, labels in samples if name == BREAKER_GAUGE}
    assert "unread-repairs" not in gauges  # work's breaker, not a store's: it must not page
    assert value(samples, "missive_unread_repairs_deferred_total") >= len(due)
    back_s, lists = back_after(bff, owner, scenario.sender, msgkey, killed_at)
    wait_for(lambda: port not in regions_by_port(full_name("inbox")).values(), every=0.2)
    moved_s = time.monotonic() - killed_at
    print(
        f"\nRegionServer :{port} (hbase-regionserver:{restart_regionserver[0]}, {len(doomed)} "
        f"inbox regions) killed with -9 at {during} of {len(scenario.expected)} delivered: a "
        f"history read of its regions answered again after {back_s:.1f} s; {lists} "
        "conversation-list reads meanwhile (one right after the kill), all 200; all its inbox "
        f"regions reassigned (hbase:meta) after {moved_s:.1f} s; unread of users due a repair "
        f"in its regions: {', '.join(f'{x:.2f}' for x in unread_s)} s; history reads right "
        f"after the kill, alternating: {reads}"
    )
    assert during < len(scenario.expected), "the crash came too late"
    wait_for(
        lambda: beat_and_status(campaign.pk) == CampaignStatus.FINISHED, timeout=300, every=0.5
    )
    print(
        f"campaign finished {time.monotonic() - killed_at:.1f} s after the kill; test body "
        f"{time.monotonic() - started:.1f} s"
    )
    assert_every_recipient_exact(Campaign.objects.get(pk=campaign.pk), scenario)
