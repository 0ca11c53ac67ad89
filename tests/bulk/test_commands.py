"""``manage.py campaign_send`` and ``campaign_watch``: what an operator types, sees and gets."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone
from rich.console import Console

from bulk import services
from bulk.management.commands.campaign_watch import PlainLines
from bulk.models import Audience, Campaign, CampaignStatus, SenderPolicy
from messaging.models import Message
from tests.bulk.helpers import assert_delivered, block, drive, follow, received, shop
from tests.conftest import ROOT, worker_env

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]


def run(*args: Any) -> str:
    out = StringIO()
    call_command(*[str(a) for a in args], stdout=out)
    return out.getvalue()


def created_id(output: str) -> int:
    found = re.search(r"Campaign (\d+) created", output)
    assert found, output
    return int(found.group(1))


def refused(*args: Any) -> str:
    with pytest.raises(CommandError) as caught:
        run(*args)
    message = str(caught.value)
    assert "\n" not in message
    return message


def content_of(campaign: Campaign) -> Message:
    assert campaign.msgkey is not None
    return Message.objects.get(msgkey=campaign.msgkey)


def stored() -> tuple[int, int, int]:
    return Campaign.objects.count(), Audience.objects.count(), Message.objects.count()


# -- campaign_send -------------------------------------------------------------------------------
def test_send_to_followers_skips_those_who_blocked(uids: Uids) -> None:
    sender, *fans = uids(5)
    shop(sender)
    follow(sender, fans)
    block(sender, fans[:1])

    output = run("campaign_send", "--sender", sender, "--text", "Hello 👋", "--followers")

    assert f"running on daily, sender {sender}" in output
    campaign = drive(created_id(output))
    assert (campaign.delivered, campaign.skipped_blocked) == (3, 1)
    assert content_of(campaign).body == {"type": "text", "text": "Hello 👋"}
    assert_delivered(sender, campaign, set(fans[1:]), set(fans[:1]))


def test_a_named_campaign_keeps_its_name(uids: Uids) -> None:
    sender, *fans = uids(3)
    shop(sender)
    follow(sender, fans)
    output = run(
        "campaign_send", "--sender", sender, "--text", "hi", "--followers", "--name", "Spring sale"
    )
    campaign = Campaign.objects.get(pk=created_id(output))
    assert campaign.name == "Spring sale"
    assert str(campaign).endswith("Spring sale")


def test_send_to_a_uids_file_stores_it_as_an_audience(uids: Uids, tmp_path: Path) -> None:
    sender, a, b, c = uids(4)
    shop(sender)
    path = tmp_path / "vip.txt"
    path.write_bytes(f"{a}\r\n{b}\nnope\n{b}\n\xff\n{c}".encode("latin-1"))

    output = run(
        "campaign_send",
        "--sender",
        sender,
        "--text",
        "hi",
        "--uids-file",
        path,
        "--channel",
        "daily",
    )

    assert "uids, 2 invalid and 1 duplicate lines" in output
    campaign = drive(created_id(output))
    assert campaign.audience is not None
    assert (campaign.audience.name, campaign.audience.count) == ("vip.txt", 3)
    assert (campaign.delivered, campaign.skipped_invalid, campaign.skipped_duplicate) == (3, 2, 1)
    assert_delivered(sender, campaign, {a, b, c}, set())


def test_send_to_explicit_uids_and_to_a_stored_audience(uids: Uids, tmp_path: Path) -> None:
    sender, a, b, c = uids(4)
    shop(sender, limit=0)  # no per-receiver cap: the same people get all three
    path = tmp_path / "list.txt"
    path.write_text(f"{a}\n{c}\n")

    first = run("campaign_send", "--sender", sender, "--text", "one", "--uids", f"{a}, {b},x")
    second = run("campaign_send", "--sender", sender, "--text", "two", "--uids-file", path)
    audience_id = re.search(r"Audience (\d+) stored from list.txt: 2 uids", second)
    assert audience_id is not None, second
    card = '{"type": "card", "title": "Sale", "body": "", "url": "https://example.com/s"}'
    third = run(
        "campaign_send",
        "--sender",
        sender,
        "--content-json",
        card,
        "--audience",
        audience_id.group(1),
    )

    one, two, three = (drive(created_id(output)) for output in (first, second, third))
    assert (one.delivered, one.skipped_invalid) == (2, 1)
    assert (two.delivered, three.delivered) == (2, 2)
    assert two.audience_id == three.audience_id
    assert received(a, sender) == [three.msgkey, two.msgkey, one.msgkey]
    assert received(b, sender) == [one.msgkey]
    assert received(c, sender) == [three.msgkey, two.msgkey]
    assert content_of(three).type == "card"


def test_send_with_a_follow_window_and_exclusions(uids: Uids) -> None:
    sender, old, new, excluded = uids(4)
    shop(sender)
    now = timezone.now()
    follow(sender, [old], now - timedelta(days=40))
    follow(sender, [new, excluded], now - timedelta(days=2))

    output = run(
        "campaign_send",
        "--sender",
        sender,
        "--text",
        "welcome",
        "--followers",
        "--followed-after",
        (now - timedelta(days=7)).isoformat(),
        "--exclude-uids",
        excluded,
    )

    campaign = drive(created_id(output))
    assert campaign.audience_type == "followers_filter"
    assert_delivered(sender, campaign, {new}, {old, excluded})


def test_dry_run_prints_the_counts_and_stores_nothing(uids: Uids, tmp_path: Path) -> None:
    sender, *fans = uids(5)
    shop(sender)
    SenderPolicy.objects.filter(sender_uid=sender).update(daily_budget=100)
    follow(sender, fans)
    block(sender, fans[:1])
    drive(
        services.campaign_create(
            sender_uid=sender,
            content={"type": "text", "text": "x"},
            audience=services.AudienceChoice("followers", {}, None),
            channel="daily",
        )[0].pk
    )  # reaches the other three: they are now at their cap
    path = tmp_path / "uids.txt"
    path.write_text("\n".join([*map(str, fans), "junk", str(fans[0])]))
    before = stored()

    followers = run("campaign_send", "--sender", sender, "--text", "hi", "--followers", "--dry-run")
    listed = run(
        "campaign_send", "--sender", sender, "--text", "hi", "--uids-file", path, "--dry-run"
    )

    assert followers == (
        "Dry run: 4 recipients; would skip 1 blocked, 3 quota, 0 invalid, 0 duplicate; "
        "would deliver 0; budget remaining today: 97. Nothing was stored.\n"
    )
    assert "would skip 1 blocked, 3 quota, 1 invalid, 1 duplicate" in listed
    assert "Audience" not in listed
    assert stored() == before


def test_send_and_watch_on_real_workers(workers: Any, uids: Uids) -> None:
    sender, *fans = uids(21)
    shop(sender, priority=True)
    follow(sender, fans)
    workers.start()

    output = run(
        "campaign_send",
        "--sender",
        sender,
        "--text",
        "flash sale",
        "--followers",
        "--channel",
        "priority",
        "--watch",
        "--interval",
        "0.2",
        "--timeout",
        "60",
    )

    campaign = Campaign.objects.get(pk=created_id(output))
    assert campaign.status == CampaignStatus.FINISHED
    assert f"Campaign {campaign.pk} finished: 20 delivered of 20" in output
    assert_delivered(sender, campaign, set(fans), set())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--text", "hi", "--followers", "--sender", "abc"], "sender_uid: must be a 64-bit"),
        (["--text", "", "--followers"], "content.text"),
        (["--content-json", "{oops", "--followers"], "--content-json is not valid JSON"),
        (["--content-json", '{"type": "video"}', "--followers"], "content.type"),
        (["--text", "hi", "--followers", "--followed-after", "soon"], "audience.followed_after"),
        (["--text", "hi", "--uids", "1", "--followed-after", "2024-01-01"], "need --followers"),
        (["--text", "hi", "--followers", "--channel", "priority"], "not allowed on the priority"),
        (["--text", "hi", "--followers", "--channel", "express"], "invalid choice"),
        (["--text", "hi"], "one of the arguments --followers"),
        (["--text", "hi", "--followers", "--uids", "1"], "not allowed with argument"),
        (["--text", "hi", "--audience", "999999999999"], "No such audience"),
        (["--text", "hi", "--uids", "x,y"], "no valid uid"),
        (["--text", "hi", "--uids-file", "/nonexistent/uids.txt"], "Cannot read /nonexistent"),
        (["--text", "hi", "--followers", "--scheduled-at", "tomorrow"], "scheduled_at"),
        (["--text", "hi", "--followers", "--name", "n" * 201], "name"),
    ],
)
def test_bad_input_is_one_readable_line(uids: Uids, args: list[str], says: str) -> None:
    sender = shop(uids(1)[0])
    with_sender = args if "--sender" in args else ["--sender", str(sender), *args]
    before = stored()

    message = refused("campaign_send", *with_sender)

    assert says in message
    assert stored() == before


def test_an_unknown_sender_and_an_empty_file_are_refused(uids: Uids, tmp_path: Path) -> None:
    nobody, sender = uids(2)
    shop(sender)
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"\n\x00\n")

    assert "Unknown sender" in refused(
        "campaign_send", "--sender", nobody, "--text", "hi", "--followers"
    )
    assert "No valid uid in" in refused(
        "campaign_send", "--sender", sender, "--text", "hi", "--uids-file", empty
    )
    assert not Audience.objects.exists()


# -- campaign_watch ------------------------------------------------------------------------------
def test_watch_ends_with_a_summary_once_the_campaign_is_over(uids: Uids) -> None:
    sender, *fans = uids(4)
    shop(sender)
    follow(sender, fans)
    block(sender, fans[:1])
    campaign = drive(
        created_id(run("campaign_send", "--sender", sender, "--text", "x", "--followers"))
    )

    output = run("campaign_watch", campaign.pk)

    assert "3/3" in output
    assert output.rstrip().endswith(
        f"Campaign {campaign.pk} finished: 2 delivered of 3; skipped 0 quota, 1 blocked, "
        "0 invalid, 0 duplicate; 0 failed."
    )


def test_watch_reports_a_pause_and_exits_on_it_when_asked(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    campaign_id = created_id(run("campaign_send", "--sender", sender, "--text", "x", "--uids", fan))
    services.campaign_pause(campaign_id=campaign_id, reason="budget")

    output = run("campaign_watch", campaign_id, "--exit-on-pause")
    message = refused("campaign_watch", campaign_id, "--interval", "0.05", "--timeout", "0.3")

    assert f"Campaign {campaign_id} paused: budget" in output
    assert message == f"Campaign {campaign_id} still paused at the timeout."


def test_watch_names_the_database_setting_when_the_database_refuses_it(uids: Uids) -> None:
    """A store that does not answer is waited out (tests/bulk/test_commands_freeze.py); one
    that refuses the credentials is a configuration error: exit 1 naming the setting."""
    sender, fan = uids(2)
    shop(sender)
    campaign_id = created_id(run("campaign_send", "--sender", sender, "--text", "x", "--uids", fan))
    env = worker_env(settings.DATABASES["default"]["NAME"])
    env["DATABASE_URL"] = env["DATABASE_URL"].replace("missive:missive@", "missive:wrong@", 1)
    assert "wrong@" in env["DATABASE_URL"]
    command = [sys.executable, "manage.py", "campaign_watch", str(campaign_id), "--timeout", "30"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr
    db = settings.DATABASES["default"]
    where = f"{db['HOST']}:{db['PORT'] or 3306}"
    assert f"DATABASE_URL names {where} but cannot connect there" in done.stderr, done.stderr
    assert "OperationalError 1045: Access denied" in done.stderr, done.stderr


def test_watch_into_a_pipe_prints_a_line_at_each_status_and_every_10_s(uids: Uids) -> None:
    sender, fan = uids(2)
    shop(sender)
    campaign = Campaign.objects.get(
        pk=created_id(run("campaign_send", "--sender", sender, "--text", "x", "--uids", fan))
    )
    out = StringIO()
    campaign.planned, campaign.total = True, 1  # as once its workers have planned it
    clock = iter([100.0, 101.0, 102.0, 112.5, 113.0])
    lines = PlainLines(Console(file=out), clock=lambda: next(clock))  # not a terminal
    progress = {"rate_per_s": 1234.5, "eta_s": 61.0}
    for status in ("running", "running", "paused", "paused", "finished"):
        campaign.status = status
        lines.show(campaign, progress)

    assert out.getvalue().splitlines() == [
        f"Campaign {campaign.pk} running: 0 of 1 (0.0%), 1,234.5/s, eta 61 s",  # the first poll
        f"Campaign {campaign.pk} paused: 0 of 1 (0.0%), 1,234.5/s, eta 61 s",  # a new status
        f"Campaign {campaign.pk} paused: 0 of 1 (0.0%), 1,234.5/s, eta 61 s",  # 10 s later
    ]  # nothing at "finished": the summary line says it


def test_watch_refuses_unknown_and_malformed_ids() -> None:
    out = StringIO()
    with pytest.raises(CommandError, match=r"^No campaign 999999999999\.$"):
        call_command("campaign_watch", "999999999999", stdout=out, stderr=out)
    assert out.getvalue() == ""  # no empty progress bar before the one line
    assert "invalid campaign_id value" in refused("campaign_watch", "abc")
    assert "invalid positive_float value" in refused("campaign_watch", "1", "--interval", "0")
