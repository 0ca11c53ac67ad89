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

Public API: ``conversation_page`` (messaging.selectors.conversation_list routes through it),
``refresh`` / ``forget`` / ``invalidate`` (messaging.services, after each mutation) and
``prewarm.on_unread_request`` (the unread-count view).
"""

from __future__ import annotations

from django.conf import settings

from messaging.convcache.writer import forget, invalidate, refresh
from messaging.selectors import ConversationPage

__all__ = ["conversation_page", "forget", "invalidate", "refresh"]


def conversation_page(
    owner: int, *, category: str | None = None, cursor: str | None = None, limit: int = 20
) -> ConversationPage | None:
    """A page of the owner's list from the cache tiers; None when the cache is switched off."""
    if not settings.CONVCACHE_ENABLED:
        return None
    from messaging.convcache import reader

    return reader.conversation_page(owner, category=category, cursor=cursor, limit=limit)
