"""Big admin lists (adminsite/paging.py) on real MariaDB: the count line is exact below the cap
and a labelled estimate or "more than 10,000" above it, no uncapped COUNT runs, a page past the
end is a 404 that says so (not page 1), and a column no index serves is never sorted by."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from adminsite.paging import COUNT_CAP, BigTableAdmin, estimated_rows
from messaging.models import Conversation

LIST = "/admin/messaging/conversation/"
OVER_CAP = COUNT_CAP + 50
CATEGORY = "2"  # ?o= index of the conversation list's "category" column (no index)


def make_conversations(owner: int, count: int) -> None:
    Conversation.objects.bulk_create(
        [
            Conversation(owner_uid=owner, peer_uid=owner + i + 1, category="followed", sort_key=i)
            for i in range(count)
        ],
        batch_size=5_000,
    )


def rendered_owner_peer(response: Any) -> list[tuple[int, int]]:
    return [(c.owner_uid, c.peer_uid) for c in response.context["cl"].result_list]


def notices(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def uncapped_counts(queries: list[dict[str, str]]) -> list[str]:
    """COUNT queries without a LIMIT inside: what a big list must never run."""
    return [q["sql"] for q in queries if "COUNT(" in q["sql"].upper() and "LIMIT" not in q["sql"]]


@pytest.mark.django_db
def test_a_small_list_counts_exactly_and_offers_no_facet_counts(
    admin_client: Client, uids: Callable[[int], list[int]]
) -> None:
    [owner] = uids(1)
    make_conversations(owner, 3)
    page = admin_client.get(LIST).content.decode()
    assert "3 conversations" in page
    assert not re.search(r"\d+ results", page)  # Django's unlabelled "N results" is gone
    assert "_facets" not in page  # no "Show counts" link: facet counts are uncapped COUNTs


@pytest.mark.django_db
def test_past_the_last_page_is_a_404_that_says_so(
    admin_client: Client, uids: Callable[[int], list[int]]
) -> None:
    [owner] = uids(1)
    make_conversations(owner, 3)
    response = admin_client.get(LIST, {"p": "2", "category__exact": "followed"})
    assert response.status_code == 404  # not a silent redirect to page 1
    text = response.content.decode()
    assert "Page 2 does not exist: this list has 1 page." in text
    assert "category__exact=followed" in text  # the links keep the filters
    assert admin_client.get(LIST, {"p": "0"}).status_code == 404


@pytest.mark.django_db
def test_over_the_cap_the_count_is_labelled_and_pages_stop_at_the_cap(
    admin_client: Client, uids: Callable[[int], list[int]], django_assert_max_num_queries: Any
) -> None:
    [owner] = uids(1)
    make_conversations(owner, OVER_CAP)
    with CaptureQueriesContext(connection) as queries, django_assert_max_num_queries(8):
        response = admin_client.get(LIST)
    text = response.content.decode()
    label = re.search(r'<span class="count-label">([^<]*)</span>', text)
    assert label is not None
    # Uncommitted rows are not in the engine's statistics yet: whatever it says, it is labelled.
    assert re.fullmatch(
        r"about [\d,]+ conversations \(estimated\)|more than 10,000 conversations", label.group(1)
    ), label.group(1)
    assert "the pages reach the first 10,000" in text
    assert f"{COUNT_CAP} conversations" not in text
    assert uncapped_counts(queries.captured_queries) == []

    assert admin_client.get(LIST, {"p": "100"}).status_code == 200  # the last page reached
    past = admin_client.get(LIST, {"p": "101"})
    assert past.status_code == 404
    assert "this list has 100 pages" in past.content.decode()


@pytest.mark.django_db
def test_sorting_by_an_unindexed_column_is_refused_not_run(
    admin_client: Client, uids: Callable[[int], list[int]]
) -> None:
    owner, other = uids(2)
    Conversation.objects.bulk_create(
        [
            Conversation(owner_uid=other, peer_uid=owner, category="stranger"),
            Conversation(owner_uid=owner, peer_uid=other + 5, category="business"),
            Conversation(owner_uid=owner, peer_uid=other + 1, category="system"),
        ]
    )
    default = rendered_owner_peer(admin_client.get(LIST))
    with CaptureQueriesContext(connection) as queries:
        refused = admin_client.get(LIST, {"o": CATEGORY})
    assert rendered_owner_peer(refused) == default  # not sorted by category
    assert not any(
        "ORDER BY" in q["sql"] and "`category`" in q["sql"].split("ORDER BY")[1]
        for q in queries.captured_queries
    )
    assert any("cannot be sorted by “category”" in n for n in notices(refused))
    assert refused.context["cl"].sortable_by == ("owner_uid",)

    ascending = rendered_owner_peer(admin_client.get(LIST, {"o": "0"}))
    assert ascending == sorted(ascending)  # by owner, then peer: the unique index's order
    descending = rendered_owner_peer(admin_client.get(LIST, {"o": "-0"}))
    assert descending == sorted(ascending, reverse=True)


def big_admins() -> list[BigTableAdmin]:
    return [a for a in admin.site._registry.values() if isinstance(a, BigTableAdmin)]


@pytest.mark.django_db
def test_every_sortable_column_of_every_big_list_is_an_index_prefix() -> None:
    """The database walks an index for every order a big list offers, its default included."""
    for model_admin in big_admins():
        meta = model_admin.model._meta
        pk = meta.pk.attname
        indexed = [(pk,)] + [
            tuple(meta.get_field(n).attname for n in c.fields)
            for c in meta.total_unique_constraints
        ]
        indexed += [(*(meta.get_field(n).attname for n in i.fields), pk) for i in meta.indexes]
        indexed += [(f.attname,) for f in meta.concrete_fields if f.unique]
        indexed += [(f.attname, pk) for f in meta.concrete_fields if getattr(f, "db_index", False)]
        default = list(model_admin.ordering or meta.ordering or ["-pk"])
        first = str(default[0]).lstrip("-")
        assert first == "pk" or meta.get_field(first).attname in {k[0] for k in indexed}, (
            meta.label,
            default,
        )
        for column, order in model_admin.get_sort_orders().items():
            assert any(key[: len(order)] == order or order[: len(key)] == key for key in indexed), (
                meta.label,
                column,
                order,
            )


@pytest.fixture
def analysed_conversations(transactional_db: Any, uids: Callable[[int], list[int]]) -> int:
    """Committed rows and fresh statistics (ANALYZE commits, so not in a test transaction);
    returns the owner of a few of them."""
    big, small = uids(2)
    make_conversations(big, COUNT_CAP + 5_000)
    make_conversations(small, 30)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE TABLE messaging_conversation")
    return small


def test_the_estimate_comes_from_the_engine_and_is_labelled(
    admin_client: Client, analysed_conversations: int
) -> None:
    text = admin_client.get(LIST).content.decode()
    assert re.search(
        r'<span class="count-label">about [\d,]+ conversations \(estimated\)</span>', text
    )
    by_owner = Conversation.objects.filter(owner_uid=analysed_conversations)
    assert (estimated_rows(by_owner) or 0) > 0  # an index lookup: EXPLAIN's estimate
    by_category = Conversation.objects.filter(category="followed")
    assert estimated_rows(by_category) is None  # a scan: its estimate says nothing
    followed = admin_client.get(LIST, {"category__exact": "followed"}).content.decode()
    assert "more than 10,000 conversations" in followed


def test_the_offered_orders_walk_an_index(
    admin_client: Client, analysed_conversations: int
) -> None:
    """A page's keys come from an index-only scan, even the last page's (adminsite/paging.py)."""
    for query in ({}, {"o": "0"}, {"o": "-0"}):
        ordered = admin_client.get(LIST, query).context["cl"].queryset
        keys = ordered.values_list("pk", flat=True)[COUNT_CAP - 100 : COUNT_CAP]
        sql, params = keys.query.get_compiler(keys.db).as_sql()
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN {sql}", params)
            plan = " ".join(str(row) for row in cursor.fetchall())
        assert "filesort" not in plan, (query, plan)
