"""Reads of what a user has not read: the counters' summary, groups' unread and mentions, and
unread announcements."""

from __future__ import annotations

from messaging.counters import epoch
from messaging.counters.store import UnreadSummary
from messaging.counters.store import unread_summary as counters_summary
from messaging.groups import selectors as groups
from messaging.groups.state import UnreadTotals
from unread.announcements import announcements_unread as unread_announcements


def unread_summary(uid: int) -> UnreadSummary:
    """Total, per category and per conversation (messaging's live counters, repaired first if
    Redis restarted since they were last verified)."""
    epoch.ensure_fresh(uid)
    return counters_summary(uid)


def group_unread(uid: int) -> UnreadTotals:
    """Unread and @mentions over the user's groups (read diffusion: positions against heads)."""
    return groups.group_unread(uid)


def announcements_unread(uid: int) -> int:
    """Announcements newer than the user's read mark (unread/announcements.py)."""
    return unread_announcements(uid)
