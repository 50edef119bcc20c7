"""The API's middleware: requests start on the public schema without a hostname lookup (their key names
their tenant), and oversized bodies are refused before they are read."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django_tenants.middleware.main import TenantMainMiddleware

from api.exceptions import error_response
from core.tenancy import activate_public, current_tenant

API_PREFIX = "/api/"


class TenantMiddleware(TenantMainMiddleware):
    """django-tenants' tenant from the host name (``acme.localhost``: the admin), except for the
    agents' API: an ``/api/`` request names its tenant in its key (``agents.authentication``), so
    it starts on the public schema and its urlconf at once, without the ``Domain`` query (a round
    trip of every API call)."""

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if request.path.startswith(API_PREFIX):
            activate_public()
            request.tenant = current_tenant()  # type: ignore[attr-defined]
            request.urlconf = settings.PUBLIC_SCHEMA_URLCONF
            return None
        response: HttpResponse | None = super().process_request(request)
        return response


class ApiBodyLimitMiddleware:
    """A JSON 413 for ``/api/`` requests whose ``Content-Length`` exceeds
    ``DATA_UPLOAD_MAX_MEMORY_SIZE``, answered from the headers alone (the body is never read)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(API_PREFIX):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return error_response("Invalid Content-Length.", "invalid", status=400, field="body")
            if limit is not None and length > limit:
                message = f"The body is {length} bytes; the limit is {limit}."
                return error_response(message, "too_large", status=413, field="body")
        return self.get_response(request)
