"""Resume through a crashed gateway and a restarted Redis: a device that comes back with its last
cursor gets every event it missed, in order, each once, then live ones, or ``resync`` ``lost``
when Redis lost events it had been sent; never a silent gap. The gateways are never restarted
for Redis: their channel layer reconnects and live frames flow again.
"""

from __future__ import annotations

from typing import Any

import pytest

from infra.redis import get_redis
from live import keys
from tests.conftest import services
from tests.live.conftest import Device, Http, Opener, tablet_away

pytestmark = pytest.mark.live
Backend = tuple[Http, Http]


def msgkeys(device: Device, count: int) -> list[str]:
    return [device.next()["message"]["msgkey"] for _ in range(count)]


def test_a_device_whose_gateway_crashed_resumes_on_another_one(
    backend: Backend, uids: Any, open_device: Opener, spare_gateway: Any
) -> None:
    alice, bob = uids(2)
    port, gateway = spare_gateway
    phone = open_device(port, backend[0].token_for(bob, "phone"))
    backend[0].send(alice, bob, "before the crash")
    cursor = phone.next()["cursor"]

    gateway.kill()  # SIGKILL: no close frame, no presence removed, no group left
    gateway.wait(timeout=15)
    missed = [backend[0].send(alice, bob, f"while down {i}") for i in range(3)]
    back = open_device(backend[1].port, backend[1].token_for(bob, "phone"), since=cursor)

    assert back.hello["resumed"] is True
    assert msgkeys(back, 3) == missed
    live = backend[0].send(alice, bob, "live again")
    assert msgkeys(back, 1) == [live]
    assert back.quiet()


@pytest.mark.faults
def test_through_a_redis_restart_devices_resume_from_the_log_and_live_frames_flow_again(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    """A graceful restart keeps the whole log (AOF): the contract asks for the replay."""
    alice, bob = uids(2)
    phone, cursor, missed = tablet_away(backend, open_device, alice, bob)

    try:
        services("stop", "redis")
    finally:
        services("start", "redis")
    get_redis().connection_pool.disconnect()
    back = open_device(backend[1].port, backend[0].token_for(bob, "tablet"), since=cursor)

    assert back.hello["resumed"] is True
    assert msgkeys(back, 2) == missed
    live = backend[1].send(alice, bob, "after the restart")
    assert msgkeys(phone, 1) == msgkeys(back, 1) == [live]  # no resync: nothing was lost
    assert phone.quiet()
    assert back.quiet()


def test_events_a_crashed_redis_lost_give_resync_lost_never_a_gap(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    """A Redis killed with -9 comes back without its last second (AOF everysec), and the
    positions after what survived are written again: a cursor past them must not be trusted."""
    alice, bob = uids(2)
    phone = open_device(backend[0].port, backend[0].token_for(bob, "phone"))
    tablet = open_device(backend[1].port, backend[0].token_for(bob, "tablet"))
    kept = backend[0].send(alice, bob, "survives")
    assert msgkeys(tablet, 1) == [kept]
    kept_cursor = phone.next()["cursor"]
    lost = backend[0].send(alice, bob, "lost in the crash")
    assert msgkeys(tablet, 1) == [lost]
    lost_cursor = phone.next()["cursor"]
    tablet.close()
    # as that Redis would come back: another run, the last entry and position gone
    get_redis().hset(keys.meta(bob), mapping={"run": "crashed", "pos": 1})
    get_redis().xdel(keys.log(bob), "0-2")
    get_redis().execute_command("XSETID", keys.log(bob), "0-1")  # the stream's own last id too

    after = backend[0].send(alice, bob, "after the crash")  # takes position 2 again

    assert phone.next() == {"type": "resync", "reason": "lost"}
    assert msgkeys(phone, 1) == [after]
    past = open_device(backend[1].port, backend[0].token_for(bob, "tablet"), since=lost_cursor)
    assert past.hello["resumed"] is False
    assert past.next() == {"type": "resync", "reason": "lost"}
    before = open_device(backend[1].port, backend[0].token_for(bob, "watch"), since=kept_cursor)
    assert before.hello["resumed"] is True
    assert msgkeys(before, 1) == [after]
    assert all(device.quiet(0.2) for device in (phone, past, before))
