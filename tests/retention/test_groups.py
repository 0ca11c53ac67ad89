"""Group history ages out with RETENTION_HISTORY_DAYS: the members stop counting and seeing
the messages that went, and the group itself stays in their lists (both timeline backends)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from retention.services import retention_run
from tests.groups.helpers import GroupsApi, backend, users_api

pytestmark = pytest.mark.django_db
__all__ = ["backend"]


def group_of_two(
    uids: Callable[[int], list[int]], settings: Any
) -> tuple[GroupsApi, int, int, str]:
    """Group history kept thirty days; a group of an owner and one member: (api, owner, member,
    gid)."""
    settings.RETENTION_HISTORY_DAYS = 30
    api = users_api()
    owner, member = uids(2)
    return api, owner, member, api.created(owner, [member])


def test_group_messages_age_out_and_members_stop_counting_them(
    backend: str, uids: Callable[[int], list[int]], settings: Any
) -> None:
    api, owner, member, gid = group_of_two(uids, settings)
    api.sent(gid, owner, "first")
    api.sent(gid, owner, "second")
    assert api.group_of(member, gid)["unread"] == 2

    # forty days from now, both messages are past the thirty days kept
    report = retention_run(kinds=["history"], now=timezone.now() + timedelta(days=40))

    assert next(k for k in report.kinds if k.kind == "history").counts["group_messages"] == 2
    assert api.group_of(member, gid)["unread"] == 0
    assert api.seen(member, gid) == []
    assert api.group_of(member, gid)["last_message"] is None  # "second" is gone too


def test_the_newest_group_message_kept_stays_the_last_shown(
    backend: str, uids: Callable[[int], list[int]], settings: Any
) -> None:
    api, owner, member, gid = group_of_two(uids, settings)
    api.sent(gid, owner, "old")
    time.sleep(0.01)
    cutoff = timezone.now() + timedelta(days=30)  # thirty days on: the cut is this instant
    time.sleep(0.01)

    report = retention_run(kinds=["history"], now=cutoff)  # "old" ages out
    api.sent(gid, owner, "new")  # after the cut: kept, and shown
    retention_run(kinds=["history"], now=cutoff)

    assert next(k for k in report.kinds if k.kind == "history").counts["group_messages"] == 1
    item = api.group_of(member, gid)
    assert (item["last_message"]["preview"], item["unread"]) == ("new", 1)
