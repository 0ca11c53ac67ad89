"""The admission step (bulk/quotas.py ``admit_batch``, bulk/lua/admit.lua) on the real Redis:
caps per receiver, the daily budget, a redelivered batch, receivers over several quota hashes."""

from __future__ import annotations

import pytest

from bulk import keys, quotas
from bulk.models import Channel, SenderPolicy
from infra.redis import get_redis

pytestmark = pytest.mark.django_db


def admit(sender: int, receivers: list[int], *, index: int, cap: int = 1, budget: int = 0):
    policy = SenderPolicy(sender_uid=sender, per_receiver_limit=cap, daily_budget=budget)
    return quotas.admit_batch(
        sender_uid=sender,
        campaign_id=1,
        index=index,
        receivers=receivers,
        channel=Channel.DAILY,
        policy=policy,
    )


def capped_now(sender: int, receivers: list[int], cap: int = 1) -> int:
    policy = SenderPolicy(sender_uid=sender, per_receiver_limit=cap)
    return quotas.count_capped(sender, receivers, policy)


def test_capped_receivers_are_told_apart_from_those_the_budget_defers(uids) -> None:
    sender, *receivers = uids(11)
    first = admit(sender, receivers[:4], index=0, budget=6)
    assert (first.capped, first.deferred) == (frozenset(), ())
    # 4 of the 10 are at their cap; the budget has room for 2 of the other 6
    second = admit(sender, receivers, index=1, budget=6)
    assert second.capped == frozenset(receivers[:4])
    assert second.deferred == tuple(receivers[6:])
    assert int(get_redis().get(keys.budget(sender, quotas.today())) or 0) == 6
    assert capped_now(sender, receivers) == 6  # the deferred were not counted
    assert capped_now(sender, receivers[6:]) == 0


def test_a_budget_with_no_room_consumes_nothing(uids) -> None:
    sender, *receivers = uids(6)
    admit(sender, receivers[:2], index=0, budget=2)
    verdict = admit(sender, receivers, index=1, budget=2)
    assert verdict.budget_exhausted
    assert capped_now(sender, receivers) == 2  # only the first two, from the first batch


def test_a_cap_of_two_admits_twice_then_caps_and_a_repeat_in_one_batch_counts_once(uids) -> None:
    sender, *receivers = uids(4)
    assert admit(sender, receivers, index=0, cap=2).capped == frozenset()
    repeat = receivers[0]
    second = admit(sender, [*receivers, repeat], index=1, cap=2)
    assert second.capped == frozenset({repeat})  # its second copy in the batch went past the cap
    third = admit(sender, receivers, index=2, cap=2)
    assert third.capped == frozenset(receivers)
    assert capped_now(sender, receivers, cap=2) == 3
    assert capped_now(sender, receivers, cap=3) == 0  # capped copies were taken back, not kept


def test_a_redelivered_batch_gets_its_outcome_back_and_counts_nothing_twice(uids) -> None:
    sender, *receivers = uids(5)
    admit(sender, receivers[:2], index=0)
    once = admit(sender, receivers, index=1)
    again = admit(sender, receivers, index=1)
    assert once == again
    assert once.capped == frozenset(receivers[:2])
    assert capped_now(sender, receivers, cap=2) == 0  # nobody counted twice


def test_receivers_over_several_quota_hashes_are_each_counted_in_theirs(uids) -> None:
    sender, base = uids(2)
    span = keys.QUOTA_SPAN
    receivers = [base * span + span - 1, base * span + span, base * span + 3 * span]
    admit(sender, receivers, index=0)
    assert admit(sender, receivers, index=1).capped == frozenset(receivers)
    redis = get_redis()
    buckets = list(redis.scan_iter(f"quota:{{q:{sender}}}:*:r*"))
    assert len(buckets) == 3
    assert all(0 < redis.ttl(k) <= 2 * 86400 for k in buckets)
