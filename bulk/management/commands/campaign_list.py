"""``manage.py campaign_list [--status S[,S]] [--sender U[,U]] [--limit N] [--json]``

The newest campaigns first, at most ``--limit`` (default 50), filtered by status and sender (list
flags take commas, repeats or several values: infra/cli.py). A table (id, status, channel,
sender, processed of total, delivered, skipped, failed, created, name), or with ``--json`` a list
of the API's campaign bodies (``GET /campaigns/{id}``). Skipped is the recipients the quota or a
block held back, so that delivered + skipped + failed reach the total: an uploaded list's invalid
and repeated lines are not recipients (they are outside the total; ``--json`` has each count).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db.models import QuerySet
from rich.table import Table

from bulk.apis import campaign_body
from bulk.management.commands.campaign_watch import console_for
from bulk.models import Campaign, CampaignStatus
from infra.cli import CommaList, positive_id

COLUMNS = ("id", "status", "channel", "sender", "processed", "delivered", "skipped", "failed")


def status(text: str) -> str:
    if text not in CampaignStatus.values:
        raise ValueError(text)
    return text


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(text)
    return value


def campaigns(statuses: list[str], senders: list[int], limit: int) -> QuerySet[Campaign]:
    found = Campaign.objects.order_by("-pk")
    if statuses:
        found = found.filter(status__in=statuses)
    if senders:
        found = found.filter(sender_uid__in=senders)
    return found[:limit]


def row(campaign: Campaign) -> list[str]:
    skipped = campaign.skipped_quota + campaign.skipped_blocked  # recipients held back
    return [
        str(campaign.pk),
        campaign.status,
        campaign.channel,
        str(campaign.sender_uid),
        f"{campaign.processed:,} of {campaign.total:,}",
        f"{campaign.delivered:,}",
        f"{skipped:,}",
        f"{campaign.failed:,}",
        campaign.created_at.strftime("%Y-%m-%d %H:%M"),
        campaign.name,
    ]


class Command(BaseCommand):
    help = "List campaigns, newest first, as a table or JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        choices = ",".join(CampaignStatus.values)
        parser.add_argument("--status", type=status, action=CommaList, metavar=choices)
        parser.add_argument("--sender", type=positive_id, action=CommaList, metavar="UID")
        parser.add_argument("--limit", type=positive_int, default=50, help="at most N (50)")
        parser.add_argument("--json", action="store_true", help="print JSON, not a table")

    def handle(self, *args: Any, **options: Any) -> None:
        found = list(campaigns(options["status"], options["sender"], options["limit"]))
        if options["json"]:
            body = [campaign_body(c) for c in found]
            self.stdout.write(json.dumps(body, default=str, indent=2))
            return
        table = Table(*COLUMNS, "created", "name", box=None)
        for campaign in found:
            table.add_row(*row(campaign))
        console = console_for(self)
        console.width, console.no_color = 200, True
        console.print(table)
