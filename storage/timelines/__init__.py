"""Group timelines behind one contract (``base.GroupTimeline``); settings.GROUP_TIMELINE_BACKEND
(default: the inbox's, INBOX_BACKEND) picks the store."""

from __future__ import annotations

from functools import cache

from django.conf import settings
from django.utils.module_loading import import_string

from storage.timelines.base import GroupEntry, GroupPage, GroupTimeline

__all__ = ["GroupEntry", "GroupPage", "GroupTimeline", "get_timeline", "timeline_for"]


def timeline_for(name: str) -> GroupTimeline:
    backend: type[GroupTimeline] = import_string(settings.GROUP_TIMELINE_BACKENDS[name])
    return backend()


@cache
def _cached(name: str) -> GroupTimeline:
    return timeline_for(name)


def get_timeline() -> GroupTimeline:
    return _cached(settings.GROUP_TIMELINE_BACKEND)
