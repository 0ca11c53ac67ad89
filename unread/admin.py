"""Django admin of the unread app: announcements, published through the service, so the global
clock and the Redis timeline are set. A publish is logged in the audit log (``api.audit``) as
"Published to every user"; an edit by Django's own log (nothing when nothing changed)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms import ModelForm
from django.http import HttpRequest

from api import audit
from api.errors import InvalidInput
from unread.announcements import announcement_publish, normalise
from unread.models import Announcement


class AnnouncementForm(ModelForm):
    """Content is validated here, by the publishing service's own rules, so bad input shows as a
    form error that keeps what was typed (and nothing is stored or logged)."""

    class Meta:
        model = Announcement
        fields = ("content",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.is_bound and self.instance.pk is None:
            self.initial["content"] = {"type": "text", "text": ""}

    def clean_content(self) -> dict[str, Any]:
        try:
            return normalise(self.cleaned_data.get("content"))
        except InvalidInput as exc:
            raise ValidationError(exc.detail) from exc


@admin.register(Announcement)
class AnnouncementAdmin(audit.AuditedAdmin):
    form = AnnouncementForm
    list_display = ("id", "published_ms", "preview", "published_by", "created_at")
    readonly_fields = ("published_ms", "published_by", "created_at")
    ordering = ("-published_ms",)

    @admin.display(description="content")
    def preview(self, obj: Announcement) -> str:
        return str(obj.content.get("text") or obj.content.get("title") or obj.content)[:80]

    def save_model(self, request: HttpRequest, obj: Any, form: ModelForm, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        published = announcement_publish(content=obj.content, published_by=f"admin:{request.user}")
        obj.pk, obj.published_ms = published.pk, published.published_ms

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        text = f"Published to every user (announcement clock {obj.published_ms})."
        return audit.record(request, obj, text, flag=audit.ADDITION)
