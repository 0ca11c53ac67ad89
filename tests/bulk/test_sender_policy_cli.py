"""``manage.py sender_policy`` as an operator uses it: a sender's policy shown, the priority
channel opened to a sender (its priority campaign, refused before, is then accepted by the API),
caps and budgets changed, and a bad value refused in one line with nothing stored."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from bulk.models import SenderPolicy
from messaging.models import Account
from tests.bulk.helpers import body, campaigns_api, follow

pytestmark = pytest.mark.django_db


def run(*args: Any) -> str:
    out = StringIO()
    call_command("sender_policy", *[str(a) for a in args], stdout=out)
    return out.getvalue()


def business(uid: int) -> int:
    Account.objects.create(uid=uid, kind="business", name=f"shop {uid}")
    return uid


def test_the_priority_channel_opens_to_a_sender_from_the_command_line(uids: Any) -> None:
    sender = business(uids(1)[0])
    follow(sender, uids(3))
    api = campaigns_api(sender)
    priority = body(sender, {"type": "followers"}, channel="priority")
    assert (
        run(sender)
        == f"Sender {sender}: 1 per receiver per 86400 s, no budget, daily channel only.\n"
    )
    status, answer = api.call("POST", "/campaigns", priority)
    assert (status, answer["error"]) == (403, "forbidden")

    shown = run(sender, "--priority-allowed", "yes")

    assert shown == f"Sender {sender}: 1 per receiver per 86400 s, no budget, priority allowed.\n"
    status, answer = api.call("POST", "/campaigns", priority)
    assert status == 201, answer
    assert answer["channel"] == "priority"


def test_caps_and_budgets_change_for_several_senders_at_once_and_show_as_json(uids: Any) -> None:
    a, b = (business(u) for u in uids(2))
    run(f"{a},{b}", "--per-receiver-limit", "0", "--daily-budget", "50000")
    shown = json.loads(run(a, b, "--json"))
    assert [p["sender_uid"] for p in shown] == [str(a), str(b)]
    assert all(p["per_receiver_limit"] == 0 and p["daily_budget"] == 50000 for p in shown)
    assert all(p["priority_allowed"] is False for p in shown)
    assert run(a) == f"Sender {a}: no cap, 50,000 a day, daily channel only.\n"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--per-receiver-limit", "-1"], "Policy numbers cannot be negative."),
        (["--per-receiver-period-s", "0"], "period must be at least one second"),
        (["--priority-allowed", "maybe"], "invalid choice: 'maybe'"),
        (["--daily-budget", "lots"], "invalid int value: 'lots'"),
    ],
)
def test_a_bad_value_is_one_line_and_stores_nothing(
    uids: Any, flags: list[str], message: str
) -> None:
    sender = business(uids(1)[0])
    with pytest.raises(CommandError, match=message) as caught:
        run(sender, *flags)
    assert "\n" not in str(caught.value)
    assert not SenderPolicy.objects.filter(sender_uid=sender).exists()
