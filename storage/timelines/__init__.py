"""Group timelines behind one contract (``base.GroupTimeline``); settings.GROUP_TIMELINE_BACKEND
(default: the inbox's, INBOX_BACKEND) picks the store."""

from __future__ import annotations

from typing import cast

from django.conf import settings

from storage import backends
from storage.timelines.base import GroupEntry, GroupPage, GroupTimeline

__all__ = ["GroupEntry", "GroupPage", "GroupTimeline", "get_timeline", "timeline_for"]

_cached = backends.per_process("GROUP_TIMELINE_BACKENDS")


def timeline_for(name: str) -> GroupTimeline:
    return cast(GroupTimeline, backends.load("GROUP_TIMELINE_BACKENDS", name))


def get_timeline() -> GroupTimeline:
    return cast(GroupTimeline, _cached(settings.GROUP_TIMELINE_BACKEND))
