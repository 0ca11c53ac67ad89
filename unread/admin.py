"""Django admin of the unread app: announcements, published through the service, so the global
clock and the Redis timeline are set. A publish is logged in the audit log (``adminsite.audit``) as
"Published to every user"; an edit by Django's own log (nothing when nothing changed)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils.html import format_html

from adminsite import audit
from api.errors import InvalidInput
from unread.announcements import announcement_publish, normalise
from unread.models import Announcement


class AnnouncementForm(ModelForm):
    """Content is validated here, by the publishing service's own rules, so bad input shows as a
    form error that keeps what was typed (and nothing is stored or logged).

    A new announcement reaches every user at once, so it is published only when confirmed: the
    first Save of valid content shows how it will read (the ``confirm`` field's text) and asks
    for the box to be ticked; the second Save, ticked, publishes."""

    confirm = forms.BooleanField(
        required=False,
        label="Publish to every user",
        help_text="Save once to see the preview, then tick this box and save again.",
    )

    class Meta:
        model = Announcement
        fields = ("content",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:  # an edit reaches no one: nothing to confirm
            del self.fields["confirm"]
        elif not self.is_bound:
            self.initial["content"] = {"type": "text", "text": ""}

    def clean_content(self) -> dict[str, Any]:
        try:
            return normalise(self.cleaned_data.get("content"))
        except InvalidInput as exc:
            raise ValidationError(exc.detail) from exc

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        content = cleaned.get("content")
        if "confirm" in self.fields and content is not None:
            # the bound field copied the help text when cleaning began: set it there too
            self.fields["confirm"].help_text = self["confirm"].help_text = preview_html(content)
            if not cleaned.get("confirm"):
                self.add_error("confirm", "Check the preview, then tick this box to publish.")
        return cleaned


def preview_html(content: dict[str, Any]) -> str:
    """How every user will see the announcement (its title and text), escaped."""
    title = content.get("title") or ""
    text = content.get("text") or content.get("body") or ""
    return format_html(
        '<span class="announcement-preview">Every user will see: <strong>{}</strong> {}</span>',
        title,
        text,
    )


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
