"""The conversation-list read path: Redis → HBase (hedged with MySQL) → MySQL.

``conversation_page`` answers a page of ``messaging.selectors.conversation_list``
(items, cursor and page are the read model of ``model.py``):

1. Redis: one script call returns the page and its unread counts. A page that leaves the cached
   prefix (past the first CONVCACHE_SIZE conversations) reads MySQL directly, through its index.
2. On a Redis miss the script has already begun a fill generation. HBase is read on a small pool
   thread; if it has not answered within CONVCACHE_HEDGE_MS, MySQL is asked for the page in
   parallel on another pool thread, and the first usable answer wins. The loser finishes in the
   background and is dropped; it is never interrupted mid-call (a Thrift or SQL call cannot be
   cancelled safely). An HBase row that is missing or not ready answers "miss" at once.
3. The tiers above refill after the answer, off the request path (build.fill_later): Redis from
   HBase's answer, or Redis and the HBase row from one MySQL read of the first CONVCACHE_SIZE.

No leaks: each pool has a fixed number of threads and takes work only while one is free
(otherwise the caller reads MySQL itself), so a hung HBase holds at most its own threads, never a
growing queue; a pool thread closes its database connection after every call (pools.py). A caller
inside a transaction reads MySQL on its own connection (another could not see its rows).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from django.conf import settings
from django.db import connection
from redis.exceptions import RedisError

from infra import metrics
from storage.convcache import build, codec, hbase_tier, mysql_tier, redis_tier
from storage.convcache.codec import Fill, Summary
from storage.convcache.model import ConversationPage, Cursor
from storage.convcache.pools import in_thread_with_db, pool
from storage.counters.store import unread_for_peers

log = logging.getLogger(__name__)
HBASE_THREADS = 4
MYSQL_THREADS = 4
LOSER_WAIT_S = 30.0  # how long the winner-less caller waits at most before reading MySQL itself


# -- the page --------------------------------------------------------------------------------
def conversation_page(
    owner: int, *, category: str | None, cursor: str | None, limit: int
) -> ConversationPage:
    def from_mysql() -> ConversationPage:
        return mysql_tier.mysql_page(owner, category=category, cursor=cursor, limit=limit)

    want, at = limit + 1, codec.cursor_member(Cursor.parse(cursor))
    try:
        found = redis_tier.read(owner, cursor=at, want=want, category=category)
    except RedisError:
        log.warning("convcache: Redis read failed for %s", owner, exc_info=True)
        metrics.inc("convcache_reads", tier="redis", result="error")
        return from_mysql()
    if found.status == "hit":
        metrics.inc("convcache_reads", tier="redis", result="hit")
        return _page(owner, found.entries, limit, found.unread)
    if found.status == "beyond":
        metrics.inc("convcache_reads", tier="mysql", result="beyond")
        return from_mysql()
    metrics.inc("convcache_reads", tier="redis", result="miss")
    use_hbase = hbase_tier.enabled() and not found.hbase_dirty
    answer = tier2(owner, from_mysql) if use_hbase else None
    if isinstance(answer, Fill):
        build.fill_later(owner, redis_generation=found.generation, fill=answer)
        entries = answer.page(at, want, category)
        if entries is not None:
            return _page(owner, [p.summary() for p in entries], limit)
        return from_mysql()
    rebuild_hbase = hbase_tier.enabled() and not isinstance(answer, ConversationPage)
    build.fill_later(owner, redis_generation=found.generation, hbase=rebuild_hbase)
    if answer is None:
        metrics.inc("convcache_reads", tier="mysql", result="hit")
        return from_mysql()
    return answer


def _page(
    owner: int, entries: list[Summary], limit: int, unread: list[int] | None = None
) -> ConversationPage:
    shown = entries[:limit]
    if unread is None:
        counts = unread_for_peers(owner, [s.peer for s in shown])
        unread = [counts.get(s.peer, 0) for s in shown]
    items = [codec.to_item(s, n) for s, n in zip(shown, unread, strict=False)]
    last = shown[-1] if shown else None
    next_cursor = str(Cursor(last.sort_key, last.peer)) if last and len(entries) > limit else None
    return ConversationPage(items, next_cursor)


# -- tier 2: HBase, hedged with MySQL --------------------------------------------------------
Answer = Fill | ConversationPage | None


def tier2(owner: int, from_mysql: Callable[[], ConversationPage]) -> Answer:
    """HBase's list (a Fill), or MySQL's page if HBase is slower than the hedge delay and MySQL
    answers first; None when HBase has no usable row (the caller reads MySQL)."""
    hbase_call = pool("hbase", HBASE_THREADS).submit(lambda: hbase_tier.read(owner))
    if hbase_call is None:
        metrics.inc("convcache_reads", tier="hbase", result="saturated")
        return None
    try:
        view = hbase_call.result(timeout=settings.CONVCACHE_HEDGE_MS / 1000)
    except FutureTimeout:
        return _race(owner, hbase_call, from_mysql)
    except Exception:
        log.warning("convcache: HBase read failed for %s", owner, exc_info=True)
        metrics.inc("convcache_reads", tier="hbase", result="error")
        return None
    return _accept(owner, view)


def _race(
    owner: int, hbase_call: Future[hbase_tier.View], from_mysql: Callable[[], ConversationPage]
) -> Answer:
    metrics.inc("convcache_hedges")
    if connection.in_atomic_block:
        return None  # MySQL must be read on this connection: the caller does it now
    mysql_call = pool("mysql", MYSQL_THREADS).submit(in_thread_with_db(from_mysql))
    if mysql_call is None:
        return None
    pending: set[Future[Any]] = {hbase_call, mysql_call}
    while pending:
        done, pending = wait(pending, timeout=LOSER_WAIT_S, return_when=FIRST_COMPLETED)
        if not done:
            return None
        for call in done:
            answer = _outcome(owner, call)
            if answer is not None:
                winner = "hbase" if call is hbase_call else "mysql"
                metrics.inc("convcache_hedge_wins", winner=winner)
                if winner == "mysql":
                    metrics.inc("convcache_reads", tier="mysql", result="hit")
                return answer
    return None


def _outcome(owner: int, call: Future[Any]) -> Answer:
    try:
        result = call.result()
    except Exception:
        log.warning("convcache: tier-2 read failed for %s", owner, exc_info=True)
        return None
    if isinstance(result, hbase_tier.View):
        return _accept(owner, result)
    return result if isinstance(result, ConversationPage) else None


def _accept(owner: int, view: hbase_tier.View) -> Fill | None:
    """HBase's answer if its row is ready (an overgrown row is rebuilt in the background)."""
    if view.fill is None:
        metrics.inc("convcache_reads", tier="hbase", result="miss")
        return None
    if view.cells > build.REBUILD_CELLS_FACTOR * int(settings.CONVCACHE_SIZE):
        build.rebuild_async(owner)
    metrics.inc("convcache_reads", tier="hbase", result="hit")
    return _top(view.fill)


def _top(fill: Fill) -> Fill:
    """At most CONVCACHE_SIZE entries: the row may have grown past it since its last build."""
    size = int(settings.CONVCACHE_SIZE)
    if len(fill.entries) <= size:
        return fill
    entries = fill.entries[:size]
    return Fill(entries, entries[-1].member, False, fill.source)
