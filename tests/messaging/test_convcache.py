"""The conversation-list cache on real Redis, HBase and MariaDB: what a reader of the list sees.

Pages come out the same whichever tier answers (Redis, HBase, MySQL, or MySQL past the cached
prefix); after each kind of change the cached list shows the change; out-of-order pushes from
several processes never leave anything but the newest version; the hedge answers from MySQL
when HBase is slow, without leaking threads or connections; HBase being down costs nothing but
speed.
"""

from __future__ import annotations

import itertools
import multiprocessing
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from infra import hbase, metrics
from infra.redis import get_redis
from messaging import convlist, selectors, services
from messaging.models import Conversation, Message
from storage import msgkey as keys
from storage.convcache import build, codec, hbase_tier, reader, redis_tier
from storage.convcache.codec import Fill, Summary
from storage.convcache.model import Cursor
from storage.counters.store import unread_incr_many
from tests.conftest import wait_for

Uids = Callable[[int], list[int]]
CATEGORIES = ("followed", "stranger", "business", "system")
_cmids = itertools.count(1)


# -- helpers (also used by test_convcache_prewarm.py) ------------------------------------------
def seed(owner: int, peers: list[int], *, categories: tuple[str, ...] = CATEGORIES) -> None:
    """One conversation per peer, each with its own last message (newest: the last peer)."""
    msgkeys = keys.next_msgkeys(len(peers))
    now = keys.now_ms()
    Message.objects.bulk_create(
        Message(
            msgkey=k,
            sender_uid=p,
            type="text",
            body={"type": "text", "text": f"from {p} ✨"},
            created_at=timezone.now(),
        )
        for k, p in zip(msgkeys, peers, strict=True)
    )
    Conversation.objects.bulk_create(
        Conversation(
            owner_uid=owner,
            peer_uid=p,
            category=categories[i % len(categories)],
            last_msgkey=k,
            sort_key=k,
            mtime=now,
        )
        for i, (k, p) in enumerate(zip(msgkeys, peers, strict=True))
    )
    for i, p in enumerate(peers[::3]):
        unread_incr_many(
            owner_uids=[owner], peer_uid=p, category="followed", marker=None, delta=i % 4 + 1
        )


def send(sender: int, receiver: int, text: str = "hello") -> int:
    result = services.message_send(
        sender_uid=sender,
        receiver_uid=receiver,
        content={"type": "text", "text": text},
        client_msg_id=f"cc-{next(_cmids)}",
    )
    return result.message.msgkey


def every_page(owner: int, *, limit: int, category: str | None = None) -> list[Any]:
    pages, cursor = [], None
    while True:
        page = selectors.conversation_list(owner, category=category, cursor=cursor, limit=limit)
        pages.append(page)
        cursor = page.next_cursor
        if cursor is None:
            return pages


def truth(owner: int, *, limit: int, category: str | None = None) -> list[Any]:
    with override_settings(CONVCACHE_ENABLED=False):  # the original MySQL selector
        return every_page(owner, limit=limit, category=category)


def previews(owner: int, limit: int = 100) -> list[tuple[int, str | None]]:
    page = selectors.conversation_list(owner, limit=limit)
    return [(i.peer_uid, (i.last_message or {}).get("preview")) for i in page.results]


def flush_redis_lists(owner: int) -> None:
    get_redis().delete(*redis_tier.keys.cache_keys(owner))


def counter(name: str, **labels: str) -> int:
    metrics.flush()
    return int(get_redis().hget(metrics.KEY, metrics.series(name, labels)) or 0)


def reads(tier: str, result: str) -> int:
    return counter("convcache_reads", tier=tier, result=result)


@pytest.fixture(autouse=True)
def cache_on(settings: Any) -> None:
    settings.CONVCACHE_ENABLED = True
    settings.CONVCACHE_HBASE = True
    settings.METRICS_FLUSH_S = 0.0


