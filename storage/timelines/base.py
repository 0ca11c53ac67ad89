"""The group-timeline contract: one timeline per group, entries by ``seq``, newest first.

An entry is one group message: ``(gid, seq, msgkey, sender_uid, flags)``; its content is stored
once in the content table under ``msgkey``. Writes are idempotent: the same (gid, seq) written
twice is one entry (the second write wins, which is how flags change).

Backends implement three primitives; the public API below is built on them:
  ``_put(entries)``, ``_scan(gid, before, limit)``, ``_delete(keys)``.
``transactional`` says whether ``_put`` joins the caller's SQL transaction (the SQL backend): then
a send writes its entry in the same commit as its seq; otherwise (HBase) after it, repaired from
the send ledger (``groups.services.timeline_repair``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

FLAG_RECALLED = 1

Key = tuple[int, int]  # (gid, seq)


class GroupEntry(NamedTuple):
    gid: int
    seq: int
    msgkey: int
    sender_uid: int
    flags: int = 0

    @property
    def key(self) -> Key:
        return (self.gid, self.seq)

    @property
    def recalled(self) -> bool:
        return bool(self.flags & FLAG_RECALLED)


@dataclass(frozen=True, slots=True)
class GroupPage:
    entries: list[GroupEntry]
    next_before: int | None  # pass as ``before`` for the next (older) page; None at the end


class GroupTimeline(ABC):
    """Public API; subclasses implement the primitives only."""

    scan_chunk = 1000
    transactional = False

    # -- public API ------------------------------------------------------------------------
    def add_many(self, entries: Iterable[GroupEntry]) -> None:
        batch = list(entries)
        if batch:
            self._put(batch)

    def add(self, entry: GroupEntry) -> None:
        self.add_many([entry])

    def page(self, gid: int, before: int | None = None, limit: int = 50) -> GroupPage:
        """Entries with seq < ``before`` (all if None), newest first."""
        rows = self._scan(gid, before, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return GroupPage(rows, rows[-1].seq if more and rows else None)

    def get(self, gid: int, seq: int) -> GroupEntry | None:
        rows = self._scan(gid, seq + 1, 1)
        return rows[0] if rows and rows[0].seq == seq else None

    def set_flags(self, entries: Iterable[GroupEntry], flags: int) -> None:
        self.add_many(GroupEntry(e.gid, e.seq, e.msgkey, e.sender_uid, flags) for e in entries)

    def remove(self, gid: int, seqs: Iterable[int]) -> None:
        self._delete([(gid, s) for s in seqs])

    def remove_group(self, gid: int) -> None:
        chunk: list[Key] = []
        for key in self._keys(gid):
            chunk.append(key)
            if len(chunk) >= self.scan_chunk:
                self._delete(chunk)
                chunk = []
        if chunk:
            self._delete(chunk)

    def count(self, gid: int) -> int:
        return sum(1 for _ in self._keys(gid))

    # -- helpers on top of primitives -------------------------------------------------------
    def _keys(self, gid: int) -> Iterator[Key]:
        before: int | None = None
        while True:
            rows = self._scan(gid, before, self.scan_chunk)
            yield from (e.key for e in rows)
            if len(rows) < self.scan_chunk:
                return
            before = rows[-1].seq

    # -- primitives -------------------------------------------------------------------------
    @abstractmethod
    def _put(self, entries: Sequence[GroupEntry]) -> None:
        """Write entries; an existing (gid, seq) is overwritten."""

    @abstractmethod
    def _scan(self, gid: int, before: int | None, limit: int) -> list[GroupEntry]:
        """Up to ``limit`` entries with seq < ``before`` (all if None), newest first."""

    @abstractmethod
    def _delete(self, keys: Sequence[Key]) -> None:
        """Delete the given keys; missing ones are ignored."""
