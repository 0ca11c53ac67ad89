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


def test_nothing_outside_the_apps_static_files_is_served(client: Client) -> None:
    escape = client.get(f"{settings.STATIC_URL}../config/settings.py")
    assert escape.status_code == 400  # a suspicious path, refused before any lookup
    assert b"SECRET_KEY" not in escape.content
    assert client.get(f"{settings.STATIC_URL}admin/css/no-such-file.css").status_code == 404
    assert client.get(f"{settings.STATIC_URL}config/settings.py").status_code == 404


def test_the_schema_and_the_docs_pages_load(client: Client) -> None:
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/campaigns" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"/api/schema/" in docs.content


def test_the_docs_page_needs_no_outside_network(client: Client) -> None:
    page = client.get("/api/docs/").content.decode()
    # a closed network still shows the docs
    assert "cdn." not in page
    assert "jsdelivr" not in page
    bundle = f"{settings.STATIC_URL}drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"
    assert bundle in page
    served = client.get(bundle)
    assert served.status_code == 200
    assert served.content.startswith(b"/*")  # the bundle itself, whole
