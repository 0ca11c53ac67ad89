"""The audit trail in headless Chromium: after an operator pauses and resumes a campaign from its
page, the audit list (/admin/admin/logentry/, Django's LogEntry with filters) and the campaign's
History page name who did what to which campaign."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.contenttypes.models import ContentType
from selenium.webdriver.common.by import By

from bulk import services
from bulk.models import Campaign
from tests.browser.pages import Page
from tests.bulk.helpers import shop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
Uids = Callable[[int], list[int]]
CAMPAIGNS = "/admin/bulk/campaign/"
AUDIT = "/admin/admin/logentry/"


def test_pause_and_resume_show_in_the_audit_list_and_the_campaigns_history(
    page: Page, uids: Uids
) -> None:
    sender, *fans = uids(3)
    shop(sender)
    campaign, _ = services.campaign_submit(
        sender_uid=sender,
        content={"type": "text", "text": "Weekend offer"},
        audience_spec={"type": "uids", "uids": [str(u) for u in fans]},
        channel="daily",
    )
    page.open(f"{CAMPAIGNS}{campaign.pk}/change/")
    page.press("pause")
    page.press("resume")

    page.open(AUDIT)
    listed = page.text("#result_list")
    link = f'a[href$="/admin/bulk/campaign/{campaign.pk}/change/"]'
    ours = [
        str(row.text)
        for row in page.all("#result_list tbody tr")
        if row.find_elements(By.CSS_SELECTOR, link)  # the entry links to the campaign's page
    ]

    assert page.all("#changelist-filter"), "the audit list has no filters"
    assert len(ours) >= 2, f"no pause and resume entries for campaign {campaign.pk}: {listed!r}"
    assert all("operator" in row for row in ours)
    assert "pause" in listed.lower()
    assert "resume" in listed.lower()
    page.shot("audit-log")

    campaigns_only = ContentType.objects.get_for_model(Campaign).pk
    page.open(f"{AUDIT}?content_type__id__exact={campaigns_only}")  # the content-type filter
    filtered = page.text("#result_list")
    assert "e=1" not in page.path  # Django's "invalid filter" redirect
    assert str(campaign.pk) in filtered
    assert "pause" in filtered.lower()

    page.open(f"{CAMPAIGNS}{campaign.pk}/history/")
    history = page.text("#change-history")
    assert "operator" in history
    assert "pause" in history.lower()
    assert "resume" in history.lower()
