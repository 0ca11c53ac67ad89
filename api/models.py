"""Tables of the platform layer: API clients, their scopes and the senders they act as.

- ``ApiClient``: one per integration; only the sha256 of its bearer token is stored
  (``token_hash``), with the first characters (``token_prefix``) kept for display.
- ``ApiClientSender``: the sender uids a ``send`` or ``campaigns`` client may act as (a ``users``
  client acts as any user and needs none).

Moved here from ``messaging`` without copying a row: the state moved with
``SeparateDatabaseAndState`` and the tables were renamed in place (api/migrations).
"""

from __future__ import annotations

from django.db import models


class Scope(models.TextChoices):
    SEND = "send"
    CAMPAIGNS = "campaigns"
    INBOX = "inbox"
    ANNOUNCE = "announce"
    USERS = "users"  # the consumer backend: 1:1 sends as any user, groups for any user


class ApiClient(models.Model):
    name = models.CharField(max_length=100, unique=True)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_prefix = models.CharField(max_length=8, editable=False)
    scopes = models.JSONField(default=list, help_text='e.g. ["send", "campaigns"]')
    is_operator = models.BooleanField(default=False, help_text="may recall any message")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.name


class ApiClientSender(models.Model):
    client = models.ForeignKey(ApiClient, on_delete=models.CASCADE, related_name="senders")
    uid = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["client", "uid"], name="uniq_client_sender")]

    def __str__(self) -> str:
        return str(self.uid)
