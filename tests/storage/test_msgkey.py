"""msgkey: unique across processes and forks, strictly increasing per generator, time-recoverable.

Every test runs against the real Redis (flushed per test), so node leases and high-water marks are
the production ones. Time is moved by replacing ``storage.msgkey.now_ms``, never by sleeping.
"""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
import textwrap
from array import array
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from infra.redis import get_redis
from storage import msgkey
from storage.msgkey import MsgkeyGenerator, node_of, timestamp_ms
from tests.conftest import ROOT

PER_PROCESS = 20_000

# One process: generate PER_PROCESS keys into argv[1]; with argv[2] == "fork", use the generator
# once, then fork: parent and child each write their own file (the child's gets ".child").
WORKER = textwrap.dedent(
    """
    import os, sys
    from array import array
    import django
    django.setup()
    from storage.msgkey import next_msgkey

    out, mode, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    keys = array("q")
    if mode == "fork":
        keys.append(next_msgkey())
        if os.fork() == 0:
            out, keys = out + ".child", array("q")
    keys.extend(next_msgkey() for _ in range(count))
    with open(out, "wb") as fh:
        keys.tofile(fh)
    if out.endswith(".child"):
        os._exit(0)
    if mode == "fork":
        os.wait()
    """
)


def _read_keys(path: Path) -> list[int]:
    keys = array("q")
    with path.open("rb") as fh:
        keys.frombytes(fh.read())
    return keys.tolist()


