"""Missive on a real Redis Cluster (scripts/services: 3 masters, 3 replicas on :7000-7005).

Run by ``make test``'s cluster pass (REDIS_CLUSTER=1, REDIS_URL naming a node); anywhere else
these tests fail, they do not skip. A campaign's keys spread over every master; the unread fast
path's multiplexed client routes each command to its slot's node and follows a changed map; a
node that lost its scripts is sent them again; a node that does not answer stops the start-up
check with one sentence; and a master killed with -9 mid-campaign (its replica takes over, it
comes back as a replica) leaves the campaign finished exactly once, with ``unread_rebuild``
restoring exact counters (replication is asynchronous: the promoted replica may miss the dead
master's last writes); a master frozen mid-campaign until its replica took over leaves it
finished exactly once too, and the counters' check sees that failover.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hiredis
import pytest
import redis
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings

from bulk.models import Campaign, ChannelSetting
from infra import checks
from infra import redis as config_redis
from infra.outages import store_unavailable
from infra.redis import by_user_slot, get_redis, primaries, slot_tag, user_slot
from infra.redis_mux import ClusterMux
from storage import msgkey
from storage.convcache import keys as cache_keys
from storage.convcache import lua as cache_scripts
from storage.convcache.redis_tier import probe_bulk
from storage.counters import epoch
from storage.counters import keys as unread_keys
from storage.counters import lua as counter_scripts
from storage.counters.store import unread_incr_many, unread_summary
from tests.bulk.helpers import Scenario, _assert_unread_is_one_each, business_with_followers, launch
from tests.bulk.test_faults import assert_every_recipient_exact, beat_and_status, reconnecting
from tests.conftest import services, wait_for

pytestmark = [pytest.mark.redis_cluster, pytest.mark.faults]
ROOT = Path(__file__).resolve().parents[2]
CLUSTER_DIR = ROOT / "var" / "services" / "redis-cluster"
RECIPIENTS = 3000


@pytest.fixture(autouse=True)
def _on_the_cluster() -> None:
    assert settings.REDIS_CLUSTER, "run with REDIS_CLUSTER=1 and REDIS_URL naming a cluster node"
    assert get_redis().cluster_info()["cluster_state"] == "ok"  # type: ignore[attr-defined]
    assert len(primaries()) == 3


def keys_per_master() -> dict[str, int]:
    return {node.name: int(node.redis_connection.dbsize()) for node in primaries()}


def test_one_campaigns_keys_spread_over_every_master(
    workers: Any, uids: Callable[..., Any]
) -> None:
    scenario = business_with_followers(uids(301))
    workers.start(queues="bulk.daily", concurrency=2)
    campaign = launch(scenario)
    wait_for(lambda: beat_and_status(campaign.pk) == "finished", timeout=120, every=0.5)
    per_master = keys_per_master()
    assert all(n > 0 for n in per_master.values()), per_master
    owners = {n.name: 0 for n in primaries()}
    client: Any = get_redis()
    for uid in scenario.followers:
        owners[client.get_node_from_key(unread_keys.unread(uid)).name] += 1
    assert all(n > 0 for n in owners.values()), owners
    assert {u for u in scenario.followers if unread_summary(u).total != 1} == set()


def test_a_batch_spanning_every_slot_counts_once_per_marker(uids: Callable[..., Any]) -> None:
    owners = uids(500)
    args = {"owner_uids": owners, "peer_uid": 7, "category": "business", "marker": "b1"}
    assert unread_incr_many(**args) == 500
    get_redis().script_flush()  # every primary forgets the scripts (a restart, a promotion)
    assert unread_incr_many(**args) == 0  # the replay: each slot's marker says done
    assert unread_incr_many(**{**args, "marker": "b2"}) == 500
    assert {u for u in owners if unread_summary(u).total != 2} == set()


def misplace_every_slot(manager: Any, node: Any) -> None:
    """A stale slot map in this process: every slot on ``node``."""
    for slot in list(manager.slots_cache):
        manager.slots_cache[slot] = [node]


def test_a_batch_on_a_stale_slot_map_still_counts_each_owner_once(
    uids: Callable[..., Any],
) -> None:
    """The slots' groups go one call per primary as the client's map says; with a map that puts
    every slot on one master, that master runs only the groups it serves and writes nothing for
    the others, which are then sent on their own (redirects followed): every owner counted once,
    and a replay with the same marker changes nothing."""
    owners = uids(600)
    client: Any = get_redis()
    manager = client.nodes_manager
    first = primaries()[0]
    try:
        misplace_every_slot(manager, first)
        args = {"owner_uids": owners, "peer_uid": 9, "category": "business", "marker": "stale1"}
        assert unread_incr_many(**args) == 600
        misplace_every_slot(manager, first)
        assert unread_incr_many(**args) == 0
    finally:
        manager.initialize()
    assert {u for u in owners if unread_summary(u).total != 1} == set()
    by_master = {n.name: 0 for n in primaries()}
    for uid in owners:
        by_master[client.get_node_from_key(unread_keys.unread(uid)).name] += 1
    assert all(n > 0 for n in by_master.values()), by_master  # the batch really spanned them


def owners_in_slot(slot: int, count: int, start: int = 2_000_000_000) -> list[int]:
    """``count`` uids whose per-user keys live in ``slot`` (no database rows: counters only)."""
    found: list[int] = []
    uid = start
    while len(found) < count:
        if user_slot(uid) == slot:
            found.append(uid)
        uid += 1
    return found


def node_of(slot: int) -> Any:
    """The primary serving ``slot``, as the cluster says now (the client's map refreshed)."""
    client: Any = get_redis()
    client.nodes_manager.initialize()
    return client.nodes_manager.slots_cache[slot][0]


def slots_of(node: Any) -> list[int]:
    cache = get_redis().nodes_manager.slots_cache  # type: ignore[attr-defined]
    return [s for s in range(16384) if cache[s][0].name == node.name]


def keys_in(node: Any, slot: int) -> list[str]:
    found = node.redis_connection.execute_command("CLUSTER GETKEYSINSLOT", slot, 10_000)
    return [k if isinstance(k, str) else k.decode() for k in found]


def set_slot(slot: int, *args: str) -> None:
    for node in primaries():
        node.redis_connection.execute_command("CLUSTER SETSLOT", slot, *args)


def migrate(source: Any, target: Any, keys: list[str]) -> None:
    source.redis_connection.execute_command(
        "MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *keys
    )


def begin_move(slot: int, source: Any, target: Any) -> str:
    """Mark ``slot`` IMPORTING on ``target`` and MIGRATING on ``source``; ``target``'s id."""
    target_id = target.redis_connection.execute_command("CLUSTER MYID")
    source_id = source.redis_connection.execute_command("CLUSTER MYID")
    target.redis_connection.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
    source.redis_connection.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)
    return target_id if isinstance(target_id, str) else target_id.decode()


