"""Group tables (the ``groups`` app; the tables keep the ``messaging_group*`` names they were
created with). MySQL holds the truth; Redis holds heads and positions as caches.

- ``Group``: one row per group. ``max_seq`` is the group's sequence: each send moves it with one
  ``UPDATE ... SET max_seq = max_seq + 1`` inside the send's transaction (the row lock orders
  sends, so seqs are 1, 2, 3 ... without gaps; a rolled-back send gives its seq back).
  ``member_count`` counts current members; ``(client_id, idempotency_key)`` replays a create.
- ``GroupMember``: a member's position ``(gid, uid, joined_seq, read_seq, left_seq, role,
  muted)``; a member who left keeps the row (``left_seq`` set) and sees what they could see.
  Indexed by ``(uid, left_seq)`` for a user's groups.
- ``GroupMessage``: the send ledger, one row per group message: idempotency (unique
  ``(sender_uid, client_msg_id)``), seq ↔ msgkey, mentions, recall status, and ``completed``:
  the timeline (HBase is written after the commit) and Redis have it; a row not completed is
  finished by a retry or the beat task ``groups.sends_complete`` (history reads show it from the
  ledger until then).
- ``GroupHidden``: a message one member deleted for themselves.
- ``GroupTimelineRow``: the SQL group-timeline backend's table, key (gid, seq).
"""

from __future__ import annotations

from django.db import models


class GroupRole(models.TextChoices):
    OWNER = "owner"
    ADMIN = "admin"
    MEMBER = "member"


MANAGERS = (GroupRole.OWNER, GroupRole.ADMIN)  # manage members, recall any message, send muted
UIDS_PER_CALL = 1000  # uids one call may name (a create, an add of members): the API's limit


class Group(models.Model):
    gid = models.BigIntegerField(primary_key=True)
    name = models.CharField(max_length=100)
    owner_uid = models.BigIntegerField()
    max_seq = models.BigIntegerField(default=0)
    member_count = models.IntegerField(default=0)
    history_for_new_members = models.BooleanField(default=True)
    muted = models.BooleanField(default=False, help_text="only the owner and admins may send")
    created_at = models.DateTimeField()
    dissolved_at = models.DateTimeField(null=True, blank=True)
    client_id = models.BigIntegerField(null=True, blank=True, editable=False)
    idempotency_key = models.CharField(max_length=128, null=True, blank=True, editable=False)
    digest = models.CharField(max_length=64, blank=True, editable=False)

    class Meta:
        db_table = "messaging_group"
        constraints = [
            models.UniqueConstraint(
                fields=["client_id", "idempotency_key"], name="uniq_group_idempotency"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.gid})"


class GroupMember(models.Model):
    gid = models.BigIntegerField()
    uid = models.BigIntegerField()
    role = models.CharField(max_length=6, choices=GroupRole.choices, default=GroupRole.MEMBER)
    joined_seq = models.BigIntegerField(default=0)
    read_seq = models.BigIntegerField(default=0)
    left_seq = models.BigIntegerField(null=True, blank=True)
    muted = models.BooleanField(default=False)
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "messaging_group_member"
        constraints = [models.UniqueConstraint(fields=["gid", "uid"], name="uniq_group_member")]
        indexes = [
            models.Index(fields=["uid", "left_seq"], name="group_member_uid"),
            models.Index(fields=["gid", "left_seq", "uid"], name="group_member_gid"),
        ]

    def __str__(self) -> str:
        return f"{self.uid} in {self.gid}"


class GroupMessage(models.Model):
    gid = models.BigIntegerField()
    seq = models.BigIntegerField()
    msgkey = models.BigIntegerField(unique=True)
    sender_uid = models.BigIntegerField()
    client_msg_id = models.CharField(max_length=64)
    digest = models.CharField(max_length=64, help_text="sha256 of the canonical request body")
    mentions = models.JSONField(default=list, blank=True)
    recalled = models.BooleanField(default=False)
    completed = models.BooleanField(
        default=False, help_text="the timeline and Redis have it; a replay must not redo it"
    )

    class Meta:
        db_table = "messaging_group_message"
        constraints = [
            models.UniqueConstraint(fields=["gid", "seq"], name="uniq_group_seq"),
            models.UniqueConstraint(
                fields=["sender_uid", "client_msg_id"], name="uniq_group_client_msg"
            ),
        ]
        indexes = [models.Index(fields=["completed", "gid"], name="group_msg_pending")]

    def __str__(self) -> str:
        return f"{self.gid}#{self.seq}"


class GroupHidden(models.Model):
    gid = models.BigIntegerField()
    uid = models.BigIntegerField()
    seq = models.BigIntegerField()

    class Meta:
        db_table = "messaging_group_hidden"
        constraints = [
            models.UniqueConstraint(fields=["gid", "uid", "seq"], name="uniq_group_hidden")
        ]
        indexes = [models.Index(fields=["gid", "seq"], name="group_hidden_seq")]

    def __str__(self) -> str:
        return f"{self.gid}#{self.seq} hidden for {self.uid}"


class GroupTimelineRow(models.Model):
    pk = models.CompositePrimaryKey("gid", "seq")
    gid = models.BigIntegerField()
    seq = models.BigIntegerField()
    msgkey = models.BigIntegerField()
    sender_uid = models.BigIntegerField()
    flags = models.SmallIntegerField(default=0)

    class Meta:
        db_table = "messaging_group_timeline"

    def __str__(self) -> str:
        return f"{self.gid}#{self.seq}"
