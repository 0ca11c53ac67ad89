"""Redis key formats of the unread counters. Per-user keys carry the ``{u:<uid>}`` hash tag.

unread:{u:<uid>}   hash: ``t`` total, ``c:<category>`` per-category total, ``p:<peer>`` per
                   conversation, ``k:<peer>`` the category that conversation's count is filed
                   under (so a conversation whose category changes moves its whole count).
                   Changed only by the Lua scripts in storage/counters/lua, so ``t`` always
                   equals the sum of the ``p:`` fields and of the ``c:`` fields, and no field is
                   negative; zero fields are deleted, so the hash holds only conversations with
                   something unread.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

TOTAL = b"t"
CATEGORY_PREFIX = b"c:"
PEER_PREFIX = b"p:"
KIND_PREFIX = b"k:"


def unread(uid: int) -> str:
    return f"unread:{{u:{uid}}}"


def unread_many(uids: Iterable[int]) -> list[str]:
    return [f"unread:{{u:{uid}}}" for uid in uids]


UNREAD_SCAN = "unread:{u:*}"  # SCAN MATCH pattern of every user's unread hash
UNREAD_UID = re.compile(rb"^unread:\{u:(\d+)\}$")  # the uid back out of an ``unread`` key name


# The counters' epoch (a random token) and the Redis run it was set for (INFO server run_id):
# a Redis that restarted has another run_id, so its counters may have come back empty or behind
# and the epoch moves on (epoch.py). Global keys, read with each user's own key.
EPOCH = "counters:epoch"
RUN_ID = "counters:run_id"


def verified(uid: int) -> str:
    """The epoch in which this user's counters were last rebuilt from the truth."""
    return f"unread:v:{{u:{uid}}}"


def applied_marker(name: str) -> str:
    """A one-shot marker that makes one counter change idempotent (a batch, a message)."""
    return f"unread:applied:{{{name}}}"


def applied_marker_in(tag: str, name: str) -> str:
    """The same marker for the owners of one cluster slot: ``tag`` hashes to that slot."""
    return f"unread:applied:{tag}:{name}"


def applied_bits(series: str) -> str:
    """The markers of a numbered series of changes (a campaign's batches), one bit each."""
    return f"unread:appliedbits:{{{series}}}"


def applied_bits_in(tag: str, series: str) -> str:
    """The same bitmap for the owners of one cluster slot: ``tag`` hashes to that slot."""
    return f"unread:appliedbits:{tag}:{series}"
