"""``handler403`` of the tenant and platform sites: a refusal in an admin page renders in the admin's
style (header, breadcrumbs, the user's links) and says what is missing, instead of a bare
"403 Forbidden"; elsewhere Django's own page (API views answer JSON through DRF before this).

Every refusal is logged here as one line on ``django.request`` naming the path and what was
missing (Django would log it with the exception's traceback)."""

from __future__ import annotations

import logging

from django.contrib import admin
from django.contrib.admin.sites import AdminSite
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.views import defaults

logger = logging.getLogger("django.request")

# the pages ``ModelAdmin.get_urls`` names ``<app>_<model>_<page>``, and the permissions each accepts
# (the first is the one to ask for): Django's own views raise a bare PermissionDenied
PAGE_PERMISSIONS = {
    "changelist": ("view", "change"),
    "add": ("add",),
    "change": ("change", "view"),
    "delete": ("delete",),
    "history": ("view", "change"),
}


def _site_for(request: HttpRequest) -> AdminSite:
    match = request.resolver_match
    namespace = match.namespace if match is not None else ""
    for site in admin.sites.all_sites:
        if site.name == namespace:
            return site
    return admin.site


def needed_permission(request: HttpRequest, site: AdminSite) -> str:
    """What a refused page of Django's own model admin views needs, in words (``"This page needs
    the compliance.view_legalhold permission (or compliance.change_legalhold)."``); "" for any
    other page."""
    match = request.resolver_match
    url_name = match.url_name if match is not None else None
    if not url_name:
        return ""
    for model in site._registry:  # Django has no public list of the registered models
        opts = model._meta
        page = url_name.removeprefix(f"{opts.app_label}_{opts.model_name}_")
        if page != url_name and page in PAGE_PERMISSIONS:
            first, *others = (f"{opts.app_label}.{verb}_{opts.model_name}" for verb in PAGE_PERMISSIONS[page])
            alternative = f" (or {', '.join(others)})" if others else ""
            return f"This page needs the {first} permission{alternative}."
    return ""


def _logged(request: HttpRequest, response: HttpResponse, reason: str) -> HttpResponse:
    """``response`` after one line on ``django.request``; marked so that Django does not log it again
    with the traceback."""
    logger.warning("Forbidden (%s): %s", reason or "permission denied", request.path)
    response._has_been_logged = True  # type: ignore[attr-defined]  # what django.utils.log.log_response reads
    return response


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """403 for ``request``: the admin-styled page under ``/admin/`` for a staff user, Django's
    default page otherwise; naming the missing permission (the exception's message, or for Django's
    own model admin pages the permission the page needs) and logged as one line."""
    reason = str(exception) if exception is not None and str(exception) else ""
    user = getattr(request, "user", None)
    if not request.path.startswith("/admin/") or user is None or not user.is_active or not user.is_staff:
        return _logged(request, defaults.permission_denied(request, exception or PermissionDenied()), reason)
    site = _site_for(request)
    reason = reason or needed_permission(request, site)
    context = {
        **site.each_context(request),
        "title": "Permission denied",
        "reason": reason,
    }
    response = TemplateResponse(request, "admin/compliance/403.html", context, status=403)
    return _logged(request, response.render(), reason)
