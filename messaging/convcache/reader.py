"""The conversation-list read path: Redis → HBase (hedged with MySQL) → MySQL.

``conversation_page`` answers a page of ``messaging.selectors.conversation_list``:

1. Redis (one script call: the page and its unread counts). A page that leaves the cached prefix
   (past the first CONVCACHE_SIZE conversations) reads MySQL directly, through its index.
2. On a Redis miss the script has already started a fill generation. HBase is read on a small
   pool thread; if it has not answered within CONVCACHE_HEDGE_MS, MySQL is queried in parallel on
   another pool thread and the first usable answer wins. The loser finishes in the background and
   is dropped; it is never cancelled mid-call (a Thrift or SQL call cannot be interrupted safely).
3. The answer fills Redis (``redis_tier.finish``). An HBase row that is missing, not ready or
   overgrown is (re)built in the background from MySQL (``build.rebuild_async``).

No leaks: each pool has a fixed number of threads, and work is only submitted while a slot is
free (otherwise the caller reads MySQL itself), so a hung HBase can hold at most its pool, never
a growing queue. A pool thread closes its database connection after every query. Pools are per
process (threads do not survive a fork). A caller inside a transaction reads MySQL on its own
connection (another thread could not see its uncommitted rows).
"""

from __future__ import annotations

import logging
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from django.conf import settings
from django.db import connection
from redis.exceptions import RedisError

from config import metrics
from messaging.convcache import build, codec, hbase_tier, mysql_tier, redis_tier
from messaging.convcache.codec import Fill, Summary
from messaging.convcache.pools import in_thread_with_db, pool
from messaging.selectors import ConversationPage
from unread.selectors import unread_for_peers

log = logging.getLogger(__name__)
HBASE_THREADS = 4
MYSQL_THREADS = 4
LOSER_WAIT_S = 30.0  # how long the winner-less caller waits at most before reading MySQL itself


# -- the page --------------------------------------------------------------------------------
def conversation_page(
    owner: int, *, category: str | None, cursor: str | None, limit: int
) -> ConversationPage:
    want = limit + 1
    at = codec.cursor_member(cursor)
    try:
        found = redis_tier.read(owner, cursor=at, want=want, category=category)
    except RedisError:
        log.warning("convcache: Redis read failed for %s", owner, exc_info=True)
        metrics.inc("convcache_reads", tier="redis", result="error")
        return mysql_tier.page(owner, category=category, cursor=cursor, limit=limit)
    if found.status == "hit":
        metrics.inc("convcache_reads", tier="redis", result="hit")
        return _page(owner, found.entries, limit, found.unread)
    if found.status == "beyond":
        metrics.inc("convcache_reads", tier="mysql", result="beyond")
        return mysql_tier.page(owner, category=category, cursor=cursor, limit=limit)
    metrics.inc("convcache_reads", tier="redis", result="miss")
    fill = tier2(owner, hbase_ok=not found.hbase_dirty)
    _finish_quietly(owner, found.generation, fill)
    entries = fill.page(at, want, category)
    if entries is None:
        return mysql_tier.page(owner, category=category, cursor=cursor, limit=limit)
    return _page(owner, entries, limit)


def _page(
    owner: int, entries: list[Summary], limit: int, unread: list[int] | None = None
) -> ConversationPage:
    shown = entries[:limit]
    if unread is None:
        counts = unread_for_peers(owner, [s.peer for s in shown])
        unread = [counts.get(s.peer, 0) for s in shown]
    items = [codec.to_item(s, n) for s, n in zip(shown, unread, strict=False)]
    last = shown[-1] if shown else None
    next_cursor = f"{last.sort_key}:{last.peer}" if last and len(entries) > limit else None
    return ConversationPage(items, next_cursor)


def _finish_quietly(owner: int, generation: str, fill: Fill) -> None:
    try:
        redis_tier.finish(owner, generation, fill)
    except RedisError:
        log.warning("convcache: Redis fill failed for %s", owner, exc_info=True)


# -- tier 2: HBase, hedged with MySQL --------------------------------------------------------
def tier2(owner: int, *, hbase_ok: bool) -> Fill:
    """The owner's first CONVCACHE_SIZE conversations from HBase or MySQL, whichever is first."""
    if hbase_ok and hbase_tier.enabled():
        answer = hedged(owner)
        if answer is not None:
            return answer
    metrics.inc("convcache_reads", tier="mysql", result="hit")
    return mysql_tier.fill(owner)


def hedged(owner: int) -> Fill | None:
    """HBase's answer, or MySQL's if HBase is slower than the hedge delay; None: read MySQL."""
    hbase_call = pool("hbase", HBASE_THREADS).submit(lambda: hbase_tier.read(owner))
    if hbase_call is None:
        metrics.inc("convcache_reads", tier="hbase", result="saturated")
        return None
    try:
        view = hbase_call.result(timeout=settings.CONVCACHE_HEDGE_MS / 1000)
    except FutureTimeout:
        return _race(owner, hbase_call)
    except Exception:
        log.warning("convcache: HBase read failed for %s", owner, exc_info=True)
        metrics.inc("convcache_reads", tier="hbase", result="error")
        return None
    return _accept(owner, view)


def _race(owner: int, hbase_call: Future[hbase_tier.View]) -> Fill | None:
    metrics.inc("convcache_hedges")
    if connection.in_atomic_block:
        return None  # MySQL must be read on this connection: the caller does it now
    mysql_call = pool("mysql", MYSQL_THREADS).submit(
        in_thread_with_db(lambda: mysql_tier.fill(owner))
    )
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
                metrics.inc(
                    "convcache_hedge_wins", winner="hbase" if call is hbase_call else "mysql"
                )
                return answer
    return None


def _outcome(owner: int, call: Future[hbase_tier.View] | Future[Fill]) -> Fill | None:
    try:
        result = call.result()
    except Exception:
        log.warning("convcache: tier-2 read failed for %s", owner, exc_info=True)
        return None
    if isinstance(result, hbase_tier.View):
        return _accept(owner, result)
    metrics.inc("convcache_reads", tier="mysql", result="hit")
    return result


def _accept(owner: int, view: hbase_tier.View) -> Fill | None:
    """HBase's answer if its row is ready; a missing or overgrown row is rebuilt meanwhile."""
    if view.fill is None or view.cells > build.REBUILD_CELLS_FACTOR * int(settings.CONVCACHE_SIZE):
        build.rebuild_async(owner)
    if view.fill is None:
        metrics.inc("convcache_reads", tier="hbase", result="miss")
        return None
    metrics.inc("convcache_reads", tier="hbase", result="hit")
    return _top(view.fill)


def _top(fill: Fill) -> Fill:
    """At most CONVCACHE_SIZE entries: the row may have grown past it since its last build."""
    size = int(settings.CONVCACHE_SIZE)
    if len(fill.entries) <= size:
        return fill
    entries = fill.entries[:size]
    return Fill(entries, entries[-1].member, False, fill.source)
