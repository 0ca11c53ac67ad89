"""``manage.py apiclient_rotate NAME``: a new token for the client, printed once; the old one
stops working at once everywhere (the clients' generation moves on). Scopes (``users``
included) and senders stay as they were."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from api.clients import api_client_rotate_token
from api.management.commands._clients import client_named


class Command(BaseCommand):
    help = "Issue a new token for an API client (printed once); the old one stops working."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")

    def handle(self, *args: Any, **options: Any) -> None:
        client = client_named(options["name"])
        if not client.is_active:
            raise CommandError(f"the API client {client.name!r} is revoked")
        self.stdout.write(api_client_rotate_token(client))
