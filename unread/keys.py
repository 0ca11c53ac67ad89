"""Redis key formats of the unread app. Per-user keys carry the ``{u:<uid>}`` hash tag.

unread:{u:<uid>}   hash: ``t`` total, ``c:<category>`` per-category total, ``p:<peer>`` per
                   conversation. Changed only by the Lua scripts in unread/lua, so ``t`` always
                   equals the sum of the ``p:`` fields and of the ``c:`` fields; zero fields are
                   deleted, so the hash holds only conversations with something unread.
"""

from __future__ import annotations

TOTAL = b"t"
CATEGORY_PREFIX = b"c:"
PEER_PREFIX = b"p:"


def unread(uid: int) -> str:
    return f"unread:{{u:{uid}}}"


def applied_marker(name: str) -> str:
    """A one-shot marker that makes one counter change idempotent (a batch, a message)."""
    return f"unread:applied:{{{name}}}"
