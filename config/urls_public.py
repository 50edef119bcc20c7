"""URLs for the public schema (``localhost`` and unknown hosts): platform admin, the API, ``/metrics``."""

from django.urls import include, path

from config.metrics import prometheus_metrics
from tenants.admin import public_admin_site

urlpatterns = [
    path("admin/", public_admin_site.urls),
    path("api/v1/", include("config.urls_api")),
    path("metrics", prometheus_metrics, name="metrics"),
]

handler500 = "agents.api.views.server_error"
