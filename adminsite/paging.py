"""Admin changelists over big tables, and the read-only admin every view-only page uses.

Admin lists over tables of millions of rows (``BigTableAdmin``) are honest about what they know:

- **Counts.** A list counts at most ``COUNT_CAP + 1`` rows (``SELECT COUNT(*) FROM (... LIMIT
  10001)``). Below the cap the count is exact ("1,234 conversations"). Past it the line says
  "about 200,000 conversations (estimated)" from the engine's own statistics (MariaDB:
  ``information_schema.TABLES.TABLE_ROWS`` for an unfiltered list, the row estimate of ``EXPLAIN``
  for a filtered one that an index serves), or "more than 10,000 conversations" when the engine
  has no estimate worth showing (SQLite, a filter that scans). No uncapped ``COUNT`` runs: the
  full count is off (``show_full_result_count``) and so are facet counts (``show_facets``).
- **Paging.** Offset pages reach the first ``COUNT_CAP`` rows in the list's order (100 pages of
  100), and the count line says so; the rest is reached by searching, filtering or sorting the
  other way (a clear limit rather than keyset links: the admin's sorting, filters and search
  keep working unchanged). A page reads its primary keys through the order's index, then its
  rows by key, so page 100 costs an index-only scan of 10,000 entries, not a sort. A page past
  the last one (or any ``?p=`` but 1 on a one-page list) answers 404 with a page that says so
  and links to the first and last pages (same filters), instead of Django's silent page 1.
- **Sorting.** Only columns an index serves in order are sortable: the primary key, a unique
  column, or the first column of an index or unique constraint, sorted by that index's columns
  (then the primary key) all in one direction, so the database walks the index instead of
  sorting the table (``sort_orders``, inferred from the model's ``Meta``; an admin may add
  entries). A ``?o=`` naming another column is ignored, with a message saying so, and never run.
- **Search** is by exact id through an index (``id_search_fields``) rather than a ``LIKE`` scan;
  an admin with no ``id_search_fields`` keeps Django's search over ``search_fields``.

Changelists read the read replica (infra.dbrouter). A big table's own change-list template must
extend ``admin/big_table/change_list.html`` to keep the count line.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Literal

from django.contrib import messages
from django.contrib.admin import ShowFacets
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ORDER_VAR, PAGE_VAR, ChangeList
from django.core.exceptions import FieldDoesNotExist
from django.core.paginator import Page, Paginator
from django.db import DatabaseError, connections
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from adminsite.audit import AuditedAdmin
from infra.dbrouter import ReplicaChangelistMixin
from infra.sqlvalues import MAX_ID

COUNT_CAP = 10_000
# EXPLAIN access types whose row estimate reflects the filter (an index lookup or range);
# a full scan's estimate is the table's size, which says nothing about the filter.
INDEXED_ACCESS = {"const", "eq_ref", "ref", "ref_or_null", "range", "index_merge", "fulltext"}


class BoundedCountPaginator(Paginator):
    """Counts at most COUNT_CAP + 1 rows (cheap: ``COUNT(*)`` over a ``LIMIT``); pages reach the
    first COUNT_CAP of them. ``capped`` says whether there are more."""

    @cached_property
    def counted(self) -> int:
        rows = self.object_list
        if isinstance(rows, QuerySet):
            return rows.order_by()[: COUNT_CAP + 1].count()
        return len(rows)

    @property
    def capped(self) -> bool:
        return self.counted > COUNT_CAP

    @cached_property
    def count(self) -> int:
        return min(self.counted, COUNT_CAP)

    def page(self, number: Any) -> Page:
        """A page in two steps: the page's primary keys first (an index-only scan when the
        order is an index's: InnoDB's secondary indexes hold the primary key), then its rows by
        primary key. One query would read every skipped row in full, or sort the table."""
        rows = self.object_list
        if not isinstance(rows, QuerySet) or not rows.ordered:
            return super().page(number)
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = min(bottom + self.per_page, self.count)
        keys = list(rows.values_list("pk", flat=True)[bottom:top])
        return Page(rows.filter(pk__in=keys), number, self)


# -- estimates --------------------------------------------------------------------------------
def estimated_rows(queryset: QuerySet[Any]) -> int | None:
    """The engine's estimate of how many rows ``queryset`` holds, or None without a usable one."""
    connection = connections[queryset.db]
    if connection.vendor != "mysql":
        return None  # SQLite keeps no row estimate unless ANALYZE ran
    try:
        if not queryset.query.where:
            return _table_rows(queryset)
        return _explain_rows(queryset)
    except DatabaseError:
        return None


