"""The conversation list's read model: its page item, its page, its cursor and its last-message
summary. Every tier of the cache (Redis, HBase, and the truth in MySQL that messaging hands in:
``source.py``) answers in these, and the group list merges into them.

- ``ConversationItem`` / ``ConversationPage``: what ``GET /users/{uid}/conversations`` serves.
- ``Cursor``: ``<sort_key>:<peer_uid>`` of the last item served. The list order is
  (sort_key, peer_uid) descending.
- ``last_message``: the summary an item shows of its newest message (a recalled one reads
  ``RECALLED_PREVIEW``; ``messaging.convlist.message_preview`` makes the preview of a message).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from storage import msgkey as keys

RECALLED_PREVIEW = "[recalled]"


@dataclass(frozen=True)
class ConversationItem:
    peer_uid: int
    category: str
    unread: int
    last_message: dict[str, Any] | None
    sort_key: int
    pinned: bool
    muted: bool
    mtime: int


@dataclass(frozen=True)
class ConversationPage:
    results: list[ConversationItem]
    next_cursor: str | None


class Cursor(NamedTuple):
    """Where a page ends: the (sort_key, peer_uid) of the last item served."""

    sort_key: int
    peer: int

    def __str__(self) -> str:
        return f"{self.sort_key}:{self.peer}"

    @classmethod
    def parse(cls, text: str | None) -> Cursor | None:
        """None for the first page; ValueError for text this API never returned."""
        if not text:
            return None
        sort_key, sep, peer = text.partition(":")
        if not sep or not sort_key.isdigit() or not peer.isdigit():
            raise ValueError(f"not a conversation-list cursor: {text!r}")
        return cls(int(sort_key), int(peer))


def last_message(msgkey: int, sender_uid: int, text: str | None) -> dict[str, Any]:
    return {
        "msgkey": msgkey,
        "sender_uid": sender_uid,
        "preview": text,
        "created_at": keys.created_at(msgkey).isoformat(),
    }