# -- every tier shows the same list --------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("category", [None, "stranger"])
def test_pages_are_identical_from_every_tier_and_past_the_prefix(
    uid: int, uids: Uids, settings: Any, category: str | None
) -> None:
    settings.CONVCACHE_SIZE = 12  # a small prefix, so pages cross it and go past it
    seed(uid, uids(40))
    expected = truth(uid, limit=5, category=category)
    cold = every_page(uid, limit=5, category=category)  # fills Redis (and HBase, inline)
    warm = every_page(uid, limit=5, category=category)
    flush_redis_lists(uid)
    from_hbase = every_page(uid, limit=5, category=category)
    assert cold == warm == from_hbase == expected
    assert sum(len(p.results) for p in expected) == (10 if category else 40)


@pytest.mark.django_db
def test_a_cached_page_costs_no_sql_and_a_redis_flush_is_answered_by_hbase(
    uid: int, uids: Uids, django_assert_num_queries: Any
) -> None:
    seed(uid, uids(30))
    first = selectors.conversation_list(uid, limit=20)
    hits = reads("redis", "hit")
    with django_assert_num_queries(0):
        assert selectors.conversation_list(uid, limit=20) == first
    assert reads("redis", "hit") == hits + 1
    flush_redis_lists(uid)
    hbase_hits = reads("hbase", "hit")
    with waiting_for_hbase(), django_assert_num_queries(0):
        assert selectors.conversation_list(uid, limit=20) == first
    assert reads("hbase", "hit") == hbase_hits + 1


@pytest.mark.django_db
def test_unread_counts_on_a_cached_page_are_live(uid: int, uids: Uids) -> None:
    peers = uids(3)
    seed(uid, peers)
    selectors.conversation_list(uid)  # warm
    unread_incr_many(owner_uids=[uid], peer_uid=peers[1], category="stranger", marker=None, delta=7)
    counts = {i.peer_uid: i.unread for i in selectors.conversation_list(uid).results}
    assert counts == {peers[0]: 1, peers[1]: 7, peers[2]: 0}


# -- changes show up in the cached list -----------------------------------------------------------
@pytest.mark.django_db
def test_every_change_reaches_a_warm_list_in_redis_and_hbase(uid: int, uids: Uids) -> None:
    alice, bob, carol = uids(3)
    send(alice, uid, "a1")
    send(bob, uid, "b1")
    assert previews(uid) == [(bob, "b1"), (alice, "a1")]  # warms Redis and HBase

    def both_tiers() -> list[tuple[int, str | None]]:
        seen = previews(uid)
        flush_redis_lists(uid)
        assert previews(uid) == seen, "HBase disagrees with Redis"
        return seen

    send(carol, uid, "c1")
    recall_me = send(alice, uid, "a2")
    assert both_tiers() == [(alice, "a2"), (carol, "c1"), (bob, "b1")]
    services.message_recall(msgkey=recall_me, actor_uid=alice)
    assert both_tiers() == [(alice, "[recalled]"), (carol, "c1"), (bob, "b1")]
    last = send(carol, uid, "c2")
    services.message_delete(owner_uid=uid, peer_uid=carol, msgkey=last)  # back to c1, lower
    assert both_tiers() == [(alice, "[recalled]"), (carol, "c1"), (bob, "b1")]
    services.conversation_mark_read(owner_uid=uid, peer_uid=bob)
    services.conversation_delete(owner_uid=uid, peer_uid=carol)
    assert both_tiers() == [(alice, "[recalled]"), (bob, "b1")]
    send(carol, uid, "c3")  # a deleted conversation comes back with a new message
    assert both_tiers() == [(carol, "c3"), (alice, "[recalled]"), (bob, "b1")]
    services.messages_delete_all(owner_uid=uid)
    assert both_tiers() == []
    send(bob, uid, "b2")
    assert both_tiers() == [(bob, "b2")]


