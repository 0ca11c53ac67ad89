"""URL map: admin, the v1 API, the OpenAPI schema and its browsable docs, Prometheus metrics."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from config.metrics import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("messaging.urls")),
    path("api/v1/", include("bulk.urls")),
    path("api/v1/", include("unread.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("metrics", metrics_view, name="metrics"),
]
