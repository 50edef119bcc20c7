"""The API's middleware: requests start on the public schema without a hostname lookup (their key names
their tenant), oversized bodies are refused before they are read, and PostgreSQL being unavailable
is a 503 (``api.exceptions.unavailable_response``) wherever a request meets it."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django_tenants.middleware.main import TenantMainMiddleware

from api.exceptions import UNAVAILABLE_PAGE, domain_error_headers, error_response, unavailable_response
from core.errors import TenantMoving
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
        try:
            response: HttpResponse | None = super().process_request(request)
        except Exception as exc:  # the host's tenant is read from PostgreSQL
            answer = unavailable_response(request, exc)
            if answer is None:
                raise
            return answer
        if response is None and getattr(getattr(request, "tenant", None), "moving", False):
            # read fresh on every request here: no write reaches the schema being copied
            return moving_response()
        return response


def moving_response() -> HttpResponse:
    """The 503 page (with ``Retry-After``) of a host-routed request to a tenant being moved to
    another PostgreSQL server (decision 0071)."""
    answer = TenantMoving()
    return HttpResponse(
        UNAVAILABLE_PAGE.format(detail=answer.message),
        status=answer.status,
        headers=domain_error_headers(answer),
        content_type="text/html; charset=utf-8",
    )


class DatabaseUnavailableMiddleware:
    """A 503 instead of a 500 when a view (the admin's, the metrics page, anything outside DRF's
    exception handler) fails because PostgreSQL is unavailable: ``api.exceptions.unavailable_response``.
    ``handler500`` does the same for errors outside views (with ``DEBUG`` off)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return unavailable_response(request, exception)


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