def move_slot(slot: int, source: Any, target: Any) -> None:
    """Hand ``slot`` and its keys from ``source`` to ``target`` as ``redis-cli --cluster
    reshard`` does: IMPORTING / MIGRATING, MIGRATE of every key, then NODE on every master."""
    target_id = begin_move(slot, source, target)
    left = keys_in(source, slot)
    if left:
        migrate(source, target, left)
    set_slot(slot, "NODE", target_id)


def test_a_group_in_a_migrating_slot_writes_nothing_until_it_runs_whole(
    uids: Callable[..., Any],
) -> None:
    """A batch's groups run in one call per primary (``_per_node.lua``); a group whose slot is
    half moved (one owner's counts already on the new node) raises on that owner's read before
    anything of the group is written, the group answers ``false`` and the rest of the call runs.
    Sent again once the slot has moved, with the client's map still naming the old node, every
    owner is counted once."""
    first, second = primaries()[:2]
    slot, stable = slots_of(first)[:2]
    a, b = owners_in_slot(slot, 2)
    (c,) = owners_in_slot(stable, 1)

    def count(marker: str) -> int:
        return unread_incr_many(
            owner_uids=[a, b, c], peer_uid=7, category="business", marker=marker
        )

    assert count("m0") == 3
    moved = False
    try:
        target_id = begin_move(slot, first, second)
        migrate(first, second, [unread_keys.unread(b)])  # b is on the new node, a not yet

        text = counter_scripts.registry.per_node_script("incr_many").script
        groups = [
            [unread_keys.applied_marker_in(slot_tag(slot), "m1"), *unread_keys.unread_many([a, b])],
            [unread_keys.applied_marker_in(slot_tag(stable), "m1"), unread_keys.unread(c)],
        ]
        for honour_marker in ("1", "0"):  # without one, the script's first write is to an owner
            argv: list[Any] = [5, 7, "business", 1, honour_marker, 3600]
            for group in groups:
                argv += [len(group), *group]
            reply = first.redis_connection.eval(text, 1, groups[1][0], *argv)
            assert reply == [None, 1]  # the half-moved group refused, the other one counted
            assert first.redis_connection.hget(unread_keys.unread(a), "t") == b"1"  # a untouched
            here = keys_in(first, slot)
            assert unread_keys.unread(a) in here
            assert groups[0][0] not in here  # nor its marker taken

        migrate(first, second, here)
        set_slot(slot, "NODE", target_id)
        moved = True
        client: Any = get_redis()
        client.nodes_manager.slots_cache[slot] = [first]  # this process's map: still the old node
        assert count("m1") == 2  # c: done before, under the same marker
        assert count("m1") == 0
        assert {u: unread_summary(u).total for u in (a, b, c)} == {a: 2, b: 2, c: 3}
    finally:
        if moved:
            move_slot(slot, second, first)
        else:  # stopped half way: the moved key comes back (ASKING: second only imports it)
            first.redis_connection.execute_command("CLUSTER SETSLOT", slot, "STABLE")
            pipe = second.redis_connection.pipeline(transaction=False)
            pipe.execute_command("ASKING")
            pipe.execute_command(
                "MIGRATE", first.host, first.port, "", 0, 5000, "KEYS", unread_keys.unread(b)
            )
            pipe.execute()
            set_slot(slot, "STABLE")
    # back where it was, as every node says: the masters were told at once, their replicas (which
    # the client's map may be read from) hear it by gossip (a clean-clone run read the old owner)
    wait_for(lambda: node_of(slot).name == first.name, timeout=10, every=0.2)


