"""URL map: admin, the v1 API, the OpenAPI schema (shown inline in a browser: api/schema.py) and
its browsable docs, Prometheus metrics, and the static files of the apps (the admin's CSS and
JavaScript).

Static files are served by Django itself whatever DEBUG says: the product runs behind gunicorn with
no web server in front, and without them the admin loads unstyled and its actions' JavaScript is
missing. Only operators load them (a few small files, cached by browsers); the finders serve the
apps' ``static/`` directories only, so nothing else on disk is reachable. Each is answered whole
(``static_file``): Django's file response streams from a synchronous iterator, which under ASGI
put a "StreamingHttpResponse must consume synchronous iterators" warning in the log per file.
"""

from django.conf import settings
from django.contrib import admin
from django.contrib.staticfiles.views import serve as serve_static
from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseBase
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularSwaggerView

from api.schema import SchemaView
from infra.health import healthz, readyz
from infra.observe import metrics_view


def static_file(request: HttpRequest, path: str) -> HttpResponseBase:
    """Django's static view, its file read whole: the largest, the docs page's Swagger UI
    bundle, is 1.6 MB, read once per browser (operators and API developers, who cache it)."""
    found = serve_static(request, path, insecure=True)
    if not isinstance(found, FileResponse):
        return found  # 304, or a 404 raised before
    whole = HttpResponse(found.getvalue(), status=found.status_code, headers=dict(found.items()))
    found.close()
    return whole


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
        static_file,
        name="static",
    ),
]
# Unmatched URLs under /api/ answer in the API's JSON error shape (api/exceptions.py).
handler404 = "api.exceptions.api_not_found"
handler500 = "api.exceptions.api_server_error"
