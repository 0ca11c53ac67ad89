"""The conversation-list cache: Redis (tier 1) → HBase ``convlist`` (tier 2) → MySQL (the truth).

DESIGN.md, "Storage" and "Cache prewarming for big accounts". Each tier above MySQL holds, per
owner, a prefix of the conversation list (at most CONVCACHE_SIZE = 600 conversations, the first
pages) as packed summaries versioned by the conversation's ``mtime``:

- reader.py     the read path: Redis page; on a miss HBase, hedged with MySQL after
                CONVCACHE_HEDGE_MS; the answer fills the tiers above it; pages past the prefix
                read MySQL through its index (mysql_tier.py)
- writer.py     pushes after each conversation change (compare-and-set, never a regression);
                held.py which of a fan-out's changes every tier holds already
- redis_tier.py, hbase_tier.py, mysql_tier.py   the tiers; keys.py, lua/, codec.py formats
- model.py      the read model every tier answers in: page item, page, cursor, last message
- build.py      (re)builds from MySQL; prewarm.py big UPs, triggers, prewarm health
- pools.py      the bounded thread pools of the hedged reader and background rebuilds

The truth is messaging's (its ``Conversation`` and ``Message`` rows), and this floor imports no
app: ``mysql_tier.py`` declares what the cache reads of it (a ``Truth`` protocol: ``fill``,
``current``, ``mysql_page``, ``owners_above``), and messaging binds its reader
(``messaging.convlist``) from ``MessagingConfig.ready``, as it binds the prewarm task
(``infra.taskref``). A binding, not an argument: the tiers that read MySQL (build, writer, reader,
prewarm) are reached from many entry points, none of which should have to carry it.

Entry points: ``reader.conversation_page`` (``messaging.selectors.conversation_list`` routes
through it), ``writer.refresh`` / ``forget`` / ``invalidate`` (``messaging.services``, after each
mutation) and ``prewarm.on_unread_request`` (the unread-count view).
"""
