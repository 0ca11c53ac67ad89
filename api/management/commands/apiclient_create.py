"""``manage.py apiclient_create NAME --scopes send,campaigns [--senders U ...] [--operator]``:
issue an API client and print its bearer token, once (only its hash is stored), so a scripted
deployment can bootstrap itself without the admin. ``--senders`` bound a ``send`` or ``campaigns``
client, which needs at least one (without, every send would answer 404); a ``users`` client (the
consumer backend) acts as any user and needs none."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from api.clients import api_client_create
from api.models import ApiClient, Scope
from infra.cli import CommaList


class Command(BaseCommand):
    help = "Create an API client and print its token (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument(
            "--scopes",
            action=CommaList,
            required=True,
            help=f"comma-separated: {', '.join(Scope.values)}",
        )
        parser.add_argument(
            "--senders",
            type=int,
            action=CommaList,
            metavar="U",
            help="uids a send/campaigns client acts as (a users client acts as any user)",
        )
        parser.add_argument("--operator", action="store_true", help="may recall any message")

    def handle(self, *args: Any, **options: Any) -> None:
        name, scopes = options["name"].strip(), scopes_from(options["scopes"])
        if not name or len(name) > 100:
            raise CommandError("the name must be 1 to 100 characters")
        if ApiClient.objects.filter(name=name).exists():
            raise CommandError(f"an API client named {name!r} exists already")
        bounded = sorted({"send", "campaigns"} & set(scopes))
        if bounded and not options["senders"]:
            raise CommandError(
                f"a {' and '.join(bounded)} client needs --senders (the uids it acts as)"
            )
        if any(uid <= 0 or uid >= 1 << 63 for uid in options["senders"]):
            raise CommandError("sender uids must be between 1 and 2^63-1")
        _, token = api_client_create(
            name=name,
            scopes=scopes,
            sender_uids=options["senders"],
            is_operator=options["operator"],
        )
        self.stdout.write(token)


def scopes_from(given: list[str]) -> list[str]:
    scopes = [s for s in given if s]
    unknown = sorted(set(scopes) - set(Scope.values))
    if not scopes or unknown:
        raise CommandError(f"unknown scope(s) {unknown or given!r}; use {', '.join(Scope.values)}")
    return scopes
