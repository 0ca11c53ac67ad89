"""Row events of the followed tables → one ``ChangeSet`` per transaction (pure: no I/O).

What each committed row change asks of the caches (services.py applies it):

- ``messaging_conversation``
    insert, or update that moved ``mtime`` forward   → ``refresh``: push the row's current state
                                                        (unless the caches hold that mtime
                                                        already: services.py, ``held``)
    update that changed the row but not its mtime     → ``bump``: move its mtime (max(+1, now)),
      (a DBA's ``SET pinned = 1``, or an mtime moved     then push, as the application does for a
      back)                                              change its rows do not show
    delete                                            → ``forget``: a tombstone of version
                                                        mtime + 1 (what ``conversation_delete``
                                                        pushes; never newer than a re-insert)
    update of the (owner, peer) key itself            → forget the old pair, refresh the new
    update of ``read_upto``, ``category`` or the key,  → ``recount``: the conversation's unread
      or delete of a row with messages past its read     count recomputed from its row as it is
      position                                           now and the inbox (a read position moved
                                                         in SQL, a conversation gone: what the
                                                         application sets after its own such
                                                         writes)
    by a statement not the application's (``outside``,
    infra/statements.py): insert with messages past    → ``recount`` too, and ``backfilled``
      its read position, or update of ``last_msgkey``     (the application's own deliveries
      (a backfill)                                        count themselves: never recounted)
- ``messaging_inbox``: the rows a statement not the application's inserted, changed or deleted
  (a backfill, a DBA removing a message) → ``recount`` and ``backfilled`` of that conversation.
  The application's own inbox rows are not even decoded (``ignored``).
- ``messaging_message``: an update of content, type, sender or status (a recall set in SQL), or a
  delete → ``messages``: the conversations showing it as their last message get bumped (their
  summary's preview changed, their mtime did not). An update is also ``edited``, and one that set
  the status to recalled ``recalled``: messaging finishes such a recall as its own (copies
  flagged, unread counted down) and shows an edit on the other routes' conversations (a
  campaign's recipients'). Inserts change no cache: ``ignored`` tells the follower not to decode
  them (a message's body is its largest column).
- ``messaging_block``: counted only: no cache tier holds blocks (a send and a campaign batch read
  them from MySQL), so there is nothing to push.

Rows come as python-mysql-replication gives them: ``{"values": {...}}`` for inserts and deletes,
``{"before_values": ..., "after_values": ...}`` for updates, keyed by column name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from messaging.models import Block, Conversation, InboxRow, Message, MessageStatus

CONVERSATIONS = Conversation._meta.db_table
MESSAGES = Message._meta.db_table
BLOCKS = Block._meta.db_table
INBOX = InboxRow._meta.db_table
TABLES = (CONVERSATIONS, MESSAGES, BLOCKS, INBOX)
MESSAGE_FIELDS = ("body", "type", "status", "sender_uid")
UNREAD_FIELDS = ("owner_uid", "peer_uid", "read_upto", "category")

Pair = tuple[int, int]
Row = Mapping[str, Any]


def ignored(table: str, kind: str, outside: bool = False) -> bool:
    """Row events that change no cache, whatever their rows: not worth decoding. The
    application's inbox rows are counted by the application already (``outside``: a statement
    without its mark)."""
    return (table == MESSAGES and kind == "insert") or (table == INBOX and not outside)


@dataclass
class ChangeSet:
    refresh: dict[Pair, int] = field(default_factory=dict)  # pair -> the newest mtime seen
    bump: set[Pair] = field(default_factory=set)
    forget: dict[Pair, int] = field(default_factory=dict)
    messages: set[int] = field(default_factory=set)
    edited: set[int] = field(default_factory=set)  # the updated ones among ``messages``
    recalled: set[int] = field(default_factory=set)  # the updates that set the status recalled
    blocks: int = 0
    recount: set[Pair] = field(default_factory=set)  # conversations whose unread may have moved
    backfilled: set[Pair] = field(default_factory=set)  # of those, by statements not the app's
    newest_mtime_ms: int = 0  # the newest conversation mtime seen (lag.py)

    def __bool__(self) -> bool:
        return bool(
            self.refresh or self.bump or self.forget or self.messages or self.blocks or self.recount
        )

    def size(self) -> int:
        return (
            len(self.refresh)
            + len(self.bump)
            + len(self.forget)
            + len(self.messages)
            + len(self.recount)
        )

    def merge(self, later: ChangeSet) -> None:
        """Add a later transaction's changes, to apply both at once. Every push reads the rows'
        current state (a refresh, a bump) or loses to a newer version (a tombstone), so the
        pushes of the union leave the caches as the pushes of each in turn would."""
        for pair, mtime in later.refresh.items():
            self.refresh[pair] = max(self.refresh.get(pair, 0), mtime)
        for pair, version in later.forget.items():
            self.forget[pair] = max(self.forget.get(pair, 0), version)
        self.bump |= later.bump
        self.messages |= later.messages
        self.edited |= later.edited
        self.recalled |= later.recalled
        self.blocks += later.blocks
        self.recount |= later.recount
        self.backfilled |= later.backfilled
        self.newest_mtime_ms = max(self.newest_mtime_ms, later.newest_mtime_ms)

    def add(
        self, table: str, kind: str, rows: Iterable[Mapping[str, Row]], outside: bool = False
    ) -> None:
        """One rows event: ``kind`` is insert | update | delete; ``outside``: its statement is
        not the application's."""
        for row in rows:
            if table == CONVERSATIONS:
                self._conversation(kind, row, outside)
            elif table == MESSAGES:
                self._message(kind, row)
            elif table == BLOCKS:
                self.blocks += 1
            elif table == INBOX and outside:
                self._backfill(_pair(_newest(row)))
                if "before_values" in row:
                    self._backfill(_pair(row["before_values"]))

    def _conversation(self, kind: str, row: Mapping[str, Row], outside: bool) -> None:
        if outside and kind != "delete":
            self._moved_on(row)
        if kind == "insert":
            self._refreshed(row["values"])
        elif kind == "delete":
            self._forgotten(row["values"])
            if int(row["values"]["last_msgkey"]) > int(row["values"]["read_upto"]):
                self.recount.add(_pair(row["values"]))  # it had messages unread
        else:
            self._updated(row["before_values"], row["after_values"])

    def _updated(self, before: Row, after: Row) -> None:
        if any(before.get(f) != after.get(f) for f in UNREAD_FIELDS):
            self.recount |= {_pair(before), _pair(after)}
        if _pair(before) != _pair(after):
            self._forgotten(before)
            self._refreshed(after)
        elif int(after["mtime"]) > int(before["mtime"]):
            self._refreshed(after)
        elif dict(before) != dict(after):
            self.bump.add(_pair(after))

    def _moved_on(self, row: Mapping[str, Row]) -> None:
        """A conversation inserted with messages unread, or its last message moved, by someone
        else than the application: recounted (the application's own count themselves)."""
        after = _newest(row)
        before = row.get("before_values")
        if before is None:
            moved = int(after["last_msgkey"]) > int(after["read_upto"])
        else:
            moved = int(before["last_msgkey"]) != int(after["last_msgkey"])
        if moved:
            self._backfill(_pair(after))

    def _backfill(self, pair: Pair) -> None:
        self.recount.add(pair)
        self.backfilled.add(pair)

    def _refreshed(self, row: Row) -> None:
        pair, mtime = _pair(row), int(row["mtime"])
        self.refresh[pair] = max(self.refresh.get(pair, 0), mtime)
        self.newest_mtime_ms = max(self.newest_mtime_ms, mtime)

    def _forgotten(self, row: Row) -> None:
        pair = _pair(row)
        self.forget[pair] = max(self.forget.get(pair, 0), int(row["mtime"]) + 1)

    def _message(self, kind: str, row: Mapping[str, Row]) -> None:
        if kind == "delete":
            self.messages.add(int(row["values"]["msgkey"]))
        elif kind == "update":
            before, after = row["before_values"], row["after_values"]
            if any(before.get(f) != after.get(f) for f in MESSAGE_FIELDS):
                msgkey = int(after["msgkey"])
                self.messages.add(msgkey)
                self.edited.add(msgkey)
                if _recalled(after) and not _recalled(before):
                    self.recalled.add(msgkey)


def _recalled(row: Row) -> bool:
    return row.get("status") is not None and int(row["status"]) == MessageStatus.RECALLED


def _newest(row: Mapping[str, Row]) -> Row:
    """A row event's row as it is now: an insert's image, an update's after-image."""
    return row.get("values") or row["after_values"]


def _pair(row: Row) -> Pair:
    return int(row["owner_uid"]), int(row["peer_uid"])
