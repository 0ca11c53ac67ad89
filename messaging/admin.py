"""Django admin for operators: messages (recall), conversations, API clients, follows, blocks,
business/system accounts. ``InboxRow`` (composite key) is not registered.

The tables are large, so lists never count them in full (``BoundedCountPaginator``) and search
is by exact id through an index (``BigTableAdmin``) rather than a ``LIKE`` scan.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest

from messaging import clients, services
from messaging.models import (
    Account,
    ApiClient,
    ApiClientSender,
    Block,
    Conversation,
    Follow,
    Message,
    Scope,
)

COUNT_CAP = 10_000
MAX_ID = (1 << 63) - 1


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


class BigTableAdmin(admin.ModelAdmin):
    """Bounded counts, and exact-id search over ``id_search_fields`` (any matches each term)."""

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


@admin.register(Message)
class MessageAdmin(BigTableAdmin):
    list_display = ("msgkey", "sender_uid", "type", "status", "created_at")
    list_filter = ("status", "type")
    search_fields = ("msgkey", "sender_uid")  # enables the box; BigTableAdmin does the search
    id_search_fields = ("msgkey", "sender_uid")
    search_help_text = "A msgkey or a sender uid."
    ordering = ("-msgkey",)
    readonly_fields = ("msgkey", "sender_uid", "type", "body", "status", "created_at")
    actions = ("recall_selected",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # messages are sent through the API and campaigns, never typed in here

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # inbox rows still point at the content: recall instead

    @admin.action(description="Recall selected messages", permissions=["change"])
    def recall_selected(self, request: HttpRequest, queryset: QuerySet[Message]) -> None:
        keys = list(queryset.values_list("msgkey", flat=True))
        for key in keys:
            services.message_recall(msgkey=key, actor_uid=None, operator=True)
        self.message_user(request, f"Recalled {len(keys)} message(s).", messages.SUCCESS)


@admin.register(Conversation)
class ConversationAdmin(BigTableAdmin):
    list_display = (
        "owner_uid",
        "peer_uid",
        "category",
        "last_msgkey",
        "read_upto",
        "pinned",
        "muted",
    )
    list_filter = ("category",)
    search_fields = ("owner_uid", "peer_uid")
    id_search_fields = ("owner_uid", "peer_uid")
    search_help_text = "An owner or peer uid; two uids find one conversation (owner peer)."

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        ids = id_terms(search_term)
        if ids is not None and len(ids) == 2:  # served by the unique (owner, peer) index
            return queryset.filter(owner_uid=ids[0], peer_uid=ids[1]), False
        return super().get_search_results(request, queryset, search_term)

    # Read-only: conversations change through services, which keep the inbox, unread counters
    # and caches in step with the row.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ApiClientSenderInline(admin.TabularInline):
    model = ApiClientSender
    extra = 1


class ApiClientForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices, widget=forms.CheckboxSelectMultiple, required=False
    )

    class Meta:
        model = ApiClient
        fields = ("name", "scopes", "is_operator", "is_active")


@admin.register(ApiClient)
class ApiClientAdmin(admin.ModelAdmin):
    form = ApiClientForm
    inlines = (ApiClientSenderInline,)
    list_display = ("name", "token_prefix", "scopes", "is_operator", "is_active", "revoked_at")
    list_filter = ("is_active", "is_operator")
    search_fields = ("name", "token_prefix")
    readonly_fields = ("token_prefix", "created_at", "revoked_at")
    actions = ("revoke_selected", "rotate_token")

    def save_model(self, request: HttpRequest, obj: Model, form: Any, change: bool) -> None:
        assert isinstance(obj, ApiClient)
        token = None if change else clients.api_client_issue_token(obj)
        super().save_model(request, obj, form, change)
        if token is not None:
            self._show_token(request, obj, token)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        clients.api_clients_changed()  # scopes or activity may have changed: drop cached copies

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        super().delete_model(request, obj)
        clients.api_clients_changed()

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        super().delete_queryset(request, queryset)
        clients.api_clients_changed()

    def _show_token(self, request: HttpRequest, client: ApiClient, token: str) -> None:
        text = f"Token for “{client.name}”: {token} — copy it now, it is not shown again."
        self.message_user(request, text, messages.WARNING)

    @admin.action(description="Revoke selected clients", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiClient]) -> None:
        count = clients.api_clients_revoke(client_ids=queryset.values_list("pk", flat=True))
        self.message_user(request, f"Revoked {count} client(s).", messages.SUCCESS)

    @admin.action(
        description="Issue a new token (the old one stops working)", permissions=["change"]
    )
    def rotate_token(self, request: HttpRequest, queryset: QuerySet[ApiClient]) -> None:
        for client in queryset.filter(is_active=True):
            self._show_token(request, client, clients.api_client_rotate_token(client))


@admin.register(Follow)
class FollowAdmin(BigTableAdmin):
    list_display = ("follower_uid", "followee_uid", "followed_at")
    search_fields = ("follower_uid", "followee_uid")
    id_search_fields = ("follower_uid", "followee_uid")
    search_help_text = "A follower or followee uid."


@admin.register(Block)
class BlockAdmin(BigTableAdmin):
    list_display = ("owner_uid", "blocked_uid", "created_at")
    search_fields = ("owner_uid", "blocked_uid")
    id_search_fields = ("owner_uid", "blocked_uid")
    search_help_text = "The blocking or the blocked uid."


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    list_display = ("uid", "kind", "name")
    list_filter = ("kind",)
    search_fields = ("name",)
    search_help_text = "A uid, or part of a name."

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        ids = id_terms(search_term)
        if ids:
            return queryset.filter(uid__in=ids), False
        return super().get_search_results(request, queryset, search_term)