def _strictly_increasing(keys: list[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(keys))


def _lease_key(node: int) -> str:
    return f"{{msgkey:{node}}}:lease"


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """A controllable clock for msgkey: ``clock(ms)`` sets what ``now_ms()`` answers."""
    state = {"ms": msgkey.now_ms()}
    monkeypatch.setattr(msgkey, "now_ms", lambda: state["ms"])

    def set_ms(ms: int) -> None:
        state["ms"] = ms

    return set_ms


@pytest.fixture
def force_renewal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call renews the lease (as if RENEW_EVERY_MS had passed since the last one)."""
    monkeypatch.setattr(msgkey, "RENEW_EVERY_MS", 0)


def test_keys_from_many_processes_and_a_fork_never_collide(tmp_path: Path) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    modes = ["plain", "plain", "plain", "fork"]
    outs = [tmp_path / f"keys-{i}" for i in range(len(modes))]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(out), mode, str(PER_PROCESS)], cwd=ROOT, env=env
        )
        for out, mode in zip(outs, modes, strict=True)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0] * len(procs)

    per_generator = {out.name: _read_keys(out) for out in outs}
    per_generator["fork-child"] = _read_keys(outs[-1].with_name(outs[-1].name + ".child"))
    everything = [k for keys in per_generator.values() for k in keys]

    assert len(everything) == 4 * PER_PROCESS + 1 + PER_PROCESS
    assert len(set(everything)) == len(everything)
    assert all(_strictly_increasing(keys) for keys in per_generator.values())
    nodes = {name: {node_of(k) for k in keys} for name, keys in per_generator.items()}
    assert all(len(n) == 1 for n in nodes.values()), nodes
    # Five live generators, five distinct node ids: the forked child leased its own.
    assert len(set().union(*nodes.values())) == 5


def test_keys_are_strictly_increasing_and_carry_their_send_time() -> None:
    gen = MsgkeyGenerator()
    before = msgkey.now_ms()
    first = gen.next()
    after = msgkey.now_ms()
    keys = [first, *gen.next_many(5000)]

    assert _strictly_increasing(keys)
    assert before <= timestamp_ms(first) <= after
    assert msgkey.lower_bound(msgkey.created_at(first)) == msgkey.compose(timestamp_ms(first), 0, 0)


def test_clock_stepping_backwards_never_repeats_or_reorders_keys(
    clock: Callable[[int], None], force_renewal: None
) -> None:
    gen = MsgkeyGenerator()
    start = msgkey.now_ms()
    keys: list[int] = []
    for step in (0, 1, 2, -5_000, -4_999, -60_000, 3, 3, -1, 10):  # ms offsets from start
        clock(start + step)
        keys.extend(gen.next_many(700))  # 700 per step: some steps exhaust a millisecond

    assert len(set(keys)) == len(keys)
    assert _strictly_increasing(keys)


def test_a_generator_restarted_during_a_backwards_clock_still_issues_fresh_keys(
    clock: Callable[[int], None], force_renewal: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = msgkey.now_ms()
    first = MsgkeyGenerator()
    clock(start + 20_000)
    before_restart = first.next_many(100)
    first.release()

    monkeypatch.setattr(msgkey.random, "randrange", lambda _n: node_of(before_restart[0]))
    clock(start)  # the host's clock stepped 20 s back while the process restarted
    after_restart = MsgkeyGenerator().next_many(100)

    assert node_of(after_restart[0]) == node_of(before_restart[0])
    assert min(after_restart) > max(before_restart)
    assert _strictly_increasing(after_restart)


def test_sequence_overflow_within_one_millisecond_borrows_the_next(
    clock: Callable[[int], None],
) -> None:
    gen = MsgkeyGenerator()
    frozen = msgkey.now_ms()
    clock(frozen)
    keys = gen.next_many(3 * (msgkey.MAX_SEQ + 1))

    per_ms = Counter(timestamp_ms(k) for k in keys)
    assert len(set(keys)) == len(keys)
    assert _strictly_increasing(keys)
    assert max(per_ms.values()) <= msgkey.MAX_SEQ + 1
    assert sorted(per_ms) == [frozen, frozen + 1, frozen + 2, frozen + 3]


def test_a_lost_lease_is_noticed_at_renewal_and_a_node_id_is_leased_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gen = MsgkeyGenerator()
    old_keys = gen.next_many(10)
    old_node = node_of(old_keys[0])
    get_redis().delete(_lease_key(old_node))  # e.g. the process stalled past the lease TTL

    monkeypatch.setattr(msgkey, "RENEW_EVERY_MS", 0)
    new_keys = gen.next_many(10)
    new_node = node_of(new_keys[0])

    holder = get_redis().get(_lease_key(new_node))
    assert isinstance(holder, bytes)
    assert holder.startswith(f"{os.getpid()}:".encode())
    assert min(new_keys) > max(old_keys)


def test_a_lease_taken_over_by_another_process_forces_a_different_node_id(
    force_renewal: None,
) -> None:
    gen = MsgkeyGenerator()
    old_keys = gen.next_many(10)
    old_node = node_of(old_keys[0])
    # Another process took the node after this one's lease expired.
    get_redis().set(_lease_key(old_node), "4242:someone-else", px=msgkey.LEASE_TTL_MS)

    new_keys = gen.next_many(10)

    assert node_of(new_keys[0]) != old_node
    assert get_redis().get(_lease_key(old_node)) == b"4242:someone-else"
    assert _strictly_increasing(old_keys + new_keys)


def test_keys_stay_increasing_when_a_lease_is_lost_after_the_generator_ran_ahead(
    clock: Callable[[int], None], force_renewal: None
) -> None:
    start = msgkey.now_ms()
    gen = MsgkeyGenerator()
    clock(start + 30_000)
    ahead = gen.next_many(10)
    clock(start)  # the clock comes back to true time...
    get_redis().delete(_lease_key(node_of(ahead[0])))  # ...and the lease is lost meanwhile

    after = gen.next_many(10)

    assert min(after) > max(ahead)


def test_a_restarted_generator_on_the_same_node_starts_past_the_high_water_mark(
    clock: Callable[[int], None], force_renewal: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = msgkey.now_ms()
    crashed = MsgkeyGenerator()
    crashed.next()  # leased and renewed: the node's high-water mark is recorded
    clock(start + msgkey.RENEW_EVERY_MS - 1)
    monkeypatch.setattr(msgkey, "RENEW_EVERY_MS", 10**9)  # no renewal records what follows
    issued = crashed.next_many(2000)
    node = node_of(issued[0])
    get_redis().delete(_lease_key(node))  # the process died; its lease expired

    clock(start)
    monkeypatch.setattr(msgkey.random, "randrange", lambda _n: node)
    restarted = MsgkeyGenerator().next_many(2000)

    assert node_of(restarted[0]) == node
    assert min(restarted) > max(issued)
    assert not set(restarted) & set(issued)


def test_release_lets_the_next_holder_of_the_node_continue_past_the_last_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = MsgkeyGenerator()
    issued = first.next_many(100)
    node = node_of(issued[0])
    first.release()
    assert get_redis().get(_lease_key(node)) is None

    monkeypatch.setattr(msgkey.random, "randrange", lambda _n: node)
    successor = MsgkeyGenerator().next_many(100)

    assert node_of(successor[0]) == node
    assert min(successor) > max(issued)


def test_lower_bound_splits_keys_exactly_at_the_instant_they_carry() -> None:
    rng = random.Random(7)
    for _ in range(20_000):
        ms = rng.randrange(msgkey.EPOCH_MS, msgkey.EPOCH_MS + (1 << 41) - 1)
        key = msgkey.compose(ms, rng.randrange(msgkey.MAX_NODE + 1), msgkey.MAX_SEQ)
        instant = msgkey.created_at(key)
        next_instant = msgkey.created_at(msgkey.compose(ms + 1, 0, 0))
        assert msgkey.lower_bound(instant) <= key < msgkey.lower_bound(next_instant)
