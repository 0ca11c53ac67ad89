"""Django admin of the platform layer: API clients (token shown once on create or rotate, revoke,
senders inline; every change bumps the clients' generation so cached principals go at once). The
revoke and the token rotation are recorded in the audit log (``adminsite.audit.record``; never the
token itself)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from adminsite import audit
from api import clients
from api.models import ApiClient, ApiClientSender, Scope


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
