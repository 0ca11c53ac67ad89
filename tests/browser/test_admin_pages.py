"""Admin pages beyond the campaign console, in headless Chromium: the announcement form's bad
input (one error, what was typed kept, nothing published) and a big table (Conversations)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from messaging.models import Conversation
from tests.browser.pages import Page
from unread.models import Announcement

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
Uids = Callable[[int], list[int]]


def test_bad_announcement_content_is_one_error_and_keeps_what_was_typed(page: Page) -> None:
    typed = '{"type": "video", "url": "https://example.com/v.mp4"}'
    page.open("/admin/unread/announcement/add/")
    assert '"type": "text"' in (page.find('[name="content"]').get_attribute("value") or "")

    page.fill("content", typed)
    page.submit_with(page.find('[name="_save"]'))

    errors = [e.text for e in page.all(".errorlist li")]
    assert len(errors) == 1, errors
    assert page.find('[name="content"]').get_attribute("value") == typed
    assert not [m for m in page.messages() if "success" in m]
    assert page.path == "/admin/unread/announcement/add/"
    assert not Announcement.objects.exists()


def test_the_conversations_big_table_renders_pages_and_finds_by_uid(page: Page, uids: Uids) -> None:
    owners = uids(3)
    peers = uids(90)
    Conversation.objects.bulk_create(
        Conversation(owner_uid=owner, peer_uid=peer, category="followed", sort_key=i)
        for owner in owners
        for i, peer in enumerate(peers)
    )

    page.open("/admin/messaging/conversation/")
    first = page.all("#result_list tbody tr")
    page.open(f"/admin/messaging/conversation/?q={owners[1]}")
    found = page.all("#result_list tbody tr")
    found_text = page.text("#result_list")

    assert "Server Error" not in page.body()
    assert "conversation" in page.text("#content h1").lower()
    assert first, "the conversation list shows no rows"
    assert found
    assert str(owners[1]) in found_text
    assert str(owners[0]) not in found_text
