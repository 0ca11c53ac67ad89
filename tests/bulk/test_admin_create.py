"""Creating a campaign in Django admin (bulk/admin_forms.py, bulk/admin_views.py ``create``): the
form, its preview (the API's dry run), its launch (the API's create service, once per form), the
bad input it refuses without storing anything; a campaign's name and text shown in the list and
on its page, the links between a campaign and its message; the History of operator actions."""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.utils import timezone

from bulk import services
from bulk.models import Audience, Campaign, CampaignStatus, SenderPolicy
from messaging.models import Message
from tests.bulk.helpers import (
    block,
    body,
    campaigns_api,
    create,
    drive,
    follow,
    received,
    shop,
)

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]
CAMPAIGNS = "/admin/bulk/campaign/"
ADD = f"{CAMPAIGNS}add/"
FIGURE = re.compile(r'data-figure="(\w+)">([^<]*)<')


def form_key(client: Client) -> str:
    """The idempotency key of a freshly shown form."""
    page = client.get(ADD).content.decode()
    found = re.search(r'name="idempotency_key" value="([0-9a-f]{32})"', page)
    assert found, "the form carries no idempotency key"
    return found.group(1)


def fields(sender: int, **extra: Any) -> dict[str, Any]:
    return {
        "sender_uid": str(sender),
        "name": "Spring sale",
        "text": "Spring sale 🌸 <b>20%</b> off",
        "audience_type": "followers",
        "channel": "daily",
        "scheduled_at": "",
        **extra,
    }


def preview(client: Client, data: dict[str, Any]) -> tuple[str, dict[str, str]]:
    response = client.post(ADD, {**data, "_preview": "Preview (dry run)"})
    assert response.status_code == 200
    page = response.content.decode()
    return page, dict(FIGURE.findall(page))


def launch(client: Client, data: dict[str, Any]) -> Any:
    return client.post(ADD, {**data, "_launch": "Launch campaign"}, follow=True)


