"""URLs for tenant hosts (``acme.localhost``): admin (with a metrics page and session timelines), the
API, ``/metrics``."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from compliance.admin_views import timeline_view
from core.metrics import prometheus_metrics, tenant_metrics_admin

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/metrics/", admin.site.admin_view(tenant_metrics_admin), name="admin-metrics"),
    # the session timeline of the compliance console (?session=<id>)
    path("admin/sessions/", admin.site.admin_view(timeline_view), name="admin-session-timeline"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("api.urls")),
    path("metrics", prometheus_metrics, name="metrics"),
]

handler404 = "api.views.page_not_found"
handler500 = "api.views.server_error"
handler403 = "compliance.views.permission_denied"
