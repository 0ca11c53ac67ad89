"""Tables of the unread app.

- ``Announcement``: a message to all users, stored once. ``published_ms`` is its place on the
  global announcement clock (strictly increasing, issued by Redis) and what each user's single
  read mark is compared with; publishing writes nothing per user (unread/announcements.py).
"""

from __future__ import annotations

from django.db import models


class Announcement(models.Model):
    content = models.JSONField(help_text='e.g. {"type": "text", "text": "..."}')
    published_ms = models.BigIntegerField(unique=True, help_text="global announcement clock (ms)")
    published_by = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # A publish retried with the same Idempotency-Key (per API client) returns this row.
    client = models.ForeignKey("api.ApiClient", null=True, blank=True, on_delete=models.SET_NULL)
    idempotency_key = models.CharField(max_length=128, null=True, blank=True, editable=False)
    request_digest = models.CharField(max_length=64, blank=True, editable=False)

    class Meta:
        ordering = ["-published_ms"]
        constraints = [
            models.UniqueConstraint(
                fields=["client", "idempotency_key"], name="uniq_announcement_idempotency"
            )
        ]

    def __str__(self) -> str:
        return f"announcement {self.pk} at {self.published_ms}"
