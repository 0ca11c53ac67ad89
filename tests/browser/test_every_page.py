"""Every admin page, in headless Chromium at 1400 px: each model's list and add form, and a
campaign's page with a very long name, open with no JavaScript error in the console and no
sideways scroll."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib import admin
from django.test import RequestFactory

from adminsite import paging
from bulk import services
from bulk.models import Campaign
from groups.services import group_create
from messaging.models import Block
from messaging.services import message_send
from tests.browser.pages import Page
from tests.bulk.helpers import follow, shop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
Uids = Callable[[int], list[int]]
# words and one unbroken run (a pasted URL or tag list), as operators type them
LONG_NAME = "Spring clearance for every follower " + "spring-clearance-every-region-" * 5


def admin_pages() -> list[str]:
    """The list page of every registered model, and its add form where one may add."""
    request = RequestFactory().get("/admin/")
    request.user = type("Operator", (), {"has_perm": lambda *_: True, "is_active": True})()
    paths = []
    for model, model_admin in admin.site._registry.items():
        base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        paths.append(base)
        if model_admin.has_add_permission(request):
            paths.append(base + "add/")
    return sorted(paths)


def launch_long_named(sender: int, fans: list[int]) -> Campaign:
    campaign, _ = services.campaign_submit(
        sender_uid=sender,
        content={"type": "text", "text": "x" * 400},
        audience_spec={"type": "uids", "uids": [str(u) for u in fans]},
        channel="daily",
        name=LONG_NAME.strip()[:200],
    )
    return campaign


def some_of_everything(uids: Uids) -> Campaign:
    """Rows in the lists whose widgets only run with rows (action checkboxes, selections)."""
    sender, *fans = uids(4)
    shop(sender)
    follow(sender, fans)
    Block.objects.create(owner_uid=fans[0], blocked_uid=sender)
    group_create(owner_uid=fans[1], name="Browser fans", member_uids=fans[2:])
    text = {"type": "text", "text": "hi"}
    message_send(sender_uid=fans[1], receiver_uid=fans[2], content=text, client_msg_id="b1")
    return launch_long_named(sender, fans)


def test_the_console_log_is_read(page: Page) -> None:
    """The check below would pass blind if the browser's log were not collected."""
    page.open("/admin/")
    page.console_errors()
    page.js("setTimeout(function () { throw new Error('probe-7'); }, 0);")
    page.wait(lambda: any("probe-7" in e for e in page.console_errors()), "the probe's error")


@pytest.mark.parametrize("cap", [10_000, 1], ids=["exact-counts", "capped-counts"])
def test_every_admin_page_opens_without_a_console_error_or_sideways_scroll(
    page: Page, uids: Uids, cap: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``capped-counts``: every big table past its count cap (as Follows on real data), where the
    list offers no "select all" and its action checkboxes must still work."""
    monkeypatch.setattr(paging, "COUNT_CAP", cap)
    campaign = some_of_everything(uids)
    paths = [*admin_pages(), f"/admin/bulk/campaign/{campaign.pk}/change/"]
    page.console_errors()  # what the login left

    problems = {}
    for path in paths:
        page.open(path)
        found = [f"console: {e}" for e in page.console_errors()]
        if "Server Error" in page.body():
            found.append("server error")
        if page.scrolls_sideways():
            found.append("scrolls sideways")
        if found:
            problems[path] = found

    assert len(paths) > 20
    assert not problems, problems


def test_ticking_rows_of_a_capped_list_counts_them(
    page: Page, uids: Uids, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paging, "COUNT_CAP", 1)
    some_of_everything(uids)
    page.open("/admin/messaging/follow/")
    page.console_errors()
    boxes = page.all("#result_list input.action-select")
    for box in boxes:
        box.click()
    assert len(boxes) == 3
    assert all(box.is_selected() for box in boxes)
    assert not page.console_errors()
