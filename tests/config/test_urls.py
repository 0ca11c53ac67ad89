"""The URL map as a browser meets it under a production server (DEBUG off, no web server in front):
the admin's own CSS and JavaScript load, and the schema and docs pages answer."""

from __future__ import annotations

import warnings

import pytest
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.test import Client

from tests.unread.test_fastpath import request

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "asset", ["admin/css/base.css", "admin/js/actions.js", "admin/js/vendor/jquery/jquery.js"]
)
def test_the_admins_static_files_are_served_with_debug_off(asset: str, client: Client) -> None:
    assert not settings.DEBUG
    response = client.get(f"{settings.STATIC_URL}{asset}")
    assert response.status_code == 200
    assert not response.streaming  # answered whole: no sync iterator under ASGI (a warning each)
    assert response.content
    assert int(response["Content-Length"]) == len(response.content)
    assert response["Last-Modified"]


def test_a_static_file_under_asgi_logs_no_warning() -> None:
    """Through Django's ASGI handler, as gunicorn's uvicorn workers serve it."""
    path = f"{settings.STATIC_URL}admin/css/base.css"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        answer = request(ASGIHandler(), path, ())
    assert answer.status == 200
    assert answer.body.startswith(b"/*")
    assert [str(w.message) for w in caught if "iterator" in str(w.message)] == []
