"""The unread answer (unread/answer.py): the body the view and the fast path both send is what DRF
renders of the view's schema, byte for byte."""

from __future__ import annotations

import json

from rest_framework.renderers import JSONRenderer

from unread.answer import unread_body
from unread.apis import UnreadOut


def test_the_body_is_what_drf_renders_of_the_schema() -> None:
    body = unread_body([10, 2, 3, 1, 4], group_unread=5, group_mentions=1, announcements=7)
    assert JSONRenderer().render(UnreadOut(json.loads(body)).data) == body
    assert json.loads(body) == {
        "total": 15,
        "by_category": {"followed": 2, "stranger": 3, "business": 1, "system": 4, "group": 5},
        "announcements": 7,
        "mentions": 1,
    }
