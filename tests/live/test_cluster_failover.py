"""Resume through a Redis Cluster failover: the master holding a user's live keys hands its slots
to its replica (``CLUSTER FAILOVER``, the manual failover an operator runs before maintenance),
and a device that was away resumes from its cursor with every event it missed, in order, each
once; the connected device keeps receiving. Run in ``make test``'s cluster pass.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from infra.redis import get_redis
from live import keys
from tests.conftest import wait_for
from tests.live.conftest import Device, Http, Opener, tablet_away

pytestmark = [pytest.mark.live, pytest.mark.redis_cluster, pytest.mark.faults]
Backend = tuple[Http, Http]


def msgkeys(device: Device, count: int) -> list[str]:
    return [device.next()["message"]["msgkey"] for _ in range(count)]


def fail_over(key: str) -> int:
    """Promote the replica of the master serving ``key``; its port, once it is the master."""
    cluster: Any = get_redis()
    master = cluster.get_node_from_key(key)
    node_id = cluster.get_redis_connection(master).execute_command("CLUSTER MYID")
    replicas = cluster.get_redis_connection(master).execute_command("CLUSTER REPLICAS", node_id)
    address = next(iter(replicas))  # redis-py parses the reply into {"host:port": node}
    port = int(_text(address).split("@")[0].rsplit(":", 1)[1])
    replica = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)
    replica.execute_command("CLUSTER FAILOVER")
    wait_for(lambda: _text(replica.execute_command("ROLE")[0]) == "master", timeout=30)
    # the node this process asks for its slot map learns of the promotion by gossip, a moment
    # after the replica itself: read the map again until it has (CI once read it too early)
    wait_for(lambda: _serves(cluster, key, port), timeout=30)
    return port


def _serves(cluster: Any, key: str, port: int) -> bool:
    cluster.nodes_manager.initialize()  # this process's slot map, for the check below
    return int(cluster.get_node_from_key(key).port) == port


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def test_a_device_resumes_without_a_gap_through_a_cluster_failover(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    alice, bob = uids(2)
    phone, cursor, missed = tablet_away(backend, open_device, alice, bob)

    new_master = fail_over(keys.log(bob))
    cluster: Any = get_redis()
    assert int(cluster.get_node_from_key(keys.log(bob)).port) == new_master
    missed.append(backend[1].send(alice, bob, "just after the failover"))
    back = open_device(backend[1].port, backend[0].token_for(bob, "tablet"), since=cursor)

    assert back.hello["resumed"] is True
    assert msgkeys(back, 3) == missed
    assert msgkeys(phone, 1) == missed[-1:]
    live = backend[0].send(alice, bob, "live after the failover")
    assert msgkeys(phone, 1) == msgkeys(back, 1) == [live]
    assert phone.quiet()
    assert back.quiet()
