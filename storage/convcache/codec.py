"""Packed conversation summaries: one format for the Redis hash values and the HBase cells.

    <mtime>|<member>|<L or T>|<category>|<peer>|<json>

``mtime`` (decimal ms, below 2**53 so Lua compares it exactly) is the version. ``member`` is
``<sort_key:016x><peer:016x>``: the zset member, whose byte order is the list order. ``L`` marks a
live entry, ``T`` a tombstone; at equal mtimes the tombstone is the newer version. ``peer`` is the
decimal uid (Lua cannot print a 64-bit integer). ``json`` is ``[last_msgkey, sender_uid | null,
preview | null, pinned, muted, read_upto]``: all a list item shows besides the live unread count,
so a cached page costs no MySQL query. The Lua scripts read the header only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from storage.convcache.model import ConversationItem, Cursor, last_message


@dataclass(frozen=True, slots=True)
class Summary:
    peer: int
    mtime: int
    sort_key: int = 0
    category: str = ""
    last_msgkey: int = 0
    sender_uid: int | None = None
    preview: str | None = None
    pinned: bool = False
    muted: bool = False
    read_upto: int = 0
    deleted: bool = False

    @property
    def member(self) -> str:
        return member(self.sort_key, self.peer)

    @property
    def version(self) -> tuple[int, bool]:
        return (self.mtime, self.deleted)


def member(sort_key: int, peer: int) -> str:
    return f"{sort_key:016x}{peer:016x}"


def field(peer: int) -> str:
    return f"{peer:016x}"


def parse_member(value: str) -> tuple[int, int]:
    return int(value[:16], 16), int(value[16:], 16)


def cursor_member(cursor: Cursor | None) -> str:
    """A list cursor as a zset member ('' for the first page)."""
    return "" if cursor is None else member(cursor.sort_key, cursor.peer)


def encode(s: Summary) -> bytes:
    kind = "T" if s.deleted else "L"
    body = "" if s.deleted else _payload(s)
    return f"{s.mtime}|{s.member}|{kind}|{s.category}|{s.peer}|{body}".encode()


def _payload(s: Summary) -> str:
    fields = [s.last_msgkey, s.sender_uid, s.preview, int(s.pinned), int(s.muted), s.read_upto]
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def decode(raw: bytes) -> Summary:
    mtime, mem, kind, category, peer, body = raw.decode().split("|", 5)
    sort_key, _ = parse_member(mem)
    if kind == "T":
        return Summary(int(peer), int(mtime), sort_key, deleted=True)
    last, sender, preview, pinned, muted, read_upto = json.loads(body)
    return Summary(
        int(peer),
        int(mtime),
        sort_key,
        category,
        last,
        sender,
        preview,
        bool(pinned),
        bool(muted),
        read_upto,
    )


def tombstone(peer: int, mtime: int) -> Summary:
    return Summary(peer, mtime, deleted=True)


def to_item(s: Summary, unread: int) -> ConversationItem:
    last = None
    if s.sender_uid is not None:
        last = last_message(s.last_msgkey, s.sender_uid, s.preview)
    return ConversationItem(
        s.peer, s.category, unread, last, s.sort_key, s.pinned, s.muted, s.mtime
    )


@dataclass(frozen=True, slots=True)
class Packed:
    """An encoded summary with its header read; the JSON body is decoded only when shown."""

    raw: bytes
    peer: int
    member: str
    category: str
    deleted: bool

    @classmethod
    def of(cls, raw: bytes) -> Packed:
        _, mem, kind, category, peer, _ = raw.split(b"|", 5)
        return cls(raw, int(peer), mem.decode(), category.decode(), kind == b"T")

    @classmethod
    def from_summary(cls, s: Summary) -> Packed:
        return cls(encode(s), s.peer, s.member, s.category, s.deleted)

    def summary(self) -> Summary:
        return decode(self.raw)


@dataclass(frozen=True, slots=True)
class Fill:
    """A source's answer for one owner: the top live entries, newest first, and how far they
    reach. Every conversation at or above ``boundary`` (a member) is among ``entries``; with
    ``complete`` they are the owner's whole list."""

    entries: list[Packed]
    boundary: str
    complete: bool
    source: str  # 'm' MySQL, 'h' HBase

    def page(self, cursor: str, want: int, category: str | None) -> list[Packed] | None:
        """``want`` entries after ``cursor``, or None when the page leaves what this covers."""
        if cursor and not self.complete and cursor <= self.boundary:
            return None
        found = [
            p
            for p in self.entries
            if (not cursor or p.member < cursor) and (not category or p.category == category)
        ][:want]
        return found if len(found) == want or self.complete else None
