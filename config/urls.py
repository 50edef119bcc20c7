"""URLs for tenant hosts (``acme.localhost``): admin (with a metrics page), the API, ``/metrics``."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from core.metrics import prometheus_metrics, tenant_metrics_admin

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/metrics/", admin.site.admin_view(tenant_metrics_admin), name="admin-metrics"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("api.urls")),
    path("metrics", prometheus_metrics, name="metrics"),
]

handler404 = "api.views.page_not_found"
handler500 = "api.views.server_error"
