"""``manage.py campaign_send``: create a campaign from the shell, through the API's own path.

    campaign_send --sender UID (--text "..." | --content-json '{...}')
                  (--followers | --uids-file PATH | --audience ID | --uids 1,2,3)
                  [--followed-after ISO] [--followed-before ISO] [--exclude-uids 4,5]
                  [--channel daily|priority] [--scheduled-at ISO] [--dry-run]
                  [--watch [--interval S] [--timeout S]]

The options become the body of ``POST /campaigns`` and are validated by the same serializer, then
created by the same services (``bulk.services.campaign_submit`` / ``campaign_preview``), so the
CLI refuses exactly what the API refuses, as one readable line (CommandError, exit 1).
``--uids-file`` streams the file into a stored audience first (printed, reusable with
``--audience``); with ``--dry-run`` even that is rolled back, so a dry run stores nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from rest_framework.exceptions import ValidationError

from api.errors import MissiveError
from api.exceptions import flatten
from bulk import services
from bulk.management.commands.campaign_watch import console_for, positive_float, watch
from bulk.models import Audience, Campaign
from bulk.serializers import CampaignCreateIn, upload_lines
from infra.cli import CommaList

CHUNK_BYTES = 64 * 1024
FILTERS = ("followed_after", "followed_before", "exclude_uids")


class Command(BaseCommand):
    help = "Create (or dry-run) a bulk campaign, optionally watching it to the end."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sender", required=True, help="the business account's uid")
        content = parser.add_mutually_exclusive_group(required=True)
        content.add_argument("--text", help="a text message")
        content.add_argument("--content-json", help='e.g. {"type": "card", "title": ...}')
        audience = parser.add_mutually_exclusive_group(required=True)
        audience.add_argument("--followers", action="store_true", help="the sender's followers")
        audience.add_argument("--uids-file", metavar="PATH", help="one uid per line")
        audience.add_argument("--audience", metavar="ID", help="an uploaded audience")
        audience.add_argument(
            "--uids", metavar="1,2,3", action=CommaList, default=None, help="explicit uids"
        )
        parser.add_argument("--followed-after", metavar="ISO", help="with --followers")
        parser.add_argument("--followed-before", metavar="ISO", help="with --followers")
        parser.add_argument(
            "--exclude-uids", metavar="4,5", action=CommaList, default=None, help="with --followers"
        )
        parser.add_argument("--name", default="", help="shown in the admin (at most 200 chars)")
        parser.add_argument("--channel", choices=["daily", "priority"], default="daily")
        parser.add_argument("--scheduled-at", metavar="ISO", help="start later")
        parser.add_argument("--dry-run", action="store_true", help="count, send nothing")
        parser.add_argument("--watch", action="store_true", help="follow it to the end")
        parser.add_argument("--interval", type=positive_float, default=0.5, help="--watch poll")
        parser.add_argument("--timeout", type=positive_float, help="--watch gives up after N s")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["dry_run"]:
                self._dry_run(options)
                return
            campaign = self._create(options)
        except MissiveError as exc:
            raise CommandError(_one_line(exc.detail, exc.fields)) from exc
        except ValidationError as exc:
            raise CommandError(_one_line("Invalid input.", flatten(exc.detail))) from exc
        if options["watch"]:
            watch(
                campaign.pk,
                console=console_for(self),
                interval=options["interval"],
                timeout=options["timeout"],
            )

    # -- the two paths -------------------------------------------------------------------------
    def _create(self, options: dict[str, Any]) -> Campaign:
        data = self._validated(options)
        campaign, _ = services.campaign_submit(
            sender_uid=data["sender_uid"],
            content=data["content"],
            audience_spec=data["audience"],
            channel=data["channel"],
            scheduled_at=data["scheduled_at"],
            name=data.get("name") or "",
        )
        self.stdout.write(
            f"Campaign {campaign.pk} created: {campaign.status} on {campaign.channel}, "
            f"sender {campaign.sender_uid}."
        )
        return campaign

    def _dry_run(self, options: dict[str, Any]) -> None:
        with transaction.atomic():  # a --uids-file audience is rolled back with the rest
            data = self._validated(options)
            preview = services.campaign_preview(
                sender_uid=data["sender_uid"],
                audience_spec=data["audience"],
                channel=data["channel"],
            )
            transaction.set_rollback(True)
        budget = "unlimited" if preview.budget_remaining is None else preview.budget_remaining
        self.stdout.write(
            f"Dry run: {preview.audience} recipients; would skip {preview.would_skip_blocked} "
            f"blocked, {preview.would_skip_quota} quota, {preview.would_skip_invalid} invalid, "
            f"{preview.would_skip_duplicate} duplicate; would deliver {preview.would_deliver}; "
            f"budget remaining today: {budget}. Nothing was stored."
        )

    # -- options → the API's request body ------------------------------------------------------
    def _validated(self, options: dict[str, Any]) -> dict[str, Any]:
        body = {
            "sender_uid": options["sender"],
            "content": _content(options),
            "audience": {"type": "followers"},
            "channel": options["channel"],
            "scheduled_at": options["scheduled_at"],
        }
        if options["name"]:
            body["name"] = options["name"]
        _checked(body)  # the rest first: a bad option must not cost a stored --uids-file
        body["audience"] = self._audience(options)
        return _checked(body)

    def _audience(self, options: dict[str, Any]) -> dict[str, Any]:
        filters = {name: options[name] for name in FILTERS if options[name] is not None}
        if filters and not options["followers"]:
            raise CommandError(
                "--followed-after/--followed-before/--exclude-uids need --followers."
            )
        if options["followers"]:
            return {"type": "followers_filter", **filters} if filters else {"type": "followers"}
        if options["uids"] is not None:
            return {"type": "uids", "uids": options["uids"]}
        if options["audience"] is not None:
            return {"type": "upload", "audience_id": options["audience"]}
        path = Path(options["uids_file"])
        stored = self._store_file(path, options["sender"])
        if not options["dry_run"]:
            self.stdout.write(
                f"Audience {stored.pk} stored from {path.name}: {stored.count} uids, "
                f"{stored.invalid_lines} invalid and {stored.duplicate_lines} duplicate lines."
            )
        return {"type": "upload", "audience_id": stored.pk}

    def _store_file(self, path: Path, sender: str) -> Audience:
        try:
            with path.open("rb") as stream, transaction.atomic():  # whole or not at all
                lines = upload_lines(iter(lambda: stream.read(CHUNK_BYTES), b""))
                return services.audience_upload(
                    lines=lines, client=None, sender_uid=int(sender), name=path.name[:200]
                )
        except OSError as exc:
            raise CommandError(f"Cannot read {path}: {exc.strerror or exc}.") from exc
        except services.NoValidUid as exc:
            raise CommandError(
                f"No valid uid in {path} ({exc.invalid_lines} invalid lines)."
            ) from exc


def _content(options: dict[str, Any]) -> Any:
    if options["text"] is not None:
        return {"type": "text", "text": options["text"]}
    try:
        return json.loads(options["content_json"])
    except ValueError as exc:
        raise CommandError(f"--content-json is not valid JSON: {exc}.") from exc


def _checked(body: dict[str, Any]) -> dict[str, Any]:
    serializer = CampaignCreateIn(data=body)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _one_line(detail: str, fields: dict[str, Any] | None) -> str:
    if not fields:
        return detail
    named = "; ".join(f"{name}: {problem}" for name, problem in fields.items())
    return f"{detail} ({named})"
