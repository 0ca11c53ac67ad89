"""The campaign API with real Celery workers: a campaign posted over HTTP runs to the end, and its
recall takes the message back from every recipient."""

from __future__ import annotations

from typing import Any

import pytest

from bulk.models import Campaign
from tests.api.factories import inbox_api
from tests.bulk.helpers import (
    Uids,
    assert_delivered,
    block,
    campaigns_api,
    create,
    follow,
    progress,
    received,
    shop,
)
from tests.conftest import wait_for
from unread.selectors import unread_summary

pytestmark = pytest.mark.django_db


# -- with real workers ----------------------------------------------------------------------------
@pytest.mark.worker
def test_a_campaign_runs_on_real_workers(workers: Any, uids: Uids) -> None:
    sender, *fans = uids(31)
    shop(sender)
    follow(sender, fans)
    block(sender, fans[:5])
    api = campaigns_api(sender)
    workers.start()

    created = create(api, sender, {"type": "followers"})
    wait_for(lambda: progress(api, created["id"])["status"] == "finished")

    shown = progress(api, created["id"])
    assert (shown["total"], shown["delivered"], shown["skipped"]["blocked"]) == (30, 25, 5)
    assert shown["rate_per_s"] > 0
    assert_delivered(sender, Campaign.objects.get(pk=created["id"]), set(fans[5:]), set(fans[:5]))


def test_recalling_a_campaign_takes_it_back_from_every_recipient_on_real_workers(
    workers: Any, uids: Uids
) -> None:
    sender, *fans = uids(31)
    shop(sender)
    follow(sender, fans)
    api = campaigns_api(sender)
    workers.start()
    created = create(api, sender, {"type": "followers"})
    wait_for(lambda: progress(api, created["id"])["status"] == "finished")
    msgkey = progress(api, created["id"])["msgkey"]
    assert received(fans[0], sender) == [int(msgkey)]

    assert api.recall(msgkey) == (200, {"msgkey": msgkey, "status": "recalled"})
    wait_for(lambda: all(unread_summary(uid).total == 0 for uid in fans))

    reader = inbox_api(f"bff-{sender}")
    for uid in fans:  # each still holds the message, shown as recalled, with nothing unread
        page = reader.history(uid, sender)
        assert [(m["msgkey"], m["status"], m["content"]) for m in page["results"]] == [
            (msgkey, "recalled", None)
        ]
    assert progress(api, created["id"])["status"] == "finished"