@pytest.mark.django_db
def test_new_conversations_push_the_oldest_out_of_a_full_cache(
    uid: int, uids: Uids, settings: Any
) -> None:
    settings.CONVCACHE_SIZE = 5
    seed(uid, uids(8))
    selectors.conversation_list(uid, limit=3)  # warm: 5 cached of 8
    for peer in uids(4):
        send(peer, uid, f"new {peer}")
    assert every_page(uid, limit=3) == truth(uid, limit=3)
    flush_redis_lists(uid)
    assert every_page(uid, limit=3) == truth(uid, limit=3)


@pytest.mark.django_db
def test_a_bulk_batch_to_uncached_owners_reads_no_conversations(
    uids: Uids, django_assert_max_num_queries: Any
) -> None:
    sender, *receivers = uids(1001)
    services.deliver_many(
        sender_uid=sender,
        receiver_uids=receivers[:1],
        msgkey=keys.next_msgkey(),
        category="business",
        marker="warmup",
    )
    msgkey = keys.next_msgkey()
    # inbox upsert + conversation upsert, and nothing for the cache: nobody has a cached list
    with django_assert_max_num_queries(4):
        services.deliver_many(
            sender_uid=sender,
            receiver_uids=receivers,
            msgkey=msgkey,
            category="business",
            marker="bulk-1",
        )
    assert previews(receivers[-1]) == [(sender, None)]  # no Message row: no preview


# -- the HBase index: a bulk push reads HBase metas only for owners who have a row ----------------
def bulk(sender: int, receivers: list[int], text: str) -> int:
    msgkey = keys.next_msgkey()
    Message.objects.create(
        msgkey=msgkey,
        sender_uid=sender,
        type="text",
        body={"type": "text", "text": text},
        created_at=timezone.now(),
    )
    services.deliver_many(
        sender_uid=sender,
        receiver_uids=receivers,
        msgkey=msgkey,
        category="business",
        marker=f"bulk-{msgkey}",
    )
    return msgkey


def waiting_for_hbase() -> override_settings:
    """The hedge waits for HBase as long as it takes: after its 20 ms the reader asks MySQL, and
    inside a test's transaction reads it at once (a loaded CI machine's HBase read took longer,
    twice: once here, once in the cached-page test, 6 queries)."""
    return override_settings(CONVCACHE_HEDGE_MS=10_000)


def from_hbase(owner: int) -> list[tuple[int, str | None]]:
    """The owner's list with Redis's copy dropped: answered by their HBase row."""
    flush_redis_lists(owner)
    hits = reads("hbase", "hit")
    with waiting_for_hbase():
        seen = previews(owner)
    assert reads("hbase", "hit") == hits + 1, "not answered by HBase"
    return seen


@pytest.mark.django_db
def test_a_trusted_index_sends_bulk_pushes_to_the_hbase_rows_that_exist(uids: Uids) -> None:
    shop, friend, reader_uid, *others = uids(40)
    send(friend, reader_uid, "hi")
    assert previews(reader_uid) == [(friend, "hi")]  # builds the reader's rows, flags them
    assert build.index_rebuild() >= 1  # the scan found at least the reader's row
    assert build.index_rebuild() == -1  # trusted in this Redis run: nothing to do
    audience = [*others[:20], reader_uid, *others[20:]]  # the reader mid-batch
    probe = redis_tier.probe_bulk(audience)
    assert probe.hbase is not None
    assert reader_uid in probe.hbase
    assert not probe.hbase & set(others)  # never built: no HBase meta is read for them
    assert set(probe.generations) == {reader_uid}  # the only owner with a cached list
    bulk(shop, audience, "sale")
    assert from_hbase(reader_uid) == [(shop, "sale"), (friend, "hi")]
    assert previews(reader_uid) == [(shop, "sale"), (friend, "hi")]  # its Redis list too
    assert previews(others[0]) == [(shop, "sale")]


