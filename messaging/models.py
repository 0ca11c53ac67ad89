"""Messaging tables (MySQL/MariaDB in production, SQLite on one machine).

- ``Message``: content, stored once per msgkey. On MariaDB the table is RANGE-partitioned by month
  of msgkey (``manage.py content_partitions``); the primary key is the msgkey alone, which the
  partitioning allows because the partition column is the key.
- ``ClientMessage``: the idempotency ledger of 1:1 sends, unique (sender_uid, client_msg_id). It
  is a table of its own because a unique key on a partitioned table must contain the msgkey.
- ``Conversation``: one per (owner, peer) side; ``mtime`` (ms) is bumped on every change and
  versions the cache tiers.
- ``InboxRow``: the SQL inbox backend's timeline table, composite key (owner, peer, msgkey).
- ``Follow``, ``Block``, ``Account`` (business/system senders).
- ``CacheHealth``: no table; the admin's page for the conversation-list cache's health (prewarm
  outcomes and alert, big UPs), read live from Redis.
"""

from __future__ import annotations

from django.db import models


class ContentType(models.TextChoices):
    TEXT = "text"
    IMAGE = "image"
    CARD = "card"


class MessageStatus(models.IntegerChoices):
    NORMAL = 0, "normal"
    RECALLED = 1, "recalled"


class Category(models.TextChoices):
    FOLLOWED = "followed"
    STRANGER = "stranger"
    BUSINESS = "business"
    SYSTEM = "system"


class Message(models.Model):
    msgkey = models.BigIntegerField(primary_key=True)
    sender_uid = models.BigIntegerField()
    type = models.CharField(max_length=8, choices=ContentType.choices)
    body = models.JSONField()
    status = models.SmallIntegerField(choices=MessageStatus.choices, default=MessageStatus.NORMAL)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["sender_uid", "msgkey"], name="msg_sender_idx")]

    def __str__(self) -> str:
        return f"{self.msgkey} from {self.sender_uid}"


class ClientMessage(models.Model):
    sender_uid = models.BigIntegerField()
    client_msg_id = models.CharField(max_length=64)
    msgkey = models.BigIntegerField()
    receiver_uid = models.BigIntegerField()
    digest = models.CharField(max_length=64, help_text="sha256 of the canonical request body")
    delivered = models.BooleanField(
        default=False, help_text="the fan-out finished; a replay must not redo it"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["sender_uid", "client_msg_id"], name="uniq_client_msg")
        ]
        # A finished fan-out and a recall find the send by msgkey: without this index each send
        # scanned the table (38 → 149 sends/s once added, BENCHMARKS.md).
        indexes = [
            models.Index(fields=["msgkey"], name="clientmsg_msgkey"),
            # the sweep of sends an outage interrupted: undelivered ones, oldest first
            models.Index(fields=["delivered", "msgkey"], name="clientmsg_undelivered"),
        ]

    def __str__(self) -> str:
        return f"{self.sender_uid}/{self.client_msg_id} → {self.msgkey}"


class Conversation(models.Model):
    owner_uid = models.BigIntegerField()
    peer_uid = models.BigIntegerField()
    category = models.CharField(max_length=10, choices=Category.choices)
    last_msgkey = models.BigIntegerField(default=0)
    sort_key = models.BigIntegerField(default=0)
    read_upto = models.BigIntegerField(default=0)
    pinned = models.BooleanField(default=False)
    muted = models.BooleanField(default=False)
    mtime = models.BigIntegerField(default=0, help_text="milliseconds; bumped on every change")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner_uid", "peer_uid"], name="uniq_conversation")
        ]
        indexes = [
            models.Index(fields=["owner_uid", "sort_key"], name="conv_owner_sort"),
            models.Index(fields=["owner_uid", "category", "sort_key"], name="conv_owner_cat_sort"),
        ]

    def __str__(self) -> str:
        return f"{self.owner_uid} ↔ {self.peer_uid}"


class InboxRow(models.Model):
    pk = models.CompositePrimaryKey("owner_uid", "peer_uid", "msgkey")
    owner_uid = models.BigIntegerField()
    peer_uid = models.BigIntegerField()
    msgkey = models.BigIntegerField()
    direction = models.SmallIntegerField(help_text="0 received, 1 sent")
    flags = models.SmallIntegerField(default=0)

    class Meta:
        db_table = "messaging_inbox"

    def __str__(self) -> str:
        return f"{self.owner_uid}/{self.peer_uid}/{self.msgkey}"


class Follow(models.Model):
    follower_uid = models.BigIntegerField()
    followee_uid = models.BigIntegerField()
    followed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["follower_uid", "followee_uid"], name="uniq_follow")
        ]
        # Bulk audiences walk a followee's followers with a keyset cursor on follower_uid.
        indexes = [models.Index(fields=["followee_uid", "follower_uid"], name="follow_followee")]

    def __str__(self) -> str:
        return f"{self.follower_uid} → {self.followee_uid}"


class Block(models.Model):
    owner_uid = models.BigIntegerField(help_text="the user who blocks")
    blocked_uid = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner_uid", "blocked_uid"], name="uniq_block")
        ]
        indexes = [models.Index(fields=["blocked_uid", "owner_uid"], name="block_blocked")]

    def __str__(self) -> str:
        return f"{self.owner_uid} blocks {self.blocked_uid}"


class AccountKind(models.TextChoices):
    BUSINESS = "business"
    SYSTEM = "system"


class Account(models.Model):
    """A sender that is not an ordinary user; its conversations get its kind as category."""

    uid = models.BigIntegerField(primary_key=True)
    kind = models.CharField(max_length=10, choices=AccountKind.choices)
    name = models.CharField(max_length=100, blank=True)

    def __str__(self) -> str:
        return f"{self.name or self.uid} ({self.kind})"


class CacheHealth(models.Model):
    class Meta:
        managed = False
        verbose_name = "conversation cache health"
        verbose_name_plural = "conversation cache health"

    def __str__(self) -> str:
        return "conversation cache health"


__all__ = [
    "Account",
    "AccountKind",
    "Block",
    "CacheHealth",
    "Category",
    "ClientMessage",
    "ContentType",
    "Conversation",
    "Follow",
    "InboxRow",
    "Message",
    "MessageStatus",
]
