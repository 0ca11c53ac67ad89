"""Group history ages out with RETENTION_HISTORY_DAYS: the members stop counting and seeing
the messages that went, and the group itself stays in their lists (both timeline backends)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from retention.services import retention_run
from tests.groups.helpers import backend, users_api

pytestmark = pytest.mark.django_db
__all__ = ["backend"]


def test_group_messages_age_out_and_members_stop_counting_them(
    backend: str, uids: Callable[[int], list[int]], settings: Any
) -> None:
    settings.RETENTION_HISTORY_DAYS = 30
    api = users_api()
    owner, member = uids(2)
    gid = api.created(owner, [member])
    api.sent(gid, owner, "first")
    api.sent(gid, owner, "second")
    assert api.group_of(member, gid)["unread"] == 2

    # forty days from now, both messages are past the thirty days kept
    report = retention_run(kinds=["history"], now=timezone.now() + timedelta(days=40))

    assert next(k for k in report.kinds if k.kind == "history").counts["group_messages"] == 2
    assert api.group_of(member, gid)["unread"] == 0
    assert api.seen(member, gid) == []
