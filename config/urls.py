"""URL map: admin, the v1 API, the OpenAPI schema (shown inline in a browser: api/schema.py) and
its browsable docs, Prometheus metrics, and the static files of the apps (the admin's CSS and
JavaScript).

Static files are served by Django itself whatever DEBUG says: the product runs behind gunicorn with
no web server in front, and without them the admin loads unstyled and its actions' JavaScript is
missing. Only operators load them (a few small files, cached by browsers); the finders serve the
apps' ``static/`` directories only, so nothing else on disk is reachable.
"""

from django.conf import settings
from django.contrib import admin
from django.contrib.staticfiles.views import serve as serve_static
from django.http import HttpResponse
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularSwaggerView

from api.schema import SchemaView
from infra.health import healthz, readyz
from infra.observe import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("messaging.urls")),
    path("api/v1/", include("groups.urls")),
    path("api/v1/", include("bulk.urls")),
    path("api/v1/", include("unread.urls")),
    path("api/v1/", include("live.urls")),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("metrics", metrics_view, name="metrics"),
    # Health probes for load balancers (infra/health.py): liveness, then readiness.
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    # Browsers ask every site for one; "no content" instead of a 404 in the admin's console.
    path("favicon.ico", lambda request: HttpResponse(status=204)),
    re_path(
        rf"^{settings.STATIC_URL.lstrip('/')}(?P<path>.+)$",
        serve_static,
        {"insecure": True},
        name="static",
    ),
]
# Unmatched URLs under /api/ answer in the API's JSON error shape (api/exceptions.py).
handler404 = "api.exceptions.api_not_found"
handler500 = "api.exceptions.api_server_error"
