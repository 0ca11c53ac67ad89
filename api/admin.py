"""Django admin of the platform layer: API clients (token shown once on create or rotate, revoke,
senders inline; every change bumps the clients' generation so cached principals go at once), and
the audit log: Django's ``LogEntry`` as one read-only, filterable list at
``/admin/admin/logentry/`` ("Audit log"), newest first.

Every operator action is in it: form saves (Django logs those), and the list actions of every app
(``api.audit.record``), here the revoke and the token rotation (never the token itself)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import Field, Model, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from api import audit, clients
from api.models import ApiClient, ApiClientSender, Scope
from api.paging import BigTableAdmin


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
class ApiClientAdmin(audit.AuditedAdmin):
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
        active = list(queryset.filter(is_active=True))
        if not active:
            self.message_user(request, "Revoke: no selected client was active.", messages.INFO)
            return
        count = clients.api_clients_revoke(client_ids=[c.pk for c in active])
        audit.record_many(request, active, "Revoked: its token stopped working.")
        self.message_user(request, f"Revoked {count} client(s).", messages.SUCCESS)

    @admin.action(
        description="Issue a new token (the old one stops working)", permissions=["change"]
    )
    def rotate_token(self, request: HttpRequest, queryset: QuerySet[ApiClient]) -> None:
        for client in queryset:
            if not client.is_active:
                text = f"Issue a new token: “{client.name}” is revoked; no token issued."
                self.message_user(request, text, messages.ERROR)
                continue
            old = client.token_prefix
            self._show_token(request, client, clients.api_client_rotate_token(client))
            text = f"Issued a new token ({client.token_prefix}…); the old one ({old}…) stopped."
            audit.record(request, client, text)


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
class LogEntryAdmin(BigTableAdmin):
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

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

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