@pytest.mark.django_db
def test_after_a_redis_restart_bulk_pushes_read_every_meta_until_the_index_is_rebuilt(
    uids: Uids,
) -> None:
    shop, friend, reader_uid, *others = uids(40)
    send(friend, reader_uid, "hi")
    assert previews(reader_uid) == [(friend, "hi")]
    build.index_rebuild()
    # A restart that lost the reader's flag (written in the crash's last second): the index's
    # marker names the run before it.
    get_redis().delete(redis_tier.keys.hbase_indexed(reader_uid))
    get_redis().set(redis_tier.keys.HBASE_INDEX_TRUSTED, "the-run-before-the-restart")
    assert redis_tier.probe_bulk([reader_uid]).hbase is None  # untrusted: every meta is read
    bulk(shop, [reader_uid, *others], "sale")
    assert from_hbase(reader_uid) == [(shop, "sale"), (friend, "hi")]
    assert build.index_rebuild() >= 1  # the beat task's scan flags the reader again
    assert redis_tier.probe_bulk([reader_uid]).hbase == {reader_uid}
    bulk(shop, [reader_uid, *others], "sale 2")
    assert from_hbase(reader_uid) == [(shop, "sale 2"), (friend, "hi")]


@pytest.mark.django_db(transaction=True)
def test_builds_racing_bulk_pushes_leave_every_hbase_row_as_mysql_has_it(uids: Uids) -> None:
    """Builds (each flags its owner, then begins a generation) and bulk pushes from other
    threads at once, with a trusted index: every owner's HBase row ends as MySQL has it."""
    owners = uids(24)
    senders = uids(6)
    for owner in owners:
        send(senders[0], owner, "first")
    build.index_rebuild()
    errors: list[BaseException] = []

    def run(job: Callable[[], object]) -> None:
        try:
            job()
        except BaseException as exc:  # shown by the assert below
            errors.append(exc)
        finally:
            connection.close()

    def rebuild_all() -> None:
        for owner in random.sample(owners, len(owners)):
            build.rebuild(owner, redis_too=True)

    def pushes(sender: int) -> Callable[[], None]:
        def job() -> None:
            for n in range(3):
                bulk(sender, owners, f"{sender} #{n}")

        return job

    threads = [threading.Thread(target=run, args=(rebuild_all,)) for _ in range(2)]
    threads += [threading.Thread(target=run, args=(pushes(s),)) for s in senders[1:]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for owner in owners:
        assert from_hbase(owner) == truth_previews(owner), f"owner {owner}"


def truth_previews(owner: int) -> list[tuple[int, str | None]]:
    with override_settings(CONVCACHE_ENABLED=False):
        return previews(owner)


# -- out-of-order pushes never regress ---------------------------------------------------------
def _versions(peer: int) -> list[Summary]:
    """A conversation's history: new message, newer one, its newest deleted (sort key goes
    down), the conversation deleted, then recreated."""
    base = keys.now_ms()
    live = [(10, "first"), (30, "second"), (20, "back to first")]
    versions = [
        Summary(peer, base + i, sort_key, "stranger", sort_key, peer, text)
        for i, (sort_key, text) in enumerate(live)
    ]
    versions.append(codec.tombstone(peer, base + 3))
    versions.append(Summary(peer, base + 4, 40, "stranger", 40, peer, "recreated"))
    return versions


def _push(args: tuple[int, int, str, int, bytes]) -> None:
    owner, _peer, redis_gen, hbase_gen, packed = args
    summary = codec.decode(packed)
    hbase_tier.put_many([(owner, hbase_gen, summary)])
    redis_tier.apply_many({owner: (redis_gen, [summary])})


def _fresh_cache(owner: int) -> tuple[str, int]:
    empty = Fill([], "", True, "m")
    state, redis_gen = redis_tier.begin(owner)
    assert state == "begun"
    hbase_gen = hbase_tier.begin(owner)
    assert hbase_gen is not None
    assert hbase_tier.finish(owner, hbase_gen, empty)
    assert redis_tier.finish(owner, redis_gen, empty) == 1
    return redis_gen, hbase_gen


def _cached(owner: int) -> tuple[list[Summary], list[Summary]]:
    found = redis_tier.read(owner, cursor="", want=10, category=None)
    assert found.status == "hit"
    view = hbase_tier.read(owner)
    assert view.fill is not None
    return found.entries, [p.summary() for p in view.fill.entries]


@pytest.fixture(scope="module")
def workers() -> Iterator[Any]:
    with multiprocessing.get_context("fork").Pool(4) as pool:
        yield pool


@pytest.mark.django_db
@pytest.mark.parametrize("newest_is_tombstone", [False, True])
def test_every_arrival_order_from_several_processes_leaves_the_newest(
    uids: Uids, workers: Any, newest_is_tombstone: bool
) -> None:
    peer = uids(1)[0]
    versions = _versions(peer)[: 4 if newest_is_tombstone else 5]
    expected = [] if newest_is_tombstone else [versions[-1]]
    orders = list(itertools.permutations(range(len(versions))))
    owners = uids(len(orders))
    for owner, order in zip(owners, orders, strict=True):
        redis_gen, hbase_gen = _fresh_cache(owner)
        for i in order:  # each version from whichever worker process is free, in this order
            packed = codec.encode(versions[i])
            workers.apply(_push, ((owner, peer, redis_gen, hbase_gen, packed),))
        assert _cached(owner) == (expected, expected), f"arrival order {order}"


@pytest.mark.django_db
def test_concurrent_pushes_from_several_processes_leave_the_newest(
    uids: Uids, workers: Any
) -> None:
    peer = uids(1)[0]
    versions = _versions(peer)
    for owner in uids(12):
        redis_gen, hbase_gen = _fresh_cache(owner)
        shuffled = random.sample(versions, len(versions))
        jobs = [(owner, peer, redis_gen, hbase_gen, codec.encode(v)) for v in shuffled]
        workers.map(_push, jobs, chunksize=1)
        assert _cached(owner) == ([versions[-1]], [versions[-1]])


# -- hedging -------------------------------------------------------------------------------------
def _db_connections() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE()")
        return int(cur.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_slow_hbase_is_hedged_by_mysql_without_leaking_threads_or_connections(
    uids: Uids, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    owner, *peers = uids(13)
    seed(owner, peers)
    expected = truth(owner, limit=10)[0]
    hbase_tier_read = hbase_tier.read
    selectors.conversation_list(owner)  # builds the HBase row, in the background
    wait_for(lambda: hbase_tier.read(owner).fill is not None)

    def slow_read(o: int) -> hbase_tier.View:
        time.sleep(0.3)
        return hbase_tier_read(o)

    monkeypatch.setattr(hbase_tier, "read", slow_read)
    settings.CONVCACHE_HEDGE_MS = 20
    threads, conns = threading.active_count(), _db_connections()
    hedges, wins = counter("convcache_hedges"), counter("convcache_hedge_wins", winner="mysql")
    for _ in range(reader.HBASE_THREADS):  # one slow HBase call per HBase thread
        flush_redis_lists(owner)
        assert selectors.conversation_list(owner, limit=10) == expected
    assert counter("convcache_hedges") == hedges + reader.HBASE_THREADS
    assert counter("convcache_hedge_wins", winner="mysql") == wins + reader.HBASE_THREADS
    wait_for(
        lambda: reader.pool("hbase", reader.HBASE_THREADS).slots._value == reader.HBASE_THREADS
    )
    assert threading.active_count() <= threads + reader.HBASE_THREADS + reader.MYSQL_THREADS
    assert _db_connections() <= conns


@pytest.mark.django_db(transaction=True)
def test_a_hung_hbase_never_queues_more_work_than_its_threads(
    uids: Uids, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner, *peers = uids(4)
    seed(owner, peers)
    expected = truth(owner, limit=10)[0]
    release = threading.Event()

    def hung_read(o: int) -> hbase_tier.View:
        release.wait(10)
        raise ConnectionError("gave up")

    monkeypatch.setattr(hbase_tier, "read", hung_read)
    try:
        saturated = reads("hbase", "saturated")
        for _ in range(3 * reader.HBASE_THREADS):
            flush_redis_lists(owner)
            assert selectors.conversation_list(owner, limit=10) == expected
        assert reads("hbase", "saturated") > saturated
    finally:
        release.set()


# -- HBase down ------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_hbase_down_costs_speed_not_answers(uids: Uids, settings: Any) -> None:
    owner, alice, bob = uids(3)
    send(alice, owner, "a1")
    selectors.conversation_list(owner)  # warm both tiers
    settings.HBASE = {**hbase.options(), "PORT": 1, "TIMEOUT_MS": 500}
    send(bob, owner, "b1")  # the HBase write fails; the send does not
    assert get_redis().exists(redis_tier.keys.hbase_dirty(owner))
    flush_redis_lists(owner)
    assert previews(owner) == [(bob, "b1"), (alice, "a1")]


@pytest.mark.django_db
def test_a_row_that_missed_a_write_is_not_served_until_rebuilt(uids: Uids, settings: Any) -> None:
    owner, alice, bob = uids(3)
    send(alice, owner, "a1")
    selectors.conversation_list(owner)  # warm both tiers
    good = dict(settings.HBASE)
    settings.HBASE = {**good, "PORT": 1, "TIMEOUT_MS": 500}
    send(bob, owner, "b1")  # HBase misses this one
    settings.HBASE = good
    flush_redis_lists(owner)
    assert previews(owner) == [(bob, "b1"), (alice, "a1")]  # MySQL, and a rebuild (inline)
    assert not get_redis().exists(redis_tier.keys.hbase_dirty(owner))
    flush_redis_lists(owner)
    assert previews(owner) == [(bob, "b1"), (alice, "a1")]  # from the rebuilt row


# -- the MySQL tier --------------------------------------------------------------------------------
@pytest.mark.django_db
def test_mysql_pages_keep_peer_order_within_one_sort_key(uid: int, uids: Uids) -> None:
    peers = sorted(uids(7))
    msgkey = keys.next_msgkey()
    Conversation.objects.bulk_create(
        Conversation(
            owner_uid=uid,
            peer_uid=p,
            category="business",
            last_msgkey=msgkey,
            sort_key=msgkey,
            mtime=1,
        )
        for p in peers
    )
    rows, more = convlist.top(uid, 3)
    assert [r.peer_uid for r in rows] == peers[::-1][:3]
    assert more
    rows, more = convlist.top(uid, 3, after=Cursor(msgkey, peers[4]))
    assert [r.peer_uid for r in rows] == peers[::-1][3:6]
    assert more
    assert every_page(uid, limit=2) == truth(uid, limit=2)


@pytest.mark.django_db
def test_a_cold_first_page_never_makes_mysql_sort_all_the_owners_conversations(
    uid: int, uids: Uids
) -> None:
    from django.test.utils import CaptureQueriesContext

    seed(uid, uids(700))
    with CaptureQueriesContext(connection) as ctx:
        page = selectors.conversation_list(uid)  # cold: MySQL answers and refills both tiers
    assert len(page.results) == 20
    plans = []
    with connection.cursor() as cur:
        for query in ctx.captured_queries:
            if "messaging_conversation" in query["sql"] and query["sql"].startswith("SELECT"):
                cur.execute("EXPLAIN " + query["sql"])
                plans += [" ".join(str(c) for c in row) for row in cur.fetchall()]
    assert plans
    # MySQL walks (owner_uid, sort_key) backwards; the only sort is of the rows that tie with
    # the last one on the sort key (a lookup on both index columns: in practice one row)
    sorting = [p for p in plans if "filesort" in p]
    assert all(" ref " in p and "const,const" in p for p in sorting), sorting
    assert any(" range " in p and "filesort" not in p for p in plans)
