"""The operators' audit trail: one ``django.contrib.admin.models.LogEntry`` per operator action.

Every action an operator takes in the admin (pause, resume, cancel, recall, duplicate, create a
campaign, rotate or revoke a token, publish an announcement, dissolve a group, ...) calls
``record`` with the request that carried it. The entry names who (``request.user``), what (the
object, by content type and id), when (``action_time``) and a one-line message saying what was
done; it shows on the object's History page and in the filterable list at
``/admin/admin/logentry/`` (api/admin.py). ``record_many`` logs one action on many objects (a
list action) in one INSERT. Form saves are logged by Django itself (``AuditedAdmin`` drops its
entry for a save that changed nothing). Nothing here is written for an API client's request:
those carry no operator, and the API keeps its own idempotency records.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib import admin
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import Model
from django.http import HttpRequest

__all__ = ["ADDITION", "CHANGE", "DELETION", "AuditedAdmin", "record", "record_many"]


def record(request: HttpRequest, obj: Model, message: str, flag: int = CHANGE) -> LogEntry | None:
    """Log ``message`` as ``request.user``'s action on ``obj``; None when no operator is logged in
    (a management command or a test without a user)."""
    user = _operator(request)
    if user is None:
        return None
    entry = _entry(user.pk, obj, message, flag)
    entry.save()
    return entry


def record_many(
    request: HttpRequest, objs: Iterable[Model], message: str, flag: int = CHANGE
) -> int:
    """``record`` for each of ``objs`` in one INSERT; returns how many entries were written."""
    user = _operator(request)
    if user is None:
        return 0
    entries = [_entry(user.pk, obj, message, flag) for obj in objs]
    return len(LogEntry.objects.bulk_create(entries))


def _operator(request: HttpRequest) -> Any:
    user = getattr(request, "user", None)
    return user if user is not None and user.is_authenticated else None


def _entry(user_id: int, obj: Model, message: str, flag: int) -> LogEntry:
    return LogEntry(
        user_id=user_id,
        content_type_id=ContentType.objects.get_for_model(obj, for_concrete_model=False).pk,
        object_id=str(obj.pk),
        object_repr=str(obj)[:200],
        action_flag=flag,
        change_message=message,
    )


class AuditedAdmin(admin.ModelAdmin):
    """Django's own log of a form save, minus its "No fields changed." entry: a save that
    changed nothing is not an action."""

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        if not message:
            return None
        return super().log_change(request, obj, message)
