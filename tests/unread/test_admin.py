"""Announcements in the admin: the box starts as a text template, bad content is one form error
that keeps what was typed and stores nothing, good content is previewed and published to everyone
only once the operator confirms."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from unread.announcements import announcements_unread
from unread.models import Announcement

pytestmark = pytest.mark.django_db
ADD = "/admin/unread/announcement/add/"


def test_the_add_form_starts_with_a_text_template_not_null(admin_client: Client) -> None:
    page = admin_client.get(ADD).content.decode()
    assert "&quot;type&quot;: &quot;text&quot;" in page
    assert ">null</textarea>" not in page


@pytest.mark.parametrize(
    "typed",
    ['{"type": "video", "url": "x"}', '{"type": "text", "text": ""}', "[1, 2]", '{"type": "text"'],
)
def test_bad_content_is_a_form_error_that_keeps_the_input(admin_client: Client, typed: str) -> None:
    response = admin_client.post(ADD, {"content": typed})
    assert response.status_code == 200  # the form again, not a redirect
    assert response.context["adminform"].form.errors["content"]
    assert typed.replace('"', "&quot;") in response.content.decode()
    assert not any("successfully" in str(m) for m in get_messages(response.wsgi_request))
    assert not Announcement.objects.exists()


def test_good_content_is_previewed_and_nothing_published_until_confirmed(
    admin_client: Client, uid: int
) -> None:
    typed = '{"type": "text", "text": "maintenance at 02:00"}'
    response = admin_client.post(ADD, {"content": typed})
    assert response.status_code == 200  # the form again, with the preview
    page = response.content.decode()
    assert "Every user will see: <strong></strong> maintenance at 02:00" in page
    assert response.context["adminform"].form.errors["confirm"]
    assert typed.replace('"', "&quot;") in page
    assert not Announcement.objects.exists()
    assert announcements_unread(uid) == 0


def test_the_preview_escapes_what_was_typed(admin_client: Client) -> None:
    typed = '{"type": "text", "text": "<script>alert(1)</script>"}'
    page = admin_client.post(ADD, {"content": typed}).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)</script>" not in page


def test_good_content_is_published_to_everyone_once_confirmed(
    admin_client: Client, uid: int
) -> None:
    response = admin_client.post(
        ADD,
        {"content": '{"type": "text", "text": "maintenance at 02:00"}', "confirm": "on"},
        follow=True,
    )
    assert response.status_code == 200
    [row] = Announcement.objects.all()
    assert row.published_ms > 0
    assert row.published_by.startswith("admin:")
    assert announcements_unread(uid) == 1
