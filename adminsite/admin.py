"""The audit log: Django's ``LogEntry`` as one read-only, filterable list at
``/admin/admin/logentry/`` ("Audit log"), newest first. Every operator action is in it: form saves
(Django logs those) and the list actions of every app (``adminsite.audit.record``)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import Field
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from adminsite.paging import ReadOnlyAdmin


# -- the audit log ------------------------------------------------------------------------------
class AdminModelFilter(admin.RelatedFieldListFilter):
    """Content types of the models the admin shows, by their names (not every table's)."""

    def field_choices(self, field: Field, request: HttpRequest, model_admin: Any) -> list[Any]:
        shown = ContentType.objects.get_for_models(*model_admin.admin_site._registry)
        return sorted(
            (
                (ct.pk, f"{ct.app_label} · {model._meta.verbose_name}")
                for model, ct in shown.items()
            ),
            key=lambda choice: choice[1],
        )


@admin.register(LogEntry)
class LogEntryAdmin(ReadOnlyAdmin):
    """Read-only: entries are written by the actions they record, never typed in or removed."""

    list_display = ("action_time", "user", "action", "object_link", "message")
    list_display_links = ("action_time",)
    list_filter = (
        ("action_time", admin.DateFieldListFilter),
        "action_flag",
        ("content_type", AdminModelFilter),
        ("user", admin.RelatedFieldListFilter),
    )
    search_fields = ("=object_id", "object_repr", "change_message")
    search_help_text = "An object's id (exact), or words of its name or of the message."
    list_select_related = ("user", "content_type")
    ordering = ("-id",)
    sort_orders = {"action_time": ("id",)}  # ids grow with time; action_time has no index
    fields = ("action_time", "user", "action", "object_link", "message", "object_id")
    readonly_fields = fields

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        context = {"title": "Audit log: every operator action", **(extra_context or {})}
        return super().changelist_view(request, context)

    @admin.display(description="action", ordering="action_flag")
    def action(self, entry: LogEntry) -> str:
        return entry.get_action_flag_display()

    @admin.display(description="object")
    def object_link(self, entry: LogEntry) -> SafeString | str:
        kind = entry.content_type.name if entry.content_type else "deleted type"
        url = entry.get_admin_url()
        if not url:
            return f"{kind}: {entry.object_repr}"
        return format_html('{}: <a href="{}">{}</a>', kind, url, entry.object_repr)

    @admin.display(description="message")
    def message(self, entry: LogEntry) -> str:
        return entry.get_change_message()
