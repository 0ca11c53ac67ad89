"""Tier 3 of the conversation-list read path: MySQL, the truth. Its rows are messaging's
(``Conversation``, ``Message``), so the storage floor cannot read them itself: messaging hands
its reader in (``messaging.convlist``, bound by ``MessagingConfig.ready``: the same mechanism as
``infra.taskref``), and the tiers above call the functions below, which forward to it.

What the cache asks of the truth (``Truth``):

- ``fill(owner, db=...)``: the owner's first CONVCACHE_SIZE conversations as a tier answer, read
  from a replica that has caught up with the primary as of now (``db`` names the alias instead);
- ``current(pairs)``: the state a push writes, per owner, of those (owner, peer) conversations
  that exist, read from the primary;
- ``mysql_page(owner, ...)``: one page straight from MySQL (past the cached prefix, or no cache);
- ``owners_above(threshold)``: the owners with more conversations than that (the big UPs).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from django.core.exceptions import ImproperlyConfigured

from storage.convcache.codec import Fill, Summary
from storage.convcache.model import ConversationPage


class Truth(Protocol):
    def fill(self, owner: int, *, db: str = "") -> Fill: ...

    def current(self, pairs: Sequence[tuple[int, int]]) -> dict[int, list[Summary]]: ...

    def mysql_page(
        self, owner: int, *, category: str | None, cursor: str | None, limit: int
    ) -> ConversationPage: ...

    def owners_above(self, threshold: int) -> Iterator[int]: ...


_bound: list[Truth] = []


def bind(truth: Truth) -> None:
    """Called from messaging's ``AppConfig.ready`` (again in tests: the same reader)."""
    _bound[:] = [truth]


def _truth() -> Truth:
    if not _bound:
        raise ImproperlyConfigured(
            "The conversation-list cache was read before messaging bound it."
        )
    return _bound[0]


def fill(owner: int, *, db: str = "") -> Fill:
    return _truth().fill(owner, db=db)


def current(pairs: Sequence[tuple[int, int]]) -> dict[int, list[Summary]]:
    return _truth().current(pairs)


def mysql_page(
    owner: int, *, category: str | None, cursor: str | None, limit: int
) -> ConversationPage:
    return _truth().mysql_page(owner, category=category, cursor=cursor, limit=limit)


def owners_above(threshold: int) -> Iterator[int]:
    return _truth().owners_above(threshold)
