"""``handler403`` of the tenant and platform sites: a refusal in an admin page renders in the admin's
style (header, breadcrumbs, the user's links) and says what is missing, instead of a bare
"403 Forbidden"; elsewhere Django's own page (API views answer JSON through DRF before this)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.sites import AdminSite
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.views import defaults


def _site_for(request: HttpRequest) -> AdminSite:
    match = request.resolver_match
    namespace = match.namespace if match is not None else ""
    for site in admin.sites.all_sites:
        if site.name == namespace:
            return site
    return admin.site


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """403 for ``request``: the admin-styled page under ``/admin/`` for a staff user, Django's
    default page otherwise."""
    user = getattr(request, "user", None)
    if not request.path.startswith("/admin/") or user is None or not user.is_active or not user.is_staff:
        return defaults.permission_denied(request, exception or PermissionDenied())
    site = _site_for(request)
    reason = str(exception) if exception is not None and str(exception) else ""
    context = {
        **site.each_context(request),
        "title": "Permission denied",
        "reason": reason,
    }
    response = TemplateResponse(request, "admin/compliance/403.html", context, status=403)
    return response.render()
