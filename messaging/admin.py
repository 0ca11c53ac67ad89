"""Django admin for operators: messages (recall; a message's page links to what sent it, through
``register_message_links``: bulk links its campaigns), conversations, follows, blocks,
business/system accounts and the conversation-list cache's health page; groups and their members
(``groups/admin.py``). ``InboxRow`` (composite key) is not
registered.

The tables are large, so lists never count them in full, sort only by indexed columns and search
by exact id through an index (``adminsite.paging.BigTableAdmin``) rather than a ``LIKE`` scan.
A recall is logged in the audit log (``adminsite.audit``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from adminsite import audit
from adminsite.paging import BigTableAdmin, ReadOnlyAdmin, id_terms
from messaging import services
from messaging.models import (
    Account,
    Block,
    CacheHealth,
    Conversation,
    Follow,
    Message,
    MessageStatus,
)
from storage.convcache import prewarm

# Links from a message's page to what sent it, registered by the apps above messaging from their
# AppConfig.ready (bulk: the campaigns whose content it is): each maps a message to (label, admin
# URL) pairs.
_MESSAGE_LINKS: list[Callable[[Message], list[tuple[str, str]]]] = []


def register_message_links(find: Callable[[Message], list[tuple[str, str]]]) -> None:
    if find not in _MESSAGE_LINKS:
        _MESSAGE_LINKS.append(find)


@admin.register(Message)
class MessageAdmin(BigTableAdmin):
    list_display = ("msgkey", "sender_uid", "type", "status", "created_at")
    list_filter = ("status", "type")
    search_fields = ("msgkey", "sender_uid")  # enables the box; BigTableAdmin does the search
    id_search_fields = ("msgkey", "sender_uid")
    search_help_text = "A msgkey or a sender uid."
    ordering = ("-msgkey",)
    readonly_fields = ("msgkey", "sender_uid", "type", "body", "status", "created_at", "sent_in")
    actions = ("recall_selected",)

    @admin.display(description="sent in")
    def sent_in(self, message: Message) -> SafeString | str:
        links = [link for find in _MESSAGE_LINKS for link in find(message)]
        if not links:
            return "—"
        return format_html_join(", ", '<a href="{}">{}</a>', ((url, text) for text, url in links))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # messages are sent through the API and campaigns, never typed in here

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The list's recall action needs "change"; a message's own page is read-only (no Save).
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # inbox rows still point at the content: recall instead

    @admin.action(description="Recall selected messages", permissions=["change"])
    def recall_selected(self, request: HttpRequest, queryset: QuerySet[Message]) -> None:
        # A recalled message is recalled again (that finishes what an interrupted recall left)
        # but it is not a new action: only the first recall is counted and logged.
        rows = list(queryset.only("msgkey", "sender_uid", "status"))
        fresh = [m for m in rows if m.status != MessageStatus.RECALLED]
        for message in rows:
            services.message_recall(msgkey=message.msgkey, actor_uid=None, operator=True)
        audit.record_many(request, fresh, "Recalled by an operator: every copy shows it recalled.")
        if fresh:
            self.message_user(request, f"Recalled {len(fresh)} message(s).", messages.SUCCESS)
        if len(fresh) < len(rows):
            text = f"Recall: {len(rows) - len(fresh)} message(s) were already recalled."
            self.message_user(request, text, messages.INFO)


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
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

    # Read-only (ReadOnlyAdmin): conversations change through services, which keep the inbox,
    # unread counters and caches in step with the row.


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
class AccountAdmin(audit.AuditedAdmin):
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


@admin.register(CacheHealth)
class CacheHealthAdmin(admin.ModelAdmin):
    """Prewarm outcomes over the last hour, the alert, and the big-UP count (live from Redis)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return bool(getattr(request.user, "is_staff", False))

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> TemplateResponse:
        health = prewarm.health()
        context = {
            **self.admin_site.each_context(request),
            "title": "Conversation cache health",
            "opts": self.model._meta,
            "health": health,
            "failure_percent": round(100 * health.failure_rate, 1),
            "threshold_percent": round(100 * health.threshold, 1),
            "min_attempts": settings.PREWARM_ALERT_MIN_ATTEMPTS,
            "big_ups": prewarm.big_ups_count(),
            "big_up_threshold": settings.BIG_UP_THRESHOLD,
        }
        return TemplateResponse(request, "admin/messaging/cache_health.html", context)
