"""What the campaign control commands share (``campaign_pause``, ``_resume``, ``_cancel``,
``_recall``): the same actions as the admin's buttons (``bulk.admin_views.ACTIONS``, which call
``bulk.services`` and ``messaging.services.message_recall`` as the API does), one line per
campaign served or ``--json``, and a non-zero exit with ONE line on stderr naming every campaign
that was not found or whose status does not allow the action, and why (the other ids of the same
call are still served).

    manage.py campaign_pause ID [ID ...] [--json]      (ids may also be comma-separated)

``--json`` prints a list, one object per id: the API's campaign body (``GET /campaigns/{id}``)
plus ``"ok"`` and ``"message"``, or ``{"id", "ok": false, "error"}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from api.errors import MissiveError
from bulk.admin_views import ACTIONS
from bulk.apis import campaign_body
from bulk.models import Campaign
from infra.cli import CommaList, positive_id


@dataclass(frozen=True)
class Result:
    campaign_id: int
    ok: bool
    text: str
    body: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        if self.body is None:
            return {"id": str(self.campaign_id), "ok": False, "error": self.text}
        return {**self.body, "ok": self.ok, "message": self.text}


def apply(action: str, campaign_id: int) -> Result:
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return Result(campaign_id, False, f"No campaign {campaign_id}.")
    try:
        outcome = ACTIONS[action](campaign)
    except MissiveError as exc:
        text = f"Could not {action} campaign {campaign_id}: {exc.detail}"
        return Result(campaign_id, False, text)
    campaign.refresh_from_db()
    return Result(campaign_id, True, outcome.text, campaign_body(campaign))


class CampaignActionCommand(BaseCommand):
    action = ""  # a key of bulk.admin_views.ACTIONS
    done = ""  # its past participle, for the error line

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("campaign_ids", metavar="ID", type=positive_id, action=CommaList)
        parser.add_argument("--json", action="store_true", help="print JSON, not lines")

    def handle(self, *args: Any, **options: Any) -> None:
        results = [apply(self.action, pk) for pk in options["campaign_ids"]]
        failed = [r for r in results if not r.ok]
        if options["json"]:
            self.stdout.write(json.dumps([r.as_json() for r in results], default=str, indent=2))
            if failed:  # the reasons are in the JSON; the exit status and one line say so
                ids = ", ".join(str(r.campaign_id) for r in failed)
                raise CommandError(f"not {self.done}: campaign {ids}")
            return
        for result in results:
            if result.ok:
                self.stdout.write(result.text)
        if failed:
            raise CommandError(" ".join(r.text for r in failed))