def test_a_read_only_script_runs_once_per_primary_and_per_slot_on_a_stale_map(
    uids: Callable[..., Any],
) -> None:
    """``read_by_node`` (a fan-out batch's conversation-cache probe): one call per primary over
    all its slots' keys; on a map that puts every slot on one master, that master refuses the
    keys it does not serve and those slots run one group each, where they are. Every owner's
    answer is the same either way."""
    owners = uids(600)
    client: Any = get_redis()
    cached = {u: f"g{u}" for u in owners[::3]}
    for uid, generation in cached.items():
        client.hset(cache_keys.entries(uid), "_g", generation)
    groups = by_user_slot(owners)
    named = {
        slot: [k for u in group for k in (cache_keys.entries(u), cache_keys.hbase_indexed(u))]
        for slot, group in groups.items()
    }

    def calls() -> int:
        return len(cache_scripts.registry.read_by_node("generations", named, ["0"]))

    assert calls() == 3
    assert probe_bulk(owners).generations == cached
    manager = client.nodes_manager
    first = primaries()[0]
    try:
        misplace_every_slot(manager, first)
        assert probe_bulk(owners).generations == cached
        misplace_every_slot(manager, first)
        assert calls() > 3  # the slots the stale map misplaced ran one group each
    finally:
        manager.initialize()


