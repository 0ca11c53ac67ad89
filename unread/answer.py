"""The unread answer (API.md ``GET /users/{uid}/unread``): one body for both paths that give it,
the view (``unread.apis.UnreadApi``, through ``selectors.unread_answer``) and the fast path in
front of Django (``unread/fastpath.py``), each from the numbers it read.

The body is JSON as DRF's renderer writes the view's schema, ``apis.UnreadOut`` (compact, keys in
the serializer's order; a test renders one through the other), formatted with one ``%``: the fast
path runs no serializer and no ``json.dumps`` per request.
"""

from __future__ import annotations

from collections.abc import Sequence

from storage.counters.store import CATEGORIES

CONTENT_TYPE = "application/json"
BY_CATEGORY = (*CATEGORIES, "group")
BODY = (
    '{"total":%d,"by_category":{'
    + ",".join(f'"{name}":%d' for name in BY_CATEGORY)
    + '},"announcements":%d,"mentions":%d}'
).encode()


def unread_body(
    counters: Sequence[int], group_unread: int, group_mentions: int, announcements: int
) -> bytes:
    """``counters``: the 1:1 total, then each category's in ``CATEGORIES`` order."""
    total, *by_category = counters
    return BODY % (total + group_unread, *by_category, group_unread, announcements, group_mentions)