def _table_rows(queryset: QuerySet[Any]) -> int | None:
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_ROWS FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s",
            [queryset.model._meta.db_table],
        )
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else None


def _explain_rows(queryset: QuerySet[Any]) -> int | None:
    sql, params = queryset.order_by().query.get_compiler(queryset.db).as_sql()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        columns = [c[0].lower() for c in cursor.description]
        first = dict(zip(columns, cursor.fetchone() or (), strict=False))
    if first.get("type") not in INDEXED_ACCESS or first.get("rows") is None:
        return None
    return int(first["rows"])


def about(number: int) -> int:
    """``number`` to two significant figures: an estimate shown with no false precision."""
    digits = len(str(number))
    return number if digits <= 2 else round(number, 2 - digits)


def count_label(paginator: BoundedCountPaginator, queryset: QuerySet[Any], plural: str) -> str:
    """The count line: exact below the cap, else an engine estimate or "more than", labelled."""
    if not paginator.capped:
        return f"{paginator.count:,} {plural}"
    estimate = estimated_rows(queryset)
    if estimate is None or about(estimate) <= COUNT_CAP:
        return f"more than {COUNT_CAP:,} {plural}"
    return f"about {about(estimate):,} {plural} (estimated)"


# -- indexed orderings ------------------------------------------------------------------------
def index_orderings(model: type[Model]) -> dict[str, tuple[str, ...]]:
    """Field attname -> the columns (ascending) of an index that starts with it, ending in a
    total order (the primary key last when the index is not unique)."""
    meta = model._meta
    pk = meta.pk.attname if meta.pk is not None else "id"
    keys: list[tuple[str, ...]] = [(pk,)]
    keys += [(f.attname,) for f in meta.concrete_fields if f.unique and not f.null]
    keys += [_attnames(model, c.fields) for c in meta.total_unique_constraints]
    keys += [(*_attnames(model, i.fields), pk) for i in meta.indexes if i.fields]
    keys += [
        (f.attname, pk)
        for f in meta.concrete_fields
        if getattr(f, "db_index", False) and not f.unique
    ]
    found: dict[str, tuple[str, ...]] = {}
    for key in keys:
        found.setdefault(key[0], tuple(dict.fromkeys(key)))  # a repeated pk appears once
    return found


def _attnames(model: type[Model], names: Any) -> tuple[str, ...]:
    return tuple(model._meta.get_field(n.lstrip("-")).attname for n in names)  # type: ignore[union-attr]


class PageOutOfRange(Exception):
    """A ``?p=`` past the last page (or below 1)."""

    def __init__(self, page: str, last: int) -> None:
        super().__init__(page)
        self.page, self.last = page, last


class BigTableChangeList(ChangeList):
    """Counts, pages and sorts as the module docstring says."""

    model_admin: BigTableAdmin
    count_label = ""
    capped = False
    cap = f"{COUNT_CAP:,}"

    def get_ordering(self, request: HttpRequest, queryset: QuerySet[Any]) -> list[Any]:
        wanted = self.params.get(ORDER_VAR)
        indexed = self._indexed_ordering(request, wanted) if wanted else []
        if indexed:
            return list(indexed)
        self.params.pop(ORDER_VAR, None)  # page and filter links do not carry a refused order
        admin_default = self.model_admin.get_ordering(request)
        default: list[Any] = list(admin_default or self._get_default_ordering())  # type: ignore[attr-defined]
        default += queryset.query.order_by
        return list(self._get_deterministic_ordering(default))  # type: ignore[attr-defined]

    def _indexed_ordering(self, request: HttpRequest, wanted: str) -> list[str]:
        orders = self.model_admin.get_sort_orders()
        for part in wanted.split("."):
            descending, column = part.startswith("-"), self._column(part.lstrip("-"))
            if column is None:
                continue
            if column in orders:
                prefix = "-" if descending else ""
                return [prefix + name for name in orders[column]]
            messages.warning(
                request,
                f"This list cannot be sorted by “{column}”: no index serves that order, so "
                "sorting would read the whole table. It is shown in its default order.",
            )
        return []

    def _column(self, index: str) -> str | None:
        if not index.isdigit() or int(index) >= len(self.list_display):
            return None
        column = self.list_display[int(index)]
        return column if isinstance(column, str) else None

    def get_ordering_field_columns(self) -> dict[int, Literal["desc", "asc"]]:
        sortable = set(self.model_admin.get_sort_orders())
        columns = super().get_ordering_field_columns()
        return {i: d for i, d in columns.items() if self._column(str(i)) in sortable}

    def get_results(self, request: HttpRequest) -> None:
        try:
            super().get_results(request)
        except IncorrectLookupParameters as exc:  # Django's answer to an InvalidPage
            last = self.model_admin.get_paginator(request, self.queryset, self.list_per_page)
            raise PageOutOfRange(request.GET.get(PAGE_VAR, ""), last.num_pages) from exc
        paginator = self.paginator
        assert isinstance(paginator, BoundedCountPaginator)
        if not self.multi_page and self.page_num != 1:  # Django shows page 1 for any ?p=
            raise PageOutOfRange(request.GET.get(PAGE_VAR, ""), paginator.num_pages)
        self.capped = paginator.capped
        self.count_label = count_label(paginator, self.queryset, str(self.opts.verbose_name_plural))
        if paginator.count == 1 and not self.capped:
            self.count_label = f"1 {self.opts.verbose_name}"


