"""The one exception handler of the API: every error is JSON with a code and, where known, the field."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import DomainError


def _as_field_errors(detail: Any) -> dict[str, Any]:
    if isinstance(detail, dict):
        return detail
    if isinstance(detail, list):
        return {"non_field_errors": detail}
    return {"non_field_errors": [detail]}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Map domain, Django and DRF errors to ``{"detail", "code", "errors"?}`` responses.

    Shapes: validation errors → 400 with ``errors`` keyed by field (nested for nested input);
    malformed JSON → 400 with ``errors.body``; ``DomainError`` → its status with ``errors[field]``.
    """
    if isinstance(exc, DomainError):
        body: dict[str, Any] = {"detail": exc.message, "code": exc.code, **exc.extra}
        if exc.field:
            body["errors"] = {exc.field: [exc.message]}
        return Response(body, status=exc.status)
    if isinstance(exc, RequestDataTooBig):
        message = "The request body is larger than this server accepts."
        return Response({"detail": message, "code": "too_large", "errors": {"body": [message]}}, status=413)
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        return Response({"detail": "Invalid input.", "code": "invalid", "errors": detail}, status=400)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    if isinstance(exc, exceptions.ParseError):
        return Response(
            {"detail": str(exc.detail), "code": "parse_error", "errors": {"body": [str(exc.detail)]}},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, exceptions.ValidationError):
        return Response(
            {"detail": "Invalid input.", "code": "invalid", "errors": _as_field_errors(exc.detail)},
            status=status.HTTP_400_BAD_REQUEST,
        )
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        response.data = {"detail": str(exc.detail), "code": codes if isinstance(codes, str) else "error"}
    return response
