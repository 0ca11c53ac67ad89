"""Paging shared by every app: the API's page-size ceiling, and admin changelists over big tables.

API lists are keyset-paged (``next_cursor``), never by offset; ``PAGE_MAX`` caps ``limit``.
Admin lists over tables of millions of rows never count them in full (``BoundedCountPaginator``)
and search by exact id through an index (``BigTableAdmin``) rather than a ``LIKE`` scan.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from api.fields import MAX_ID
from config.dbrouter import ReplicaChangelistMixin

PAGE_MAX = 100
COUNT_CAP = 10_000


class BoundedCountPaginator(Paginator):
    """Counts at most COUNT_CAP rows: ``SELECT COUNT(*) FROM (... LIMIT n)`` stays cheap."""

    @cached_property
    def count(self) -> int:
        rows = self.object_list
        if isinstance(rows, QuerySet):
            return rows.order_by()[:COUNT_CAP].count()
        return len(rows)


def id_terms(search_term: str) -> list[int] | None:
    """The whitespace-separated ids of a search, or None if any term is not an id."""
    terms = search_term.split()
    if not all(t.isascii() and t.isdigit() and int(t) <= MAX_ID for t in terms):
        return None
    return [int(t) for t in terms]


class BigTableAdmin(ReplicaChangelistMixin):
    """Bounded counts, and exact-id search over ``id_search_fields`` (any matches each term);
    the changelist reads the read replica (config.dbrouter)."""

    id_search_fields: tuple[str, ...] = ()
    paginator = BoundedCountPaginator
    show_full_result_count = False

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        if not search_term.strip():
            return queryset, False
        ids = id_terms(search_term)
        if ids is None:
            return queryset.none(), False
        for value in ids:
            queryset = queryset.filter(self._any_field(value))
        return queryset, False

    def _any_field(self, value: int) -> Q:
        query = Q()
        for name in self.id_search_fields:
            query |= Q(**{name: value})
        return query