def id_terms(search_term: str) -> list[int] | None:
    """The whitespace-separated ids of a search, or None if any term is not an id."""
    terms = search_term.split()
    if not all(t.isascii() and t.isdigit() and int(t) <= MAX_ID for t in terms):
        return None
    return [int(t) for t in terms]


class BigTableAdmin(ReplicaChangelistMixin, AuditedAdmin):
    """Bounded and estimated counts, pages that never jump, sorting on indexed columns only, and
    exact-id search over ``id_search_fields`` (any matches each term); the changelist reads the
    read replica (infra.dbrouter); a form save that changed nothing logs nothing (adminsite.audit).
    ``sort_orders`` adds or overrides sortable columns:
    ``{column: (field, ...)}``, ascending, ending in a total order an index serves."""

    id_search_fields: tuple[str, ...] = ()
    sort_orders: dict[str, tuple[str, ...]] = {}
    paginator = BoundedCountPaginator
    show_full_result_count = False
    show_facets = ShowFacets.NEVER
    change_list_template = "admin/big_table/change_list.html"

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return BigTableChangeList

    def get_sort_orders(self) -> dict[str, tuple[str, ...]]:
        """list_display column -> the ordering (ascending) that sorts by it through an index."""
        by_field = index_orderings(self.model)
        orders: dict[str, tuple[str, ...]] = {}
        for column in self.list_display:
            if not isinstance(column, str):
                continue
            attname = self._sort_attname(column)
            if attname in by_field:
                orders[column] = by_field[attname]
        return {**orders, **self.sort_orders}

    def _sort_attname(self, column: str) -> str | None:
        target = getattr(getattr(self, column, None), "admin_order_field", column)
        if not isinstance(target, str):
            return None
        try:
            field = self.model._meta.get_field(target.lstrip("-"))
        except FieldDoesNotExist:  # a computed column
            return None
        return getattr(field, "attname", None)

    def get_sortable_by(self, request: HttpRequest) -> tuple[str, ...]:
        return tuple(self.get_sort_orders())

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        try:
            response = super().changelist_view(request, extra_context)
        except PageOutOfRange as out:
            return self._page_out_of_range(request, out)
        context = getattr(response, "context_data", None) or {}
        changelist = context.get("cl")
        if isinstance(changelist, BigTableChangeList) and changelist.capped:
            # "Select all N" would name a count the list does not know, and act on every row.
            context["actions_selection_counter"] = False
        return response

    def _page_out_of_range(self, request: HttpRequest, out: PageOutOfRange) -> TemplateResponse:
        params = request.GET.copy()
        params[PAGE_VAR] = str(out.last)
        last_url = f"?{params.urlencode()}"
        params.pop(PAGE_VAR)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Page {out.page} is past the end of this list",
            "opts": self.model._meta,
            "page": out.page,
            "last": out.last,
            "cap": COUNT_CAP,
            "first_url": f"?{params.urlencode()}",
            "last_url": last_url,
        }
        return TemplateResponse(
            request, "admin/big_table/page_out_of_range.html", context, status=404
        )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        if not self.id_search_fields:
            return super().get_search_results(request, queryset, search_term)
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


class ReadOnlyAdmin(BigTableAdmin):
    """View-only pages: rows are written by services (or by the actions they record), never typed
    in, changed or removed here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
