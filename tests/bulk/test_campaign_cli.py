"""The campaign CLI as an operator scripts it: ``campaign_list`` (table or JSON, filtered),
``campaign_pause`` / ``_resume`` / ``_cancel`` / ``_recall`` (the admin's actions, one line per
campaign or JSON, a readable refusal and a non-zero exit for an unknown id or an impossible
transition), and one convention for list flags across commands."""

from __future__ import annotations

import json
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from api.models import ApiClient
from bulk.models import Campaign, CampaignStatus
from messaging.models import Message, MessageStatus
from tests.bulk.helpers import business_with_followers, drive, launch

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]


def run(*args: Any) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*[str(a) for a in args], stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def refused(*args: Any) -> tuple[str, str]:
    err = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command(*[str(a) for a in args], stdout=StringIO(), stderr=err)
    return str(caught.value), err.getvalue()


def status_of(campaign: Campaign) -> str:
    campaign.refresh_from_db()
    return campaign.status


def test_list_shows_the_newest_first_filtered_by_sender_and_status(uids: Uids) -> None:
    shop = business_with_followers(uids(3))
    other = business_with_followers(uids(3))
    first, second, elsewhere = launch(shop), launch(shop), launch(other)
    run("campaign_pause", first.pk)

    table, _ = run("campaign_list", "--sender", shop.sender)
    lines = [line.split() for line in table.splitlines()[1:] if line.strip()]
    assert [int(cells[0]) for cells in lines] == [second.pk, first.pk]
    assert [cells[1] for cells in lines] == ["running", "paused"]
    assert str(elsewhere.pk) not in [cells[0] for cells in lines]

    both = run("campaign_list", "--sender", f"{shop.sender},{other.sender}", "--status", "paused")
    assert [line.split()[0] for line in both[0].splitlines()[1:] if line.strip()] == [str(first.pk)]
    found = json.loads(
        run("campaign_list", "--status", "paused,running", "--sender", shop.sender, "--json")[0]
    )
    assert [c["id"] for c in found] == [str(second.pk), str(first.pk)]
    assert found[1]["status"] == "paused"
    assert found[1]["pause_reason"] == "operator"
    one = json.loads(run("campaign_list", "--sender", shop.sender, "--limit", "1", "--json")[0])
    assert [c["id"] for c in one] == [str(second.pk)]


def test_list_refuses_an_unknown_status_in_one_line() -> None:
    message, _ = refused("campaign_list", "--status", "running,sleeping")
    assert "--status: invalid value 'sleeping'" in message


def test_pause_resume_and_cancel_print_one_line_per_campaign(uids: Uids) -> None:
    shop = business_with_followers(uids(3))
    a, b = launch(shop), launch(shop)
    out, _ = run("campaign_pause", f"{a.pk},{b.pk}")
    assert out.splitlines() == [f"Paused campaign {a.pk}.", f"Paused campaign {b.pk}."]
    assert (status_of(a), status_of(b)) == ("paused", "paused")

    out, _ = run("campaign_pause", a.pk)
    assert out.strip() == f"Campaign {a.pk} was already paused: nothing changed."

    resumed = json.loads(run("campaign_resume", a.pk, "--json")[0])
    assert resumed == [{**resumed[0], "id": str(a.pk), "status": "running", "ok": True}]
    assert resumed[0]["message"] == f"Resumed campaign {a.pk}."

    out, _ = run("campaign_cancel", a.pk, b.pk)
    assert out.splitlines() == [f"Cancelled campaign {a.pk}.", f"Cancelled campaign {b.pk}."]
    assert status_of(a) == status_of(b) == CampaignStatus.CANCELLED


def test_an_unknown_id_or_an_impossible_transition_exits_non_zero_naming_them(
    uids: Uids,
) -> None:
    shop = business_with_followers(uids(3))
    running, done = launch(shop), launch(shop)
    run("campaign_cancel", done.pk)
    missing = 9_000_000_000_000_000_000

    message, err = refused("campaign_resume", done.pk, missing, running.pk)
    assert message == (  # one line: CommandError's, naming each and why
        f"Could not resume campaign {done.pk}: A cancelled campaign cannot be resumed. "
        f"No campaign {missing}."
    )
    assert err == ""
    assert status_of(running) == "running"  # the good id in the same call was still served

    message, _ = refused("campaign_pause", missing, "--json")
    assert message == f"not paused: campaign {missing}"
    bad, _ = refused("campaign_pause", "0")
    assert "invalid value '0'" in bad


def test_recall_takes_a_finished_campaigns_message_back(uids: Uids) -> None:
    shop = business_with_followers(uids(4))
    campaign = drive(launch(shop).pk)
    assert campaign.status == CampaignStatus.FINISHED
    assert campaign.msgkey is not None

    [shown] = json.loads(run("campaign_recall", campaign.pk, "--json")[0])
    assert shown["ok"] is True
    assert shown["message"].startswith(f"Recalling campaign {campaign.pk}'s message")
    assert Message.objects.get(msgkey=campaign.msgkey).status == MessageStatus.RECALLED

    out, _ = run("campaign_recall", campaign.pk)
    assert out.startswith(f"Campaign {campaign.pk}'s message was already recalled")


def test_list_flags_take_commas_repeats_and_spaces_alike(uids: Uids) -> None:
    a, b, c = uids(3)
    run("apiclient_create", "cli-commas", "--scopes", "send,campaigns", "--senders", f"{a},{b}")
    run(
        "apiclient_create",
        "cli-repeats",
        "--scopes",
        "send",
        "--scopes",
        "campaigns",
        "--senders",
        a,
        "--senders",
        b,
        c,
    )
    for name, senders in (("cli-commas", [a, b]), ("cli-repeats", [a, b, c])):
        client = ApiClient.objects.get(name=name)
        assert sorted(client.scopes) == ["campaigns", "send"]
        assert sorted(client.senders.values_list("uid", flat=True)) == senders