def test_the_fast_path_client_routes_by_slot_and_follows_a_new_map(
    uids: Callable[..., Any],
) -> None:
    users = uids(64)
    client: Any = get_redis()
    client.mset_nonatomic({unread_keys.unread(u).replace("unread", "mux"): u for u in users})

    async def main() -> tuple[list[Any], list[Any], list[Any]]:
        client = ClusterMux(settings.REDIS_URL)
        try:
            commands = [["GET", unread_keys.unread(u).replace("unread", "mux")] for u in users]
            first = await client.pipeline(commands)
            client.owner = [client.owner[0]] * len(client.owner)  # a stale map: one node for all
            stale = await client.pipeline(commands)
            again = await client.pipeline(commands)
            return first, stale, again
        finally:
            await client.aclose()

    first, stale, again = asyncio.run(main())
    assert first == again == [str(u).encode() for u in users]
    moved = [r for r in stale if isinstance(r, hiredis.ReplyError)]
    assert moved
    assert all(str(r).startswith("MOVED") for r in moved)


def start_up_check_with(**changed: Any) -> list[Any]:
    """``checks.check_redis`` under ``changed`` settings, with a client made for them."""
    with override_settings(**changed):
        config_redis.get_redis.cache_clear()
        try:
            return checks.check_redis()
        finally:
            config_redis.get_redis.cache_clear()


def test_a_cluster_node_that_does_not_answer_stops_the_start_up_check() -> None:
    [error] = start_up_check_with(REDIS_URL="redis://127.0.0.1:7999/0")
    assert error.id == "missive.E003"
    assert error.msg.startswith("REDIS_URL=redis://127.0.0.1:7999/0 but Redis does not answer")


def test_a_redis_url_node_that_does_not_answer_is_passed_over_for_redis_cluster_nodes() -> None:
    """REDIS_URL names a node nothing answers at (a node that died, or was replaced): with a live
    node in REDIS_CLUSTER_NODES the start-up check passes, and both clients (redis-py's and the
    unread fast path's) find the cluster and read and write through it."""
    live = settings.REDIS_URL.rsplit("/", 2)[1]  # host:port of the node the tests use
    with override_settings(REDIS_URL="redis://127.0.0.1:7999/0", REDIS_CLUSTER_NODES=[live]):
        config_redis.get_redis.cache_clear()
        try:
            assert checks.check_redis() == []
            get_redis().set("seeded:{a}", "yes")
            client = ClusterMux(settings.REDIS_URL, seeds=config_redis.seed_nodes())
            [through_mux] = asyncio.run(_get_and_close(client, "seeded:{a}"))
        finally:
            config_redis.get_redis.cache_clear()
    assert through_mux == b"yes"


async def _get_and_close(client: ClusterMux, key: str) -> list[Any]:
    try:
        return await client.pipeline([["GET", key]])
    finally:
        await client.aclose()


def test_redis_cluster_nodes_not_host_and_port_stop_the_start_up_check() -> None:
    [error] = start_up_check_with(REDIS_CLUSTER_NODES=["7001"])
    assert error.id == "missive.E003"
    assert error.msg == "REDIS_CLUSTER_NODES: '7001' is not host:port (e.g. 10.0.0.2:7000)"


def test_a_cluster_that_does_not_answer_is_an_outage_to_wait_out_not_a_bug() -> None:
    with override_settings(REDIS_URL="redis://127.0.0.1:7999/0"):
        config_redis.get_redis.cache_clear()
        try:
            with pytest.raises(Exception) as raised:  # noqa: PT011 - redis-py's cluster error
                config_redis.get_redis()
        finally:
            config_redis.get_redis.cache_clear()
    assert store_unavailable(raised.value)  # so: 503 with Retry-After, batches put back


def test_a_broker_on_a_cluster_node_stops_the_start_up_check() -> None:
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:7001/0"):
        [error] = checks.check_redis()
    assert error.id == "missive.E005"
    assert "give Celery a plain Redis" in error.msg
    assert checks.check_redis() == []  # the real settings: the broker on the plain Redis


