"""Reads of what a user has not read: the counters' summary, groups' unread and mentions, unread
announcements, and the unread answer built from them (``unread.answer``)."""

from __future__ import annotations

from groups import selectors as groups
from messaging import selectors as messaging_selectors
from storage.counters.store import CATEGORIES, UnreadSummary
from storage.counters.store import unread_summary as counters_summary
from unread.announcements import announcements_unread as unread_announcements
from unread.answer import unread_body


def unread_answer(uid: int) -> bytes:
    """The body of ``GET /users/{uid}/unread`` (the fast path builds the same one from Redis's
    raw replies)."""
    summary = unread_summary(uid)
    in_groups = groups.group_unread(uid)
    counters = [summary.total, *(summary.by_category[name] for name in CATEGORIES)]
    announced = announcements_unread(uid)
    return unread_body(counters, in_groups.unread, in_groups.mentions, announced)


def unread_summary(uid: int) -> UnreadSummary:
    """Total, per category and per conversation (messaging's live counters, repaired first if
    Redis restarted since they were last verified)."""
    messaging_selectors.unread_counters_fresh(uid)
    return counters_summary(uid)


def announcements_unread(uid: int) -> int:
    """Announcements newer than the user's read mark (unread/announcements.py)."""
    return unread_announcements(uid)
