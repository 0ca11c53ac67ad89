"""Counters survive a Redis that restarted empty or behind: the epoch moves on, and each user's
counters are rebuilt from the inbox on their next read, exactly once per epoch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from infra import metrics
from infra.redis import get_redis
from messaging import services
from messaging.selectors import conversation_list
from storage.counters import epoch, keys
from storage.counters.store import unread_summary as raw_summary
from unread.selectors import unread_summary

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]


def send(sender: int, receiver: int, cmid: str) -> None:
    content = {"type": "text", "text": cmid}
    services.message_send(
        sender_uid=sender, receiver_uid=receiver, content=content, client_msg_id=cmid
    )


def repairs() -> int:
    metrics.flush()
    raw = get_redis().hget(metrics.KEY, "unread_repairs|")
    return int(raw or 0)


def test_a_redis_that_came_back_empty_is_repaired_on_the_next_read(uids: Uids) -> None:
    alice, bob, carol = uids(3)
    send(alice, bob, "a1")
    send(alice, bob, "a2")
    send(carol, bob, "c1")
    assert epoch.check_restart()  # the first check of this Redis records its run
    assert not epoch.check_restart()  # same run: nothing moves
    for key in get_redis().scan_iter(match="unread:{u:*"):
        get_redis().delete(key)  # the counters are gone, as after a restart with no files
    get_redis().delete(keys.RUN_ID)  # ... and so is everything else Redis held
    assert raw_summary(bob).total == 0
    assert epoch.check_restart()
    before = repairs()
    assert unread_summary(bob).total == 3  # repaired from the inbox, on read
    assert unread_summary(bob).by_peer == {alice: 2, carol: 1}
    assert repairs() == before + 1
    assert unread_summary(bob).total == 3
    assert repairs() == before + 1  # once per epoch


def test_a_restart_that_kept_its_data_but_lost_the_last_writes_is_repaired(uids: Uids) -> None:
    alice, bob = uids(2)
    epoch.check_restart()
    send(alice, bob, "kept")
    unread_summary(bob)  # verified in this epoch
    get_redis().set(keys.RUN_ID, "a-previous-run")  # what the restarted Redis had recorded
    send(alice, bob, "lost")
    get_redis().delete(keys.unread(bob))  # its last second of writes did not reach the AOF
    assert epoch.check_restart()
    assert unread_summary(bob).total == 2


def test_the_conversation_list_shows_repaired_counts(uids: Uids) -> None:
    alice, bob = uids(2)
    send(alice, bob, "one")
    epoch.check_restart()
    get_redis().delete(keys.unread(bob))
    get_redis().set(keys.RUN_ID, "a-previous-run")
    epoch.check_restart()
    [item] = services_list(bob)
    assert item.unread == 1


def services_list(owner: int) -> list[Any]:
    return conversation_list(owner).results
