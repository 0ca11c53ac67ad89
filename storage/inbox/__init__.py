"""Inbox timelines behind one contract (``base.Inbox``); settings.INBOX_BACKEND picks the store."""

from __future__ import annotations

from functools import cache

from django.conf import settings
from django.utils.module_loading import import_string

from storage.inbox.base import Inbox, InboxEntry, InboxPage

__all__ = ["Inbox", "InboxEntry", "InboxPage", "get_inbox", "inbox_for"]


def inbox_for(name: str) -> Inbox:
    backend: type[Inbox] = import_string(settings.INBOX_BACKENDS[name])
    return backend()


@cache
def _cached(name: str) -> Inbox:
    return inbox_for(name)


def get_inbox() -> Inbox:
    return _cached(settings.INBOX_BACKEND)
