"""The API's error bodies, built by ``error_body`` alone, and its one exception handler.

Every error is ``{"detail": str, "code": str, "errors": {"<path>": [str, ...]}}`` (``errors`` empty
when no field is to blame) plus any extra members a domain error carries (``current_version``,
``backend``). A path names a field the way it is written in the request: ``state``,
``filters.created_at.gte``, ``events[1].occurred_at``, ``tags[3]``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from agents.authentication import clear_tenant_cache
from core.db.availability import unavailable
from core.errors import DomainError, ServiceUnavailable, TenantMoving


def error_body(
    detail: str,
    code: str,
    *,
    field: str | None = None,
    errors: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of every API error: ``detail`` (a sentence), ``code`` (machine-readable),
    ``errors`` (``errors`` as given, flattened to paths; else ``{field: [detail]}`` when ``field`` is
    known; else empty) and ``extra``."""
    body: dict[str, Any] = {"detail": detail, "code": code, **(extra or {})}
    if errors is not None:
        body["errors"] = flatten_errors(errors)
    else:
        body["errors"] = {field: [detail]} if field else {}
    return body


def flatten_errors(errors: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested errors (``{"filters": {"created_at": {"gte": [...]}}}``, lists of per-item dicts)
    as ``{"filters.created_at.gte": [...]}`` / ``{"events[1].kind": [...]}``: one path syntax."""
    flat: dict[str, list[str]] = {}
    if isinstance(errors, dict):
        for key, value in errors.items():
            if key == "non_field_errors":  # DRF's name for the object itself
                path = prefix or "body"
            elif isinstance(key, int):
                path = f"{prefix}[{key}]"
            else:
                path = f"{prefix}.{key}" if prefix else str(key)
            for name, messages in flatten_errors(value, path).items():
                flat.setdefault(name, []).extend(messages)
    elif isinstance(errors, list) and errors and all(isinstance(item, str) for item in errors):
        flat[prefix or "body"] = [str(item) for item in errors]
    elif isinstance(errors, list):
        for index, item in enumerate(errors):
            if item in ({}, [], None):
                continue  # DRF's placeholder for a valid item of a list
            flat.update(flatten_errors(item, f"{prefix}[{index}]"))
    else:
        flat[prefix or "body"] = [str(errors)]
    return flat


def error_response(detail: str, code: str, *, status: int, field: str | None = None) -> JsonResponse:
    """``error_body`` as a plain Django response, for code outside DRF's views (middleware, the
    async stream view, Django's error handlers)."""
    return JsonResponse(error_body(detail, code, field=field), status=status)


def domain_error_body(exc: DomainError) -> dict[str, Any]:
    """The body of a ``DomainError``."""
    return error_body(exc.message, exc.code, field=exc.field, errors=exc.errors, extra=exc.extra)


def domain_error_headers(exc: DomainError) -> dict[str, str]:
    """The headers of a ``DomainError``'s response: ``Retry-After`` (seconds) for a 503 that knows it."""
    if isinstance(exc, ServiceUnavailable) and exc.retry_after is not None:
        return {"Retry-After": str(exc.retry_after)}
    return {}


def domain_error_response(exc: DomainError) -> JsonResponse:
    """A ``DomainError`` as a plain Django response (body and headers as the exception handler's),
    for code outside DRF's views."""
    return JsonResponse(domain_error_body(exc), status=exc.status, headers=domain_error_headers(exc))


UNAVAILABLE_PAGE = (
    '<!doctype html>\n<html lang="en">\n<head><title>Service unavailable (503)</title></head>\n'
    "<body><h1>Service unavailable (503)</h1><p>{detail}</p></body>\n</html>\n"
)


def unavailable_response(request: HttpRequest, exc: BaseException) -> HttpResponse | None:
    """The 503 for ``exc`` when it means PostgreSQL is unavailable (``None`` otherwise), outside
    DRF's views: the API's error body under ``/api/``, a plain page elsewhere (the admin: no
    traceback, no template that could touch the database), both with ``Retry-After``."""
    answer = unavailable(exc)
    if answer is None:
        return None
    if request.path.startswith("/api/"):
        return domain_error_response(answer)
    return HttpResponse(
        UNAVAILABLE_PAGE.format(detail=answer.message),
        status=answer.status,
        headers=domain_error_headers(answer),
        content_type="text/html; charset=utf-8",
    )


def batch_errors(errors: Any, *, name: str, single: bool) -> dict[str, Any]:
    """A ``many=True`` serializer's errors (a list of per-item dicts) as paths: ``<name>[i].<field>``
    for a batch, the plain field names when the body was one object."""
    items = errors.items() if isinstance(errors, dict) else enumerate(errors)
    flat: dict[str, Any] = {}
    for index, item in items:
        if not isinstance(item, dict):
            flat[name if single else f"{name}[{index}]"] = item
            continue
        for field_name, messages in item.items():
            flat[field_name if single else f"{name}[{index}].{field_name}"] = messages
    return flat


def _as_field_errors(detail: Any) -> dict[str, Any]:
    if isinstance(detail, dict):
        return detail
    if isinstance(detail, list):
        return {"body": detail}
    return {"body": [detail]}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Map domain, Django and DRF errors to ``{"detail", "code", "errors"?}`` responses.

    Shapes: validation errors → 400 with ``errors`` keyed by field (nested for nested input);
    malformed JSON → 400 with ``errors.body``; ``DomainError`` → its status with ``errors[field]``
    (and ``Retry-After`` when a 503 knows it); PostgreSQL unavailable (``core.db.availability``) →
    ``DatabaseUnavailable``'s 503.
    """
    exc = unavailable(exc) or exc
    if isinstance(exc, TenantMoving) and exc.schema:
        clear_tenant_cache(exc.schema)  # the next request reads the row: moving, or moved
    if isinstance(exc, DomainError):
        return Response(domain_error_body(exc), status=exc.status, headers=domain_error_headers(exc))
    if isinstance(exc, RequestDataTooBig):
        message = "The request body is larger than this server accepts."
        return Response(error_body(message, "too_large", field="body"), status=413)
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"body": exc.messages}
        return Response(error_body("Invalid input.", "invalid", errors=detail), status=400)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    if isinstance(exc, exceptions.ParseError):
        return Response(
            error_body(str(exc.detail), "parse_error", field="body"),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, exceptions.ValidationError):
        return Response(
            error_body("Invalid input.", "invalid", errors=_as_field_errors(exc.detail)),
            status=status.HTTP_400_BAD_REQUEST,
        )
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        response.data = error_body(str(exc.detail), codes if isinstance(codes, str) else "error")
    return response