# -- a master killed with -9 mid-campaign --------------------------------------------------------
def master_pid_and_port() -> tuple[int, int]:
    """A master other than the one REDIS_URL names (every client's first contact)."""
    seed = int(settings.REDIS_URL.rsplit(":", 1)[1].split("/")[0])
    node = next(n for n in primaries() if int(n.port) != seed)
    pid = int((CLUSTER_DIR / str(node.port) / "redis.pid").read_text().strip())
    return pid, int(node.port)


@pytest.fixture
def campaign_setup(workers: Any, uids: Callable[[int], list[int]]) -> Iterator[Scenario]:
    workers.env.update({"BULK_LEASE_S": "3"})
    with override_settings(BULK_LEASE_S=3):
        ChannelSetting.objects.create(channel="daily", rate_per_s=1000, batch_size=200)
        scenario = business_with_followers(uids(RECIPIENTS + 1), blocked_every=101)
        workers.start(queues="bulk.daily", concurrency=2)
        yield scenario
    services("start", "redis-cluster")  # whatever happened, six nodes and cluster_state:ok


def test_a_msgkey_lease_on_a_frozen_master_is_traded_for_one_on_another_master(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process's msgkey node id is leased on a master that freezes when the lease is due a
    renewal: the next key comes from another node id, leased on a master that answers (another
    one, or the frozen one's replica once promoted: this process's timeout, 5 s, outlasts the
    cluster-node-timeout), still above every key issued before (storage/msgkey.py)."""
    seed = int(settings.REDIS_URL.rsplit(":", 1)[1].split("/")[0])
    port = next(int(n.port) for n in primaries() if int(n.port) != seed)
    on_it = next(n for n in range(msgkey.MAX_NODE + 1) if _lease_port(n) == port)
    generator = msgkey.MsgkeyGenerator()
    monkeypatch.setattr(msgkey.random, "randrange", lambda _: on_it)
    first = generator.next()
    assert msgkey.node_of(first) == on_it
    monkeypatch.undo()
    generator._lease.renewed_at -= msgkey.RENEW_EVERY_MS / 1000  # type: ignore[union-attr]
    services("freeze", f"redis-cluster-node:{port}")
    try:
        second = generator.next()
    finally:
        services("thaw", f"redis-cluster-node:{port}")
        services("start", "redis-cluster")
        get_redis().nodes_manager.initialize()  # type: ignore[attr-defined]
    assert msgkey.node_of(second) != on_it
    assert second > first
    lease = generator._lease
    assert lease is not None
    assert lease.node == msgkey.node_of(second)  # held where the cluster serves it now
    assert get_redis().get(f"{{msgkey:{lease.node}}}:lease") == lease.token.encode()


def _lease_port(node_id: int) -> int:
    client: Any = get_redis()
    return int(client.get_node_from_key(f"{{msgkey:{node_id}}}:lease").port)


def test_a_master_frozen_until_its_replica_took_over_moves_the_counters_epoch() -> None:
    """A master frozen until the cluster promoted its replica (cluster-node-timeout), then thawed
    (it rejoins as a replica): the counters' check (the beat's ``unread.counters_check``) sees the
    failover, although this process sent nothing meanwhile and its slot map still names the old
    master: the promoted replica may lack the master's last writes, so every user's counters are
    due a repair on their next read (storage.counters.epoch). Before, the check read the run_ids
    of the primaries in the stale map, the same three, and the epoch stayed."""
    epoch.check_restart()  # records the cluster's current run
    before = get_redis().get(unread_keys.EPOCH)
    assert epoch.check_restart() is False
    seed = int(settings.REDIS_URL.rsplit(":", 1)[1].split("/")[0])
    port = next(int(n.port) for n in primaries() if int(n.port) != seed)
    services("freeze", f"redis-cluster-node:{port}")
    try:
        wait_for(lambda: _failed_over(seed, port), timeout=30, every=0.5)
    finally:
        services("thaw", f"redis-cluster-node:{port}")
        services("start", "redis-cluster")
    assert epoch.check_restart() is True
    assert get_redis().get(unread_keys.EPOCH) != before


def _failed_over(seed: int, port: int) -> bool:
    """The seed node's view: the node on ``port`` is no longer a serving master."""
    view = redis.Redis(host="127.0.0.1", port=seed).execute_command("CLUSTER NODES")
    flags = set(view[f"127.0.0.1:{port}"]["flags"].split(","))  # redis-py parses the reply
    return "fail" in flags or "slave" in flags


