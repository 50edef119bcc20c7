"""Refuse oversized API bodies before reading them."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from api.exceptions import error_response


class ApiBodyLimitMiddleware:
    """A JSON 413 for ``/api/`` requests whose ``Content-Length`` exceeds
    ``DATA_UPLOAD_MAX_MEMORY_SIZE``, answered from the headers alone (the body is never read)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return error_response("Invalid Content-Length.", "invalid", status=400, field="body")
            if limit is not None and length > limit:
                message = f"The body is {length} bytes; the limit is {limit}."
                return error_response(message, "too_large", status=413, field="body")
        return self.get_response(request)
