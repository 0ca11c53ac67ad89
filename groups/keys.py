"""Redis key formats of group chat. Per-group keys carry ``{g:<gid>}``, per-user keys ``{u:<uid>}``;
a Lua call touches the keys of one tag only.

ghead:{g:<gid>}     hash, the group's head (a cache of MySQL, rebuilt when missing):
                    ``max`` max seq, ``at`` last activity (ms), ``ls`` the seq the summary shows,
                    ``last`` the last-message summary (JSON: msgkey, sender_uid, preview,
                    created_at), ``sk`` the list's sort key (the last msgkey, else the gid).
grecall:{g:<gid>}   sorted set of the group's recalled seqs (score = member = seq).
gsum:{g:<gid>}      string, what unread and the list's order need of the head, for one MGET
                    per slot: ``<max>|<recalled seqs csv, ascending, the newest
                    RECALLS_KEPT>|<1 if older recalls were dropped from the list, else 0>|<sk>``
                    (``sk`` as in the head; a summary written before it was added has three
                    fields, and the list rebuilds it). Written with the head, by the same
                    scripts.
gmember:{u:<uid>}   hash, the user's positions in their current groups: field ``<gid>``, value
                    ``<read_seq>|<mention seqs>|<hidden seqs>`` (comma-separated seqs after
                    ``read_seq`` only: unread @mentions, and unread messages the user deleted for
                    themselves). Field ``_`` marks a hash built from MySQL; for a user in
                    no group the hash holds only it, for EMPTY_TTL_S (so their unread reads
                    make no SQL query), until a join makes it lasting.
"""

from __future__ import annotations

from collections.abc import Sequence

BUILT_FIELD = b"_"
EMPTY_TTL_S = 24 * 3600


def head(gid: int) -> str:
    return f"ghead:{{g:{gid}}}"


RECALLS_KEPT = 1000


def summary(gid: int) -> str:
    return f"gsum:{{g:{gid}}}"


def summary_raw(gid: bytes) -> bytes:
    """``summary`` from a gid as Redis returned it (the unread fast path's raw read)."""
    return b"gsum:{g:" + gid + b"}"


def summaries_raw(gids: Sequence[bytes]) -> list[bytes]:
    """``summary_raw`` of each gid, built by two C-level calls instead of one concatenation per
    gid (gids are digits: they never contain the NUL used to split)."""
    if not gids:
        return []
    return (b"gsum:{g:" + b"}\0gsum:{g:".join(gids) + b"}").split(b"\0")


def recalled(gid: int) -> str:
    return f"grecall:{{g:{gid}}}"


def member(uid: int) -> str:
    return f"gmember:{{u:{uid}}}"
