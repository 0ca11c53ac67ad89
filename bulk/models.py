"""bToC bulk campaign tables.

- ``Campaign``: one message (content stored once, ``msgkey``) from a business sender to an audience,
  on the ``daily`` or ``priority`` channel, with an optional ``name`` operators tell it apart by.
  Totals are exact: they change only in the transaction that moves a batch to ``done`` (see
  bulk/ledger.py).
- ``CampaignBatch``: the batch ledger, the truth about what is done. Each batch holds ~1,000
  recipient uids (snapshotted when planned), a state, a lease while it runs, attempts and results.
- ``Audience`` / ``AudienceMember``: uploaded or explicit uid lists (deduplicated by the key).
- ``SenderPolicy``: per-sender quotas; ``ChannelSetting``: per-channel rate and batch size.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models


class Channel(models.TextChoices):
    DAILY = "daily"
    PRIORITY = "priority"


class CampaignStatus(models.TextChoices):
    DRAFT = "draft"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    FINISHED = "finished"
    FAILED = "failed"


class AudienceType(models.TextChoices):
    FOLLOWERS = "followers"
    FOLLOWERS_FILTER = "followers_filter"
    UPLOAD = "upload"
    UIDS = "uids"


class Audience(models.Model):
    """A stored uid list: an uploaded file or an explicit list from a campaign request."""

    sender_uid = models.BigIntegerField(null=True, blank=True)
    client = models.ForeignKey("api.ApiClient", null=True, blank=True, on_delete=models.SET_NULL)
    name = models.CharField(max_length=200, blank=True)
    count = models.IntegerField(default=0, help_text="distinct valid uids")
    invalid_lines = models.IntegerField(default=0)
    duplicate_lines = models.IntegerField(default=0)
    invalid_samples = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # An upload retried with the same Idempotency-Key (per API client) returns this audience.
    idempotency_key = models.CharField(max_length=128, null=True, blank=True, editable=False)
    request_digest = models.CharField(max_length=64, blank=True, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["client", "idempotency_key"], name="uniq_audience_idempotency"
            )
        ]

    def __str__(self) -> str:
        return f"audience {self.pk} ({self.count} uids)"


class AudienceMember(models.Model):
    pk = models.CompositePrimaryKey("audience_id", "uid")
    audience = models.ForeignKey(Audience, on_delete=models.CASCADE)
    uid = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.uid} in audience {self.audience_id}"


class SenderPolicy(models.Model):
    sender_uid = models.BigIntegerField(primary_key=True)
    per_receiver_limit = models.PositiveIntegerField(
        default=1, help_text="at most N messages to one receiver per period (0 = no limit)"
    )
    per_receiver_period_s = models.PositiveIntegerField(default=86400)
    daily_budget = models.PositiveIntegerField(
        default=0, help_text="recipients per day on the daily channel (0 = no limit)"
    )
    priority_allowed = models.BooleanField(default=False)

    class Meta:
        verbose_name_plural = "sender policies"

    def __str__(self) -> str:
        return f"policy of {self.sender_uid}"


def default_batch_size() -> int:
    """A new channel's recipients per batch: ``settings.BULK_BATCH_SIZE`` (chosen by measurement,
    config/settings.py)."""
    return int(settings.BULK_BATCH_SIZE)


class ChannelSetting(models.Model):
    channel = models.CharField(max_length=10, choices=Channel.choices, primary_key=True)
    rate_per_s = models.PositiveIntegerField(help_text="recipients per second, all campaigns")
    batch_size = models.PositiveIntegerField(default=default_batch_size)

    def __str__(self) -> str:
        return f"{self.channel}: {self.rate_per_s}/s"


class Campaign(models.Model):
    sender_uid = models.BigIntegerField()
    name = models.CharField(max_length=200, blank=True, help_text="for operators (optional)")
    client = models.ForeignKey("api.ApiClient", null=True, blank=True, on_delete=models.SET_NULL)
    idempotency_key = models.CharField(max_length=128, null=True, blank=True)
    request_digest = models.CharField(max_length=64, blank=True)
    msgkey = models.BigIntegerField(null=True, blank=True, help_text="the content, stored once")
    audience_type = models.CharField(max_length=20, choices=AudienceType.choices)
    audience_spec = models.JSONField(default=dict)
    audience = models.ForeignKey(Audience, null=True, blank=True, on_delete=models.PROTECT)
    channel = models.CharField(max_length=10, choices=Channel.choices)
    status = models.CharField(
        max_length=10, choices=CampaignStatus.choices, default=CampaignStatus.DRAFT
    )
    pause_reason = models.CharField(max_length=20, blank=True)
    scheduled_at = models.DateTimeField(null=True, blank=True)
    # planning progress (keyset cursor over the audience)
    planned = models.BooleanField(default=False)
    plan_cursor = models.BigIntegerField(default=0)
    audience_estimate = models.BigIntegerField(
        null=True, blank=True, help_text="the audience's size, counted by the first plan step"
    )
    plan_heartbeat = models.DateTimeField(null=True, blank=True)
    batches_planned = models.IntegerField(default=0)
    # exact totals
    total = models.BigIntegerField(default=0)
    delivered = models.BigIntegerField(default=0)
    skipped_quota = models.BigIntegerField(default=0)
    skipped_blocked = models.BigIntegerField(default=0)
    skipped_invalid = models.BigIntegerField(default=0)
    skipped_duplicate = models.BigIntegerField(default=0)
    failed = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # time spent paused, kept out of rate_per_s and eta_s: closed pauses, and the open one
    paused_s = models.FloatField(default=0.0)
    paused_at = models.DateTimeField(null=True, blank=True)
    resumed_at = models.DateTimeField(
        null=True, blank=True, help_text="the last resume: the rate's window starts after it"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["client", "idempotency_key"], name="uniq_campaign_idempotency"
            )
        ]
        indexes = [
            models.Index(fields=["status", "scheduled_at"], name="campaign_status_sched"),
            # a message's campaign: its recall, a change made in SQL (bulk/recall.py)
            models.Index(fields=["msgkey"], name="campaign_msgkey"),
        ]

    def __str__(self) -> str:
        if self.name:
            return f"campaign {self.pk} · {self.name}"
        return f"campaign {self.pk} ({self.channel}, {self.status})"

    @property
    def processed(self) -> int:
        return self.delivered + self.skipped_quota + self.skipped_blocked + self.failed

    def running_s(self, now: datetime) -> float:
        """Seconds spent running since the start, pauses left out (until ``finished_at``)."""
        if self.started_at is None:
            return 0.0
        end = self.finished_at or now
        paused = self.paused_s + ((end - self.paused_at).total_seconds() if self.paused_at else 0)
        return max((end - self.started_at).total_seconds() - paused, 0.0)


class BatchState(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class CampaignBatch(models.Model):
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="batches")
    index = models.IntegerField()
    first_uid = models.BigIntegerField()  # the lowest and highest of ``uids`` (on a Redis
    last_uid = models.BigIntegerField()  # Cluster a batch is cut in slot order, not a uid range)
    uids = models.JSONField(help_text="the recipients, snapshotted when planned")
    size = models.IntegerField()
    state = models.CharField(max_length=10, choices=BatchState.choices, default=BatchState.PENDING)
    lease_token = models.CharField(max_length=32, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    attempts = models.IntegerField(default=0)
    delivered = models.IntegerField(default=0)
    skipped_quota = models.IntegerField(default=0)
    skipped_blocked = models.IntegerField(default=0)
    failed = models.IntegerField(default=0)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.CharField(
        max_length=300, blank=True, help_text="why the batch failed (bad data, not an outage)"
    )

    class Meta:
        verbose_name_plural = "campaign batches"
        constraints = [
            models.UniqueConstraint(fields=["campaign", "index"], name="uniq_batch_index")
        ]
        indexes = [
            models.Index(fields=["campaign", "state"], name="batch_campaign_state"),
            # the rate's window: the batches a campaign finished in its last seconds
            models.Index(fields=["campaign", "finished_at"], name="batch_campaign_finished"),
        ]

    def __str__(self) -> str:
        return f"batch {self.index} of campaign {self.campaign_id}"
