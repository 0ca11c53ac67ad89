"""Django admin of the unread app: announcements (published through the service, so the global
clock and the Redis timeline are set) and the conversation-list cache's health page."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.db.models import Model
from django.forms import ModelForm
from django.http import HttpRequest
from django.template.response import TemplateResponse

from messaging.convcache import prewarm
from messaging.errors import InvalidInput
from unread.announcements import announcement_publish
from unread.models import Announcement, CacheHealth


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
        return TemplateResponse(request, "admin/unread/cache_health.html", context)
