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

    class Meta:
        ordering = ["-published_ms"]

    def __str__(self) -> str:
        return f"announcement {self.pk} at {self.published_ms}"
