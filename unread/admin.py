"""Django admin of the unread app: announcements, published through the service, so the global
clock and the Redis timeline are set."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.forms import ModelForm
from django.http import HttpRequest

from api.errors import InvalidInput
from unread.announcements import announcement_publish
from unread.models import Announcement


@admin.register(Announcement)
class AnnouncementAdmin(admin.ModelAdmin):
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
        try:
            published = announcement_publish(
                content=obj.content, published_by=f"admin:{request.user}"
            )
        except InvalidInput as exc:
            self.message_user(request, f"Not published: {exc.detail}", level="error")
            return
        obj.pk, obj.published_ms = published.pk, published.published_ms
