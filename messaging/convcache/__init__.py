"""The conversation-list cache: Redis (tier 1) → HBase ``convlist`` (tier 2) → MySQL (the truth).

DESIGN.md, "Storage" and "Cache prewarming for big accounts". Each tier above MySQL holds, per
owner, a prefix of the conversation list (at most CONVCACHE_SIZE = 600 conversations, the first
pages) as packed summaries versioned by the conversation's ``mtime``:

- reader.py     the read path: Redis page; on a miss HBase, hedged with MySQL after
                CONVCACHE_HEDGE_MS; the answer fills the tiers above it; pages past the prefix
                read MySQL through its index (mysql_tier.py)
- writer.py     pushes after each conversation change (compare-and-set, never a regression)
- redis_tier.py, hbase_tier.py, mysql_tier.py   the tiers; keys.py, lua/, codec.py formats
- build.py      (re)builds from MySQL; prewarm.py big UPs, triggers, prewarm health
- pools.py      the bounded thread pools of the hedged reader and background rebuilds

Entry points: ``reader.conversation_page`` (``messaging.selectors.conversation_list`` routes
through it), ``writer.refresh`` / ``forget`` / ``invalidate`` (``messaging.services``, after each
mutation) and ``prewarm.on_unread_request`` (the unread-count view). Every tier builds on the read
model of ``messaging.convlist`` (page item, cursor, summary, the MySQL pager) and imports nothing
above it, so the package has no import cycle.
"""
