"""Reads of what a user has not read: the counters' summary and unread announcements."""

from __future__ import annotations

from messaging.counters import epoch
from messaging.counters.store import UnreadSummary
from messaging.counters.store import unread_summary as counters_summary
from unread.announcements import announcements_unread as unread_announcements


def unread_summary(uid: int) -> UnreadSummary:
    """Total, per category and per conversation (messaging's live counters, repaired first if
    Redis restarted since they were last verified)."""
    epoch.ensure_fresh(uid)
    return counters_summary(uid)


def announcements_unread(uid: int) -> int:
    """Announcements newer than the user's read mark (unread/announcements.py)."""
    return unread_announcements(uid)