def test_a_master_frozen_mid_campaign_the_campaign_finishes_exactly_once(
    campaign_setup: Scenario,
) -> None:
    """kill -STOP of one master mid-campaign until its replica is promoted (cluster-node-timeout,
    2 s); the master, thawed, rejoins as a replica. The batches that
    met it wait (a timeout, then its breaker) and are sent again; the campaign finishes exactly
    once, and every recipient reads one unread message from the sender as the API would read it
    (the counters' check sees the failover and each read repairs what the promoted replica may
    have missed; no ``unread_rebuild`` here)."""
    scenario = campaign_setup
    campaign = launch(scenario)
    wait_for(lambda: Campaign.objects.get(pk=campaign.pk).delivered >= RECIPIENTS // 4, timeout=120)
    seed = int(settings.REDIS_URL.rsplit(":", 1)[1].split("/")[0])
    port = next(int(n.port) for n in primaries() if int(n.port) != seed)
    services("freeze", f"redis-cluster-node:{port}")
    try:
        wait_for(lambda: _failed_over(seed, port), timeout=30, every=0.5)
        assert Campaign.objects.get(pk=campaign.pk).delivered < len(scenario.expected), "too late"
    finally:
        services("thaw", f"redis-cluster-node:{port}")
        services("start", "redis-cluster")
        get_redis().nodes_manager.initialize()  # type: ignore[attr-defined]
    wait_for(reconnecting(lambda: beat_and_status(campaign.pk) == "finished"), 300, every=0.5)
    assert_every_recipient_exact(
        Campaign.objects.get(pk=campaign.pk), scenario, redis_lost_writes=True
    )


def test_a_master_killed_mid_campaign_fails_over_and_the_campaign_finishes_once(
    campaign_setup: Scenario,
) -> None:
    scenario = campaign_setup
    campaign = launch(scenario)
    wait_for(lambda: Campaign.objects.get(pk=campaign.pk).delivered >= RECIPIENTS // 4, timeout=120)
    pid, port = master_pid_and_port()
    os.kill(pid, signal.SIGKILL)
    survivor: Any = get_redis()
    wait_for(lambda: _serves_again(survivor, port), timeout=60, every=0.5)
    assert Campaign.objects.get(pk=campaign.pk).delivered < len(scenario.expected), "too late"
    services("start", "redis-cluster")  # the dead master comes back, as its successor's replica
    assert port not in {int(n.port) for n in primaries()}
    wait_for(reconnecting(lambda: beat_and_status(campaign.pk) == "finished"), 300, every=0.5)
    call_command("unread_rebuild", "--all")  # what the failover lost, recomputed from the truth
    _assert_unread_is_one_each(scenario.expected, scenario.sender)
    assert_every_recipient_exact(
        Campaign.objects.get(pk=campaign.pk), scenario, redis_lost_writes=True
    )


def _serves_again(client: Any, dead_port: int) -> bool:
    """Every slot has a live master again (the dead one's replica was promoted)."""
    try:
        client.nodes_manager.initialize()
        alive = {int(n.port) for n in client.get_primaries()}
        return dead_port not in alive and client.cluster_info()["cluster_state"] == "ok"
    except Exception:
        time.sleep(0.2)
        return False
