"""``manage.py sender_policy UID [UID ...] [--priority-allowed yes|no] [--per-receiver-limit N]
[--per-receiver-period-s S] [--daily-budget N] [--json]``

Shows, or with a flag changes, the sending policy of business accounts (the admin's "Sender
policies", ``bulk.services.sender_policy_set``): how many messages one receiver may get from the
sender per period (0: no cap), the recipients per day on the daily channel (0: no budget), and
whether the sender may use the priority channel. A sender without a stored policy has the
defaults (a cap of 1 a day, no budget, no priority channel); a change stores one. One line per
sender, or ``--json``; a bad value is one line and exit 1, with nothing changed.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from api.errors import MissiveError
from bulk import quotas, services
from bulk.models import SenderPolicy
from infra.cli import CommaList, positive_id

YES_NO = {"yes": True, "no": False}


class Command(BaseCommand):
    help = "Show or change business accounts' sending policies (cap, budget, priority channel)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("sender_uids", metavar="UID", type=positive_id, action=CommaList)
        parser.add_argument("--priority-allowed", choices=sorted(YES_NO))
        parser.add_argument("--per-receiver-limit", type=int, metavar="N", help="0: no cap")
        parser.add_argument("--per-receiver-period-s", type=int, metavar="S")
        parser.add_argument("--daily-budget", type=int, metavar="N", help="0: no budget")
        parser.add_argument("--json", action="store_true", help="print JSON, not lines")

    def handle(self, *args: Any, **options: Any) -> None:
        changes = _changes(options)
        policies = []
        for uid in options["sender_uids"]:
            try:
                policy = (
                    services.sender_policy_set(sender_uid=uid, changes=changes)
                    if changes
                    else quotas.policy_for(uid)
                )
            except MissiveError as exc:
                raise CommandError(f"Sender {uid}: {exc.detail}") from exc
            policies.append(policy)
        if options["json"]:
            self.stdout.write(json.dumps([_as_json(p) for p in policies], indent=2))
            return
        for policy in policies:
            self.stdout.write(_line(policy))


def _changes(options: dict[str, Any]) -> dict[str, int | bool]:
    """The policy fields given on the command line (each flag is its field's name)."""
    given = {name: options[name] for name in services.POLICY_FIELDS if options[name] is not None}
    if "priority_allowed" in given:
        given["priority_allowed"] = YES_NO[given["priority_allowed"]]
    return given


def _as_json(policy: SenderPolicy) -> dict[str, Any]:
    return {"sender_uid": str(policy.sender_uid)} | {
        name: getattr(policy, name) for name in services.POLICY_FIELDS
    }


def _line(policy: SenderPolicy) -> str:
    cap = policy.per_receiver_limit
    per = f"{cap} per receiver per {policy.per_receiver_period_s} s" if cap else "no cap"
    budget = f"{policy.daily_budget:,} a day" if policy.daily_budget else "no budget"
    priority = "priority allowed" if policy.priority_allowed else "daily channel only"
    return f"Sender {policy.sender_uid}: {per}, {budget}, {priority}."
