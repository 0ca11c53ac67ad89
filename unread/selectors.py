"""Reads of what a user has not read: the counters' summary, groups' unread and mentions, unread
announcements, and the unread answer built from them (``unread.answer``); and the users a full
rebuild of the counters visits (``unread.rebuild``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from groups import selectors as groups
from storage.counters import epoch
from storage.counters.store import CATEGORIES, UnreadSummary
from storage.counters.store import unread_summary as counters_summary
from unread import rebuild
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
    """Total, per category and per conversation (the live counters, rebuilt first from
    messaging's truth if Redis restarted since they were last verified: lazy repair on read, as
    the conversation list does)."""
    epoch.ensure_fresh(uid)
    return counters_summary(uid)


def unread_counter_owners() -> Iterator[int]:
    """Every user whose unread counters a full rebuild must visit: each owner of a conversation,
    then each owner of a counter hash who holds no conversation any more (its counts go to 0)."""
    return itertools.chain(rebuild.iter_owners(), rebuild.iter_orphan_counters())


def announcements_unread(uid: int) -> int:
    """Announcements newer than the user's read mark (unread/announcements.py)."""
    return unread_announcements(uid)