def notes(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def stored() -> tuple[int, int, int]:
    return Campaign.objects.count(), Audience.objects.count(), Message.objects.count()


def errors_of(page: str) -> list[str]:
    found = re.findall(r'<ul class="errorlist[^"]*"[^>]*><li>(.*?)</li>', page)
    return [html.unescape(error) for error in found]


def as_figures(api_preview: dict[str, Any]) -> dict[str, str]:
    """The API's dry run as the form writes it."""
    skip = api_preview["would_skip"]
    budget = api_preview["budget_remaining"]
    return {
        "audience": f"{api_preview['audience']:,} recipients",
        "blocked": f"{skip['blocked']:,}",
        "quota": f"{skip['quota']:,}",
        "invalid": f"{skip['invalid']:,}",
        "duplicate": f"{skip['duplicate']:,}",
        "would_deliver": f"{api_preview['would_deliver']:,}",
        "budget_remaining": "unlimited" if budget is None else f"{budget:,} recipients",
    }


# -- the form ---------------------------------------------------------------------------------
def test_the_form_is_an_admin_page_with_every_field(admin_client: Client) -> None:
    listing = admin_client.get(CAMPAIGNS).content.decode()
    response = admin_client.get(ADD)
    page = response.content.decode()

    assert f'href="{ADD}"' in listing  # the list's "Add campaign" button
    assert response.status_code == 200
    for name in ("sender_uid", "name", "text", "uids", "file", "scheduled_at"):
        assert f'name="{name}"' in page
    assert '<select name="audience_type"' in page
    for kind in ("followers", "followers_filter", "uids", "upload"):
        assert f'<option value="{kind}"' in page
    assert '<select name="channel"' in page
    assert 'name="_preview" value="Preview (dry run)"' in page
    assert 'name="_launch" value="Launch campaign"' in page
    assert 'enctype="multipart/form-data"' in page
    assert 'class="module aligned' in page
    assert 'class="submit-row"' in page
    assert 'id="text-preview"' in page
    assert "bulk/create.js" in page
    assert "errornote" not in page
    assert 'id="dry-run"' not in page
    assert form_key(admin_client) != form_key(admin_client)  # one key per form shown


def test_the_form_is_for_operators_allowed_to_add_campaigns(client: Client, uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    follow(sender, [fan])
    User.objects.create_user("intern", password="pw", is_staff=True)
    User.objects.create_superuser("boss", password="pw")
    strict = Client(enforce_csrf_checks=True)
    strict.login(username="boss", password="pw")
    client.login(username="intern", password="pw")

    assert client.get(ADD).status_code == 403
    assert client.post(ADD, {**fields(sender), "_launch": "x"}).status_code == 403
    assert strict.post(ADD, {**fields(sender), "_launch": "x"}).status_code == 403  # no CSRF
    assert not Campaign.objects.filter(sender_uid=sender).exists()


# -- preview ----------------------------------------------------------------------------------
def test_preview_shows_the_apis_dry_run_and_keeps_the_input(
    admin_client: Client, uids: Uids
) -> None:
    sender, *fans = uids(7)
    shop(sender, limit=1)
    follow(sender, fans)
    block(sender, fans[:1])
    api = campaigns_api(sender)
    drive(create(api, sender, {"type": "uids", "uids": fans[1:3]})["id"])  # caps two of them
    typed = [*map(str, fans), "oops", str(fans[3])]
    before = stored()

    _, by_api = api.call("POST", "/campaigns", body(sender, {"type": "followers"}, dry_run=True))
    _, listed_by_api = api.call(
        "POST", "/campaigns", body(sender, {"type": "uids", "uids": typed}, dry_run=True)
    )
    page, figures = preview(admin_client, fields(sender))
    listed_page, listed = preview(
        admin_client, fields(sender, audience_type="uids", uids="\n".join(typed))
    )

    assert figures == as_figures(by_api)
    assert figures["audience"] == "6 recipients"
    assert (figures["blocked"], figures["quota"], figures["would_deliver"]) == ("1", "2", "3")
    assert listed == as_figures(listed_by_api)
    assert (listed["invalid"], listed["duplicate"]) == ("1", "1")
    assert 'id="dry-run"' in page
    assert f'name="sender_uid" value="{sender}"' in page
    assert 'name="name" value="Spring sale"' in page
    assert "Spring sale 🌸 &lt;b&gt;20%&lt;/b&gt; off</textarea>" in page
    assert '<option value="uids" selected>' in listed_page
    assert "oops" in listed_page
    assert stored() == before  # the dry run stored nothing


def test_preview_figures_have_thousands_separators(admin_client: Client, uids: Uids) -> None:
    sender = uids(1)[0]
    shop(sender)
    many = "\n".join(str(u) for u in uids(1234))

    _, figures = preview(admin_client, fields(sender, audience_type="uids", uids=many))

    assert figures["audience"] == "1,234 recipients"
    assert figures["would_deliver"] == "1,234"


def test_preview_of_the_priority_channel_and_a_daily_budget(
    admin_client: Client, uids: Uids
) -> None:
    sender, fan = uids(2)
    shop(sender, priority=True)
    follow(sender, [fan])
    SenderPolicy.objects.filter(sender_uid=sender).update(daily_budget=2500)

    _, daily = preview(admin_client, fields(sender))
    _, priority = preview(admin_client, fields(sender, channel="priority"))

    assert daily["budget_remaining"] == "2,500 recipients"
    assert priority["budget_remaining"] == "not used on the priority channel"


# -- launch -----------------------------------------------------------------------------------
def test_launch_creates_one_campaign_however_often_the_form_is_posted(
    admin_client: Client, uids: Uids
) -> None:
    sender, *fans = uids(3)
    shop(sender)
    follow(sender, fans)
    data = fields(sender, idempotency_key=form_key(admin_client))

    first = launch(admin_client, data)
    again = launch(admin_client, data)

    campaign = Campaign.objects.get(sender_uid=sender)
    page = f"{CAMPAIGNS}{campaign.pk}/change/"
    assert first.redirect_chain == [(page, 302)]
    assert notes(first) == [f"Campaign {campaign.pk} was launched on the daily channel."]
    assert again.redirect_chain == [(page, 302)]
    assert notes(again) == [
        f"This form already launched campaign {campaign.pk}: nothing new was created."
    ]
    assert (campaign.name, campaign.client, campaign.status) == ("Spring sale", None, "running")
    assert Message.objects.get(msgkey=campaign.msgkey or 0).body == {
        "type": "text",
        "text": "Spring sale 🌸 <b>20%</b> off",
    }
    assert drive(campaign.pk).delivered == 2
    assert received(fans[0], sender) == [campaign.msgkey]
    entry = LogEntry.objects.get(object_id=str(campaign.pk), action_flag=ADDITION)
    assert entry.object_repr == f"campaign {campaign.pk} · Spring sale"


@pytest.mark.django_db(transaction=True)
def test_two_submits_at_once_create_one_campaign(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    follow(sender, [fan])
    User.objects.create_superuser("boss", password="pw")
    clients = [Client(), Client()]
    for one in clients:
        one.login(username="boss", password="pw")
    data = fields(sender, idempotency_key=form_key(clients[0]), _launch="Launch campaign")
    answers: list[int] = []

    def submit(one: Client) -> None:
        try:
            answers.append(one.post(ADD, data).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(one,)) for one in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert answers == [302, 302]
    campaign = Campaign.objects.get(sender_uid=sender)
    services.campaign_cancel(campaign_id=campaign.pk)


def test_a_scheduled_launch_waits(admin_client: Client, uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    follow(sender, [fan])
    later = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)

    response = launch(
        admin_client, fields(sender, scheduled_at=later.strftime("%Y-%m-%dT%H:%M:%S"))
    )

    campaign = Campaign.objects.get(sender_uid=sender)
    assert (campaign.status, campaign.scheduled_at) == (CampaignStatus.SCHEDULED, later)
    when = later.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert notes(response) == [
        f"Campaign {campaign.pk} was created and is scheduled to start at {when}."
    ]


def test_an_uploaded_file_is_previewed_then_launched(admin_client: Client, uids: Uids) -> None:
    sender, a, b, c = uids(4)
    shop(sender)
    block(sender, [c])
    content = f"{a}\r\nnot-a-uid\n{b}\n{a}\n{c}\n".encode()
    data = fields(sender, audience_type="upload", idempotency_key=form_key(admin_client))

    page, figures = preview(admin_client, {**data, "file": SimpleUploadedFile("fans.csv", content)})
    kept = Audience.objects.get(sender_uid=sender)
    response = launch(admin_client, {**data, "audience_id": str(kept.pk)})

    assert figures == {
        "audience": "3 recipients",
        "blocked": "1",
        "quota": "0",
        "invalid": "1",
        "duplicate": "1",
        "would_deliver": "2",
        "budget_remaining": "unlimited",
    }
    assert f'name="audience_id" value="{kept.pk}"' in page
    assert f"Using audience {kept.pk} (fans.csv: 3 uids; 1 invalid and 1 duplicate lines)" in page
    assert (kept.count, kept.name) == (3, "fans.csv")
    campaign = Campaign.objects.get(sender_uid=sender)
    assert response.redirect_chain == [(f"{CAMPAIGNS}{campaign.pk}/change/", 302)]
    assert (campaign.audience_type, campaign.audience_id) == ("upload", kept.pk)
    assert Audience.objects.filter(sender_uid=sender).count() == 1  # stored once
    done = drive(campaign.pk)
    assert (done.delivered, done.skipped_blocked, done.skipped_invalid) == (2, 1, 1)


def test_a_file_can_be_launched_without_a_preview(admin_client: Client, uids: Uids) -> None:
    sender, a, b = uids(3)
    shop(sender)
    upload = SimpleUploadedFile("fans.txt", f"{a}\n{b}\n".encode())

    launch(admin_client, fields(sender, audience_type="upload", file=upload))

    campaign = Campaign.objects.get(sender_uid=sender)
    assert campaign.audience is not None
    assert campaign.audience.count == 2


# -- bad input --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"sender_uid": "abc"}, "sender_uid", "Enter the sender's uid: digits only."),
        ({"sender_uid": "99999999999999999999"}, "sender_uid", "between 1 and 2^63-1"),
        ({"sender_uid": "UNKNOWN"}, "sender_uid", "Unknown sender"),
        ({"text": ""}, "text", "This field is required."),
        ({"text": "x" * 5001}, "text", "at most 5000 characters"),
        ({"name": "n" * 201}, "name", "at most 200 characters"),
        ({"audience_type": "uids", "uids": " \n, "}, "uids", "Enter at least one uid"),
        ({"audience_type": "uids", "uids": "abc\n-1"}, "uids", "Uids holds no valid uid."),
        ({"audience_type": "upload"}, "file", "Choose a file of uids"),
        ({"audience_type": "nobody"}, "audience_type", "Select a valid choice."),
        ({"channel": "priority"}, "channel", "not allowed on the priority channel"),
        ({"scheduled_at": "tomorrow"}, "scheduled_at", "Datetime has wrong format"),
        (
            {
                "audience_type": "followers_filter",
                "followed_after": "2026-05-01T00:00",
                "followed_before": "2026-04-01T00:00",
            },
            "followed_before",
            "must be after followed_after",
        ),
        (
            {"audience_type": "followers_filter", "exclude_uids": "12, x"},
            "exclude_uids",
            "Exclude uids: entry 2 must be a 64-bit integer id.",
        ),
    ],
)
@pytest.mark.parametrize("button", ["_preview", "_launch"])
def test_bad_input_says_why_keeps_what_was_typed_and_stores_nothing(
    admin_client: Client, uids: Uids, change: dict[str, str], field: str, says: str, button: str
) -> None:
    sender, unknown, fan = uids(3)
    shop(sender)
    follow(sender, [fan])
    data = fields(sender, idempotency_key=form_key(admin_client), **change)
    if data["sender_uid"] == "UNKNOWN":
        data["sender_uid"] = str(unknown)
    before = stored()

    response = admin_client.post(ADD, {**data, button: "x"})
    page = response.content.decode()

    assert response.status_code == 200
    assert 'class="errornote"' in page
    errors = errors_of(page)
    assert len(errors) == 1, errors
    assert says in errors[0]
    assert f'class="form-row errors field-{field}"' in page
    assert "Spring sale 🌸 &lt;b&gt;20%&lt;/b&gt; off" in page or field == "text"
    assert f'value="{data["idempotency_key"]}"' in page
    assert 'id="dry-run"' not in page
    assert stored() == before


@pytest.mark.parametrize("button", ["_preview", "_launch"])
def test_a_file_without_a_uid_is_refused_and_not_kept(
    admin_client: Client, uids: Uids, button: str
) -> None:
    sender = uids(1)[0]
    shop(sender)
    before = stored()
    upload = SimpleUploadedFile("bad.txt", b"one\ntwo\n\x00\xff\n")

    response = admin_client.post(
        ADD, {**fields(sender, audience_type="upload", file=upload), button: "x"}
    )
    page = response.content.decode()

    assert response.status_code == 200
    assert errors_of(page) == ["No valid uid in the upload (3 invalid lines)."]
    assert "Nothing was stored: choose the file again." in page
    assert stored() == before


def test_a_refused_launch_with_a_file_stores_neither(admin_client: Client, uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)  # not allowed on the priority channel
    before = stored()
    upload = SimpleUploadedFile("fans.txt", f"{fan}\n".encode())

    response = launch(
        admin_client, fields(sender, audience_type="upload", channel="priority", file=upload)
    )

    assert "not allowed on the priority channel" in errors_of(response.content.decode())[0]
    assert stored() == before


# -- the name, the text and the links ---------------------------------------------------------
def test_the_list_and_page_show_name_and_text_and_link_the_message_both_ways(
    admin_client: Client, uids: Uids
) -> None:
    sender, fan = uids(2)
    shop(sender)
    api = campaigns_api(sender)
    long_text = "Autumn <sale> " + "x" * 80
    named = create(api, sender, {"type": "uids", "uids": [fan]}, name="Spring sale")
    unnamed = services.campaign_submit(
        sender_uid=sender,
        content={"type": "text", "text": long_text},
        audience_spec={"type": "uids", "uids": [str(fan)]},
        channel="daily",
    )[0]
    campaign = Campaign.objects.get(pk=named["id"])

    listing = admin_client.get(CAMPAIGNS).content.decode()
    by_name = admin_client.get(CAMPAIGNS, {"q": "spring"}).content.decode()
    page = admin_client.get(f"{CAMPAIGNS}{campaign.pk}/change/").content.decode()
    message = admin_client.get(f"/admin/messaging/message/{campaign.msgkey}/change/")

    assert named["name"] == "Spring sale"
    assert f'<strong class="campaign-title">{campaign.pk} · Spring sale</strong><br>' in listing
    assert f'<strong class="campaign-title">{unnamed.pk}</strong><br>' in listing
    assert '<span class="campaign-text">Spring sale 🌸</span>' in listing
    assert f'<span class="campaign-text">Autumn &lt;sale&gt; {"x" * 45}…</span>' in listing
    assert f"/admin/bulk/campaign/{campaign.pk}/change/" in by_name
    assert f"/admin/bulk/campaign/{unnamed.pk}/change/" not in by_name
    assert f"campaign {campaign.pk} · Spring sale" in page
    assert '<div class="campaign-content">Spring sale 🌸</div>' in page
    assert (
        f'<a href="/admin/messaging/message/{campaign.msgkey}/change/">'
        f"message {campaign.msgkey}</a> (normal)"
    ) in page
    assert message.status_code == 200
    assert (
        f'<a href="{CAMPAIGNS}{campaign.pk}/change/">campaign {campaign.pk} · Spring sale</a>'
        in message.content.decode()
    )


# -- the audit trail --------------------------------------------------------------------------
HISTORY_ROW = re.compile(r"<td>([^<]*)</td>\s*<td>([^<]*)</td>\s*</tr>")


def history(client: Client, campaign: Campaign) -> list[tuple[str, str]]:
    """The (user, action) rows of the campaign's History page, oldest first."""
    response = client.get(f"{CAMPAIGNS}{campaign.pk}/history/")
    assert response.status_code == 200
    page = response.content.decode()
    return [(html.unescape(u), html.unescape(a)) for u, a in HISTORY_ROW.findall(page)]


def entries(campaign: Campaign) -> list[tuple[int, str, str]]:
    found = LogEntry.objects.filter(object_id=str(campaign.pk)).order_by("pk")
    return [(e.action_flag, e.change_message, e.user.username) for e in found]


def test_page_buttons_and_list_actions_are_written_to_the_history(
    admin_client: Client, uids: Uids
) -> None:
    sender, fan = uids(2)
    shop(sender)
    campaign = services.campaign_submit(
        sender_uid=sender,
        content={"type": "text", "text": "hello"},
        audience_spec={"type": "uids", "uids": [str(fan)]},
        channel="daily",
    )[0]
    user = User.objects.get(is_superuser=True).username

    def press(action: str) -> None:
        admin_client.post(f"{CAMPAIGNS}{campaign.pk}/act/{action}/")

    def select(action: str) -> None:
        admin_client.post(CAMPAIGNS, {"action": action, "_selected_action": [campaign.pk]})

    press("pause")
    press("pause")  # already paused: no entry
    select("pause_selected")  # the same from the list
    select("resume_selected")
    press("resume")  # already running
    press("cancel")
    select("cancel_selected")
    press("resume")  # refused: no entry
    select("recall_selected")
    press("recall")  # already recalled
    shown = history(admin_client, campaign)

    assert entries(campaign) == [
        (CHANGE, "Paused (was running).", user),
        (CHANGE, "Resumed (was paused).", user),
        (CHANGE, "Cancelled (was running).", user),
        (CHANGE, "Recalled its message from every recipient (0 batches).", user),
    ]
    assert shown == [(user, message) for _, message, user in entries(campaign)]


def test_duplicate_and_create_are_written_to_both_histories(
    admin_client: Client, uids: Uids
) -> None:
    sender, fan = uids(2)
    shop(sender)
    follow(sender, [fan])
    launch(admin_client, fields(sender, name="Winter"))
    original = Campaign.objects.get(sender_uid=sender)
    drive(original.pk)

    admin_client.post(f"{CAMPAIGNS}{original.pk}/act/duplicate/")
    copy = Campaign.objects.exclude(pk=original.pk).get(sender_uid=sender)

    assert copy.name == "Winter"
    assert [(flag, text) for flag, text, _ in entries(original)] == [
        (ADDITION, "Created from the admin: followers audience on the daily channel (running)."),
        (CHANGE, f"Duplicated as campaign {copy.pk}."),
    ]
    assert [(flag, text) for flag, text, _ in entries(copy)] == [
        (ADDITION, f"Created as a duplicate of campaign {original.pk}.")
    ]
    assert history(admin_client, original)[-1][1] == f"Duplicated as campaign {copy.pk}."
    services.campaign_cancel(campaign_id=copy.pk)
