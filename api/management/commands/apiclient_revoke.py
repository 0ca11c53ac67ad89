"""``manage.py apiclient_revoke NAME``: the client's token stops working at once, for good."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from api.clients import api_clients_revoke
from api.management.commands._clients import client_named


class Command(BaseCommand):
    help = "Revoke an API client for good."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")

    def handle(self, *args: Any, **options: Any) -> None:
        client = client_named(options["name"])
        revoked = api_clients_revoke(client_ids=[client.pk])
        state = "revoked" if revoked else "was already revoked"
        self.stdout.write(f"{client.name}: {state}")
