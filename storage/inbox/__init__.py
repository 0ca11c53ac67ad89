"""Inbox timelines behind one contract (``base.Inbox``); settings.INBOX_BACKEND picks the store."""

from __future__ import annotations

from typing import cast

from django.conf import settings

from storage import backends
from storage.inbox.base import Inbox, InboxEntry, InboxPage

__all__ = ["Inbox", "InboxEntry", "InboxPage", "get_inbox", "inbox_for"]

_cached = backends.per_process("INBOX_BACKENDS")


def inbox_for(name: str) -> Inbox:
    return cast(Inbox, backends.load("INBOX_BACKENDS", name))


def get_inbox() -> Inbox:
    return cast(Inbox, _cached(settings.INBOX_BACKEND))
