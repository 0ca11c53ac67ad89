"""Audiences: who a campaign goes to, walked in uid order with a keyset cursor.

A walk never loads the audience whole: ``walk`` returns the next chunk of recipient uids after a
cursor (ascending), so a 10-million-recipient campaign is planned in bounded memory. Uploaded and
explicit lists are stored once as ``AudienceMember`` rows (the composite key deduplicates).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any

from django.db import connection
from django.utils import timezone

from api.models import ApiClient
from bulk.models import Audience, AudienceMember, AudienceType, Campaign
from infra.dbrouter import PRIMARY
from infra.sqlvalues import int_rows
from messaging.selectors import follower_count, follower_uids

MAX_UID = (1 << 63) - 1
INSERT_CHUNK = 5000
SAMPLES = 5


@dataclass(frozen=True)
class Chunk:
    uids: list[int]
    cursor: int  # the last uid examined (pass back as ``after``)
    exhausted: bool


def walk(campaign: Campaign, after: int, limit: int, *, db: str = PRIMARY) -> Chunk:
    """The next recipients of ``campaign`` with uid > ``after`` (sender excluded). ``db``: where
    a followers audience is read (a dry run counts on the replica); a stored list, just written
    by its caller, is always read on the primary."""
    raw = _raw(campaign, after, limit, db)
    exclude = set(campaign.audience_spec.get("exclude_uids", ())) | {campaign.sender_uid}
    uids = [u for u in raw if u not in exclude]
    return Chunk(uids, raw[-1] if raw else after, len(raw) < limit)


def _raw(campaign: Campaign, after: int, limit: int, db: str) -> list[int]:
    if campaign.audience_type in (AudienceType.FOLLOWERS, AudienceType.FOLLOWERS_FILTER):
        return _followers(campaign.sender_uid, campaign.audience_spec, after, limit, db)
    members = AudienceMember.objects.filter(audience_id=campaign.audience_id or 0, uid__gt=after)
    return list(members.order_by("uid").values_list("uid", flat=True)[:limit])


def _followers(sender_uid: int, spec: dict[str, Any], after: int, limit: int, db: str) -> list[int]:
    return follower_uids(
        sender_uid,
        after=after,
        limit=limit,
        followed_after=_when(spec.get("followed_after")),
        followed_before=_when(spec.get("followed_before")),
        db=db,
    )


def _when(text: str | None) -> datetime | None:
    """An ISO-8601 time of a spec (naive means the default time zone)."""
    if not text:
        return None
    value = datetime.fromisoformat(text)
    return timezone.make_aware(value) if timezone.is_naive(value) else value


def iterate(campaign: Campaign, chunk: int = 5000, *, db: str = PRIMARY) -> Iterator[list[int]]:
    after = 0
    while True:
        found = walk(campaign, after, chunk, db=db)
        if found.uids:
            yield found.uids
        if found.exhausted:
            return
        after = found.cursor


# -- building stored audiences -----------------------------------------------------------------
@dataclass
class UploadReport:
    valid_lines: int = 0
    invalid_lines: int = 0
    invalid_samples: list[dict[str, Any]] = field(default_factory=list)

    def invalid(self, line_no: int, text: str, reason: str) -> None:
        self.invalid_lines += 1
        if len(self.invalid_samples) < SAMPLES:
            self.invalid_samples.append({"line": line_no, "text": text[:40], "reason": reason})


BOM = "\ufeff"


def parse_uid(text: str) -> tuple[int | None, str]:
    value = text.strip()
    if not (value.isascii() and value.isdigit()):  # rejects signs, decimals, "²", "٣"
        return None, "not a positive integer"
    uid = int(value)
    if not 0 < uid <= MAX_UID:
        return None, "out of the 64-bit uid range"
    return uid, ""


def audience_from_lines(
    *, lines: Iterable[str], sender_uid: int | None, client: ApiClient | None = None, name: str = ""
) -> Audience:
    """Store a uid list streamed line by line; bad lines are counted with samples."""
    audience = Audience.objects.create(sender_uid=sender_uid, client=client, name=name)
    report, buffer = UploadReport(), []
    for line_no, text in enumerate(lines, start=1):
        line = text.removeprefix(BOM) if line_no == 1 else text  # Excel and Notepad write one
        if not line.strip():
            continue
        uid, reason = parse_uid(line)
        if uid is None:
            report.invalid(line_no, line, reason)
            continue
        report.valid_lines += 1
        buffer.append(uid)
        if len(buffer) >= INSERT_CHUNK:
            _insert(audience.pk, buffer)
            buffer = []
    _insert(audience.pk, buffer)
    return _finish(audience, report)


def audience_from_file(
    *, stream: IO[bytes], sender_uid: int | None, client: ApiClient | None = None, name: str = ""
) -> Audience:
    lines = (raw.decode("utf-8", errors="replace") for raw in stream)
    return audience_from_lines(lines=lines, sender_uid=sender_uid, client=client, name=name)


def _insert(audience_id: int, uids: list[int]) -> None:
    if not uids:
        return
    ignore = "INSERT IGNORE" if connection.vendor == "mysql" else "INSERT OR IGNORE"
    values = int_rows((audience_id, uid) for uid in uids)
    with connection.cursor() as cur:
        cur.execute(
            f"{ignore} INTO {AudienceMember._meta.db_table} (audience_id, uid) VALUES {values}"
        )


def _finish(audience: Audience, report: UploadReport) -> Audience:
    audience.count = AudienceMember.objects.filter(audience_id=audience.pk).count()
    audience.invalid_lines = report.invalid_lines
    audience.duplicate_lines = report.valid_lines - audience.count
    audience.invalid_samples = report.invalid_samples
    audience.save(update_fields=["count", "invalid_lines", "duplicate_lines", "invalid_samples"])
    return audience


def audience_estimate(campaign: Campaign) -> int:
    """The audience's size before it is walked: a stored list's count (exact), or the followers
    counted in one index range (the sender's own row and ``exclude_uids`` are still in it, so the
    planned total may end a few lower)."""
    if campaign.audience_type in (AudienceType.FOLLOWERS, AudienceType.FOLLOWERS_FILTER):
        spec = campaign.audience_spec
        return follower_count(
            campaign.sender_uid,
            followed_after=_when(spec.get("followed_after")),
            followed_before=_when(spec.get("followed_before")),
        )
    audience = Audience.objects.filter(pk=campaign.audience_id or 0).first()
    return audience.count if audience is not None else 0
