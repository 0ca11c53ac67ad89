"""What the API-client commands share: finding a client by name, one readable error otherwise."""

from __future__ import annotations

from django.core.management.base import CommandError

from api.models import ApiClient


def client_named(name: str) -> ApiClient:
    found = ApiClient.objects.filter(name=name).first()
    if found is None:
        raise CommandError(f"no API client named {name!r}")
    return found
