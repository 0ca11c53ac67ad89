"""Announcements to all users at O(1) cost per publish (DESIGN.md, Redis keys, "global dots").

An announcement is one MySQL row; its ``published_ms`` places it on one global clock (strictly
increasing: max(now, newest + 1), the unique index settling races). Each user keeps one read mark.
Publishing writes nothing per user.

Redis (key formats live here, beside the only code that uses them):
  ann:{ann}:recent    zset: announcement id → published_ms, the newest ANNOUNCEMENTS_KEEP
  ann:{ann}:ver       a new random token in the same MULTI as every change of the zset
  ann:mark:{u:<uid>}  the user's read mark: published_ms of the newest announcement they read

``announcements_unread(uid)`` counts the retained announcements newer than the user's mark. It
counts against a per-process copy of the zset, reloaded (in one MULTI) only when ``ver`` moved,
so a count is one round trip: GET mark and GET ver, pipelined. A user who never read counts every
retained announcement (at most ANNOUNCEMENTS_KEEP). Marking read moves the mark to the newest.
If Redis lost the zset (``ver`` missing), the next count reloads it from MySQL. On a Redis Cluster
whose master holding ``ver`` does not answer, a count uses the process's copy as it is (or MySQL's
newest) instead of refusing every user (``infra.outages.global_key_unanswered``).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import secrets
import threading
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max

from api.errors import Conflict
from infra import metrics
from infra.outages import global_key_unanswered
from infra.redis import get_redis
from storage import msgkey as clock
from storage.content import validate_content
from unread.models import Announcement

RECENT = "ann:{ann}:recent"
VERSION = "ann:{ann}:ver"
PUBLISH_ATTEMPTS = 5


def mark_key(uid: int) -> str:
    return f"ann:mark:{{u:{uid}}}"


# -- publish ---------------------------------------------------------------------------------
def normalise(content: Any) -> dict[str, Any]:
    """A plain string is a text announcement; objects follow the message content types."""
    if isinstance(content, str):
        content = {"type": "text", "text": content}
    return validate_content(content)


def announcement_publish(
    *, content: Any, published_by: str = "", once: Once | None = None
) -> Announcement:
    """Publish to everyone. With ``once`` (an API client's Idempotency-Key) a retry returns the
    announcement the key first published: use ``announcement_publish_once``."""
    body = normalise(content)
    for _ in range(PUBLISH_ATTEMPTS):
        newest = Announcement.objects.aggregate(m=Max("published_ms"))["m"] or 0
        try:
            with transaction.atomic():
                row = Announcement.objects.create(
                    content=body,
                    published_ms=max(clock.now_ms(), newest + 1),
                    published_by=published_by,
                    **(once.fields(body) if once else {}),
                )
            break
        except IntegrityError:  # another publish took this millisecond, or this key
            if once is not None and once.find() is not None:
                raise
            continue
    else:
        raise RuntimeError("could not place the announcement on the clock")
    _remember([row])
    metrics.inc("announcements_published")
    return row


@dataclass(frozen=True)
class Once:
    """An API client's Idempotency-Key for a publish."""

    client_id: int
    key: str

    def find(self) -> Announcement | None:
        return Announcement.objects.filter(
            client_id=self.client_id, idempotency_key=self.key
        ).first()

    def fields(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "idempotency_key": self.key,
            "request_digest": digest(body),
        }


def digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def announcement_publish_once(
    *, content: Any, published_by: str, once: Once
) -> tuple[Announcement, bool]:
    """(announcement, published now): a key seen before returns its announcement, published
    once; the same key with other content is a Conflict (409)."""
    body = normalise(content)
    found = once.find()
    if found is None:
        try:
            return announcement_publish(content=body, published_by=published_by, once=once), True
        except IntegrityError:  # a concurrent retry with this key published it
            found = once.find()
            if found is None:
                raise
    if found.request_digest != digest(body):
        raise Conflict("Idempotency-Key was already used for a different announcement.")
    return found, False


def _remember(rows: list[Announcement]) -> None:
    pipe = get_redis().pipeline(transaction=True)
    if rows:
        pipe.zadd(RECENT, {str(r.pk): r.published_ms for r in rows})
    pipe.zremrangebyrank(RECENT, 0, -int(settings.ANNOUNCEMENTS_KEEP) - 1)
    pipe.set(VERSION, secrets.token_hex(8))  # a token, not a counter: Redis may lose it
    pipe.execute()


def announcements_sync() -> None:
    """Reload the zset from MySQL (after Redis lost it)."""
    keep = int(settings.ANNOUNCEMENTS_KEEP)
    _remember(list(Announcement.objects.order_by("-published_ms")[:keep]))


# -- counts ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Snapshot:
    version: bytes | None
    published: list[int]  # ascending


_snapshot = _Snapshot(None, [])
_lock = threading.Lock()


def _published(version: bytes | None) -> list[int]:
    global _snapshot
    if version is None:
        announcements_sync()
    elif version == _snapshot.version:
        return _snapshot.published
    pipe = get_redis().pipeline(transaction=True)
    pipe.get(VERSION)
    pipe.zrange(RECENT, 0, -1, withscores=True)
    current, members = pipe.execute()
    with _lock:
        _snapshot = _Snapshot(current, sorted(int(score) for _, score in members))
        return _snapshot.published


def announcements_unread(uid: int) -> int:
    """Announcements newer than the user's read mark (one pipelined round trip)."""
    pipe = get_redis().pipeline(transaction=False)
    pipe.get(mark_key(uid))
    pipe.get(VERSION)
    mark, version = pipe.execute(raise_on_error=False)  # a cluster's nodes fail one by one
    if isinstance(mark, Exception):  # the user's own node
        raise mark
    if isinstance(version, Exception):
        global_key_unanswered(version, "announcements")
        published = _published_as_known()
    else:
        published = _published(version)
    return len(published) - bisect.bisect_right(published, int(mark or 0))


def _published_as_known() -> list[int]:
    """The announcements when ``ver``'s node does not answer (a frozen Redis Cluster master):
    this process's copy, at most as old as the outage, else MySQL's newest; Redis untouched."""
    snapshot = _snapshot
    if snapshot.version is not None:
        return snapshot.published
    keep = int(settings.ANNOUNCEMENTS_KEEP)
    rows = Announcement.objects.order_by("-published_ms").values_list("published_ms", flat=True)
    return sorted(rows[:keep])


def unread_from_copy(mark: bytes | None, version: bytes | None) -> int | None:
    """The count for a user whose mark and ``ver`` were just read, from this process's copy, with
    no I/O; None when the copy is not at ``version`` (``announcements_unread`` then reloads it)."""
    snapshot = _snapshot
    if version is None or version != snapshot.version:
        return None
    return len(snapshot.published) - bisect.bisect_right(snapshot.published, int(mark or 0))


def announcements_mark_read(*, uid: int) -> int:
    """Move the user's mark to the newest announcement; returns the count left (0)."""
    newest = get_redis().zrevrange(RECENT, 0, 0, withscores=True)
    if newest:
        get_redis().set(mark_key(uid), int(newest[0][1]))
    return announcements_unread(uid)


# -- listing ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class AnnouncementItem:
    id: int
    content: dict[str, Any]
    published_ms: int
    read: bool


@dataclass(frozen=True)
class AnnouncementPage:
    results: list[AnnouncementItem]
    unread: int
    next_cursor: str | None


def announcements_for(uid: int, *, before: int | None = None, limit: int = 20) -> AnnouncementPage:
    """Newest first; ``before`` is the cursor (a published_ms) of the previous page."""
    mark = int(get_redis().get(mark_key(uid)) or 0)
    qs = Announcement.objects.order_by("-published_ms")
    if before is not None:
        qs = qs.filter(published_ms__lt=before)
    rows = list(qs[: limit + 1])
    items = [
        AnnouncementItem(r.pk, r.content, r.published_ms, r.published_ms <= mark)
        for r in rows[:limit]
    ]
    cursor = str(rows[limit - 1].published_ms) if len(rows) > limit else None
    return AnnouncementPage(items, announcements_unread(uid), cursor)
