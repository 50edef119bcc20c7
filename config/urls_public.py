"""URLs for the public schema (``localhost`` and unknown hosts): platform admin, the API, ``/metrics``."""

from django.urls import include, path

from core.metrics import prometheus_metrics
from tenants.admin import public_admin_site

urlpatterns = [
    path("admin/", public_admin_site.urls),
    path("api/v1/", include("api.urls")),
    path("metrics", prometheus_metrics, name="metrics"),
]

handler404 = "api.views.page_not_found"
handler500 = "api.views.server_error"
handler403 = "compliance.views.permission_denied"
