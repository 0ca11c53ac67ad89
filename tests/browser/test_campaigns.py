"""The campaign console in headless Chromium, as an operator sees it: log in and read the list,
watch a running campaign's progress move without a reload (a real Celery worker delivers), pause,
resume and cancel from the campaign page's buttons, recall a finished campaign, and create one
from the form (dry run first, then launch)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from bulk import services
from bulk.models import Campaign, CampaignStatus, ChannelSetting
from messaging.models import Message, MessageStatus
from tests.browser.pages import Page
from tests.bulk.helpers import block, drive, follow, shop
from tests.conftest import Workers

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
Uids = Callable[[int], list[int]]
CAMPAIGNS = "/admin/bulk/campaign/"


def launch(sender: int, fans: list[int], text: str = "Spring sale") -> Campaign:
    campaign, _ = services.campaign_submit(
        sender_uid=sender,
        content={"type": "text", "text": text},
        audience_spec={"type": "uids", "uids": [str(u) for u in fans]},
        channel="daily",
    )
    return campaign


def percent(figures: str) -> int:
    """The percentage a figures text starts with ("42% · 1,260 delivered · ..."); -1 for a text
    that is not one (an element being read while it is rewritten)."""
    match = re.match(r"(\d+)% · ", figures)
    return int(match.group(1)) if match else -1


def status_of(page: Page) -> str:
    return page.text('[data-live="status"]')


def finished_and_running(uids: Uids) -> tuple[Campaign, Campaign]:
    """Two campaigns of one sender: one finished (run in this process), one running with no
    worker (so its row carries the red warning, its widest form)."""
    sender, *fans = uids(4)
    shop(sender)
    finished = drive(launch(sender, fans[:2], text="Autumn news").pk)
    return finished, launch(sender, fans)


def test_log_in_and_read_the_campaign_list_without_sideways_scrolling(
    page: Page, uids: Uids
) -> None:
    finished, running = finished_and_running(uids)

    page.open(CAMPAIGNS)

    assert page.text("#user-tools").upper().startswith("WELCOME, OPERATOR")  # logged in
    assert "campaign" in page.text("#content h1").lower()
    rows = page.text("#result_list")
    assert str(running.pk) in rows
    assert str(finished.pk) in rows
    assert "100% · 2 delivered · 0 skipped · 0 failed of 2" in rows
    assert "Server Error" not in page.body()
    width = page.js("return [document.documentElement.scrollWidth, window.innerWidth];")
    assert width[0] <= width[1], f"the page scrolls sideways at 1400 px: {width}"


def test_the_campaign_table_itself_does_not_scroll_sideways_at_1400_px(
    page: Page, uids: Uids
) -> None:
    finished_and_running(uids)

    page.open(CAMPAIGNS)  # the navigation sidebar open, as on a first visit

    table = page.js(
        "var box = document.querySelector('#changelist .results');"
        "return [box.scrollWidth, box.clientWidth];"
    )
    assert table[0] <= table[1], f"the campaign table scrolls sideways at 1400 px: {table}"


def test_a_running_campaigns_progress_moves_without_a_reload(
    page: Page, uids: Uids, workers: Workers
) -> None:
    sender, *fans = uids(3001)
    shop(sender)
    follow(sender, fans)
    other, *customers = uids(3)
    drive(launch(shop(other), customers, text="Autumn news").pk)  # a finished one in the list
    ChannelSetting.objects.create(channel="daily", rate_per_s=300, batch_size=100)  # ~10 s
    workers.start(queues="messaging,bulk.daily")
    campaign, _ = services.campaign_submit(
        sender_uid=sender,
        content={"type": "text", "text": "Flash sale: 20% off today"},
        audience_spec={"type": "followers"},
        channel="daily",
    )

    page.open(CAMPAIGNS)  # the list moves too
    listed = f'[data-live="figures"][data-live-id="{campaign.pk}"]'
    rate = f'[data-live="rate"][data-live-id="{campaign.pk}"]'
    page.wait(
        lambda: 0 < percent(page.text(listed)) < 100 and "/s" in page.text(rate),
        "the list's figures and rate to move",
    )
    page.shot("campaign-list")

    page.open(f"{CAMPAIGNS}{campaign.pk}/change/")
    tag = page.mark()
    loads = page.navigations()
    planning = page.text('[data-live="figures"]')
    first = page.wait(
        lambda: percent(text := page.text('[data-live="figures"]')) >= 0 and text,
        "the audience to be planned (a percentage, no longer 'so far')",
    )
    bar = int(page.find('progress[data-live="bar"]').get_attribute("value") or 0)
    moved = page.wait(
        lambda: (
            (text := page.text('[data-live="figures"]')) != first and percent(text) >= 0 and text
        ),
        "the progress figures to change while the campaign runs",
    )
    page.shot("campaign-running")
    page.wait(lambda: status_of(page) == "finished", "the status to read finished", timeout=90)
    last = page.text('[data-live="figures"]')
    last_bar = int(page.find('progress[data-live="bar"]').get_attribute("value") or 0)

    assert page.marked() == tag, "the page was reloaded"
    assert percent(planning) >= 0 or planning.endswith("planned so far"), planning
    assert page.navigations() == loads
    assert 0 <= bar < 100
    assert 0 <= percent(first) < 100  # the page opened on a running campaign
    assert percent(first) <= percent(moved) <= percent(last) == last_bar == 100
    assert last == "100% · 3,000 delivered · 0 skipped · 0 failed of 3,000"
    assert "No worker consumes" not in page.text(".live-banner")


def test_pause_resume_and_cancel_from_the_campaign_page(page: Page, uids: Uids) -> None:
    sender, *fans = uids(3)
    shop(sender)
    campaign = launch(sender, fans)  # no worker: it stays running until an operator acts
    page.open(f"{CAMPAIGNS}{campaign.pk}/change/")
    assert status_of(page) == "running"

    page.press("pause")
    assert page.messages() == [f"Paused campaign {campaign.pk}."]
    assert status_of(page) == "paused (operator)"
    assert not page.all("button.console-pause")

    page.press("resume")
    assert page.messages() == [f"Resumed campaign {campaign.pk}."]
    assert status_of(page) == "running"

    question = page.press("cancel", confirm=False)  # the operator thinks again
    assert question == f"Cancel campaign {campaign.pk}? A cancelled campaign cannot be resumed."
    assert status_of(page) == "running"
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.RUNNING

    page.press("cancel", confirm=True)
    assert page.messages() == [f"Cancelled campaign {campaign.pk}."]
    assert status_of(page) == "cancelled"
    buttons = page.all("button.console-button")
    assert [str(b.get_attribute("textContent")).strip() for b in buttons] == [
        "Recall",
        "Duplicate",
    ]


def test_recall_a_finished_campaign_from_its_page(page: Page, uids: Uids, workers: Workers) -> None:
    sender, *fans = uids(6)
    shop(sender)
    ChannelSetting.objects.create(channel="daily", rate_per_s=3500, batch_size=2)
    campaign = drive(launch(sender, fans).pk)
    workers.start(queues="messaging")  # runs the recall's batches
    page.open(f"{CAMPAIGNS}{campaign.pk}/change/")
    assert status_of(page) == "finished"

    question = page.press("recall", confirm=True)
    tag = page.mark()
    done = page.wait(
        lambda: "100%" in (text := page.text('[data-live="recall"]')) and text,
        "the recall's progress to reach 100%",
    )

    assert question == (
        f"Recall campaign {campaign.pk}'s message from every recipient? This cannot be undone."
    )
    assert page.messages() == [
        f"Recalling campaign {campaign.pk}'s message from every recipient (3 batches)."
    ]
    assert done == "Recalled · 100% (3 / 3 batches)"
    assert page.marked() == tag  # the recall's progress came in without a reload
    assert campaign.msgkey is not None
    assert Message.objects.get(msgkey=campaign.msgkey).status == MessageStatus.RECALLED


# -- creation (the form's contract: bulk/admin.py's add view) --------------------------------------
def test_create_a_campaign_from_the_form_preview_then_launch(page: Page, uids: Uids) -> None:
    sender, *fans = uids(13)
    shop(sender)
    block(sender, fans[:1])
    page.open(f"{CAMPAIGNS}add/")

    page.fill("sender_uid", str(sender))
    page.fill("name", "Browser launch")
    page.fill("text", "New collection out now")
    page.choose("audience_type", "uids")
    page.fill("uids", "\n".join(str(u) for u in fans))
    page.choose("channel", "daily")
    page.submit_with(page.find('[name="_preview"]'))
    dry_run = page.text("#dry-run")

    assert "12" in dry_run, f"the dry run does not show the audience size: {dry_run!r}"
    page.shot("campaign-create")
    assert not Campaign.objects.filter(sender_uid=sender).exists()  # a dry run stores nothing
    assert page.find('[name="name"]').get_attribute("value") == "Browser launch"  # kept

    page.submit_with(page.find('[name="_launch"]'))
    [campaign] = Campaign.objects.filter(sender_uid=sender)
    assert page.path == f"{CAMPAIGNS}{campaign.pk}/change/"
    assert "Browser launch" in page.body()
    assert status_of(page) == CampaignStatus.RUNNING
