"""URLs for the public schema (``localhost`` and unknown hosts): platform admin and the API."""

from django.urls import include, path

from tenants.admin import public_admin_site

urlpatterns = [
    path("admin/", public_admin_site.urls),
    path("api/v1/", include("config.urls_api")),
]
