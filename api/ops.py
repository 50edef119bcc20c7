"""The operator's doors of every HTTP request: liveness and readiness probes, the request id, the
access log line and the latency histogram.

``HealthMiddleware`` comes first in ``MIDDLEWARE``: ``GET /healthz`` and ``GET /readyz`` are answered
before tenant routing, host validation, sessions and authentication (a load balancer probes by IP,
with no tenant and no key), and they are not in the OpenAPI document: they are the platform's, not
the agents' API (docs/decisions/0060-health-probes-outside-the-api.md).

- ``/healthz`` (liveness): 200 ``{"status": "ok"}`` and nothing else; it touches no dependency,
  so a database outage never makes an orchestrator restart healthy processes.
- ``/readyz`` (readiness): 200 ``{"status": "ready", "checks": {...}}`` when PostgreSQL and Redis
  answer (``core.health.readiness``, within ``ENGRAM["READINESS_TIMEOUT"]``); otherwise 503 with the
  API's error body, ``detail`` naming what is down (``"Not ready: PostgreSQL is unavailable."``),
  ``code`` ``unavailable``, the same ``checks`` and ``Retry-After: 1``.

``RequestContextMiddleware`` (second) gives each request an id: the caller's ``X-Request-ID`` when
it is 1-128 characters of ``[A-Za-z0-9._:-]``, else a new UUID (hex); it tags every log line of
the request (``core.logs``), is echoed in the response's ``X-Request-ID``, and the request ends
with one INFO line on the ``engram.access`` logger: method, path (never the query string, the
headers or the body), operation, status and milliseconds: ``duration_ms``; of which ``cpu_ms`` on
the request's thread's CPU, ``db_ms`` in PostgreSQL statements and ``embed_ms`` in the embedding
model on the request's thread (``core.timing``); the rest is waiting (for the GIL, Redis, a lock, an
executor's thread). The operation is the URL pattern that
matched (``api/v1/memories/search``; ``unmatched`` when none did), which also labels
``engram_http_request_duration_seconds`` and ``engram_http_requests_total``.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import Counter, Histogram

from api.exceptions import error_body
from core import health
from core.logs import request_context
from core.timing import db_timer, ledger

access_log = logging.getLogger("engram.access")

HEALTH_PATHS = ("/healthz", "/readyz")
REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")

REQUEST_SECONDS = Histogram(
    "engram_http_request_duration_seconds",
    "Time from the request reaching Django to its response (streams: to their first byte), by "
    "operation (the URL pattern) and method.",
    ["operation", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
REQUESTS = Counter(
    "engram_http_requests",
    "HTTP requests answered, by operation, method and status class (2xx, 3xx, 4xx, 5xx).",
    ["operation", "method", "status"],
)


def readiness_response() -> JsonResponse:
    """The body and status of ``/readyz`` (see the module docstring)."""
    checks = health.readiness()
    body = {c.name: c.as_dict() for c in checks}
    missing = health.down(checks)
    if not missing:
        return JsonResponse({"status": "ready", "checks": body})
    detail = f"Not ready: {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} unavailable."
    return JsonResponse(
        error_body(detail, "unavailable", extra={"status": "unavailable", "checks": body}),
        status=503,
        headers={"Retry-After": "1"},
    )


class HealthMiddleware:
    """Answers ``/healthz`` and ``/readyz`` before anything else runs (see the module docstring)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path not in HEALTH_PATHS:
            return self.get_response(request)
        if request.method not in ("GET", "HEAD"):
            return JsonResponse(
                error_body("Use GET.", "method_not_allowed"), status=405, headers={"Allow": "GET, HEAD"}
            )
        if request.path == "/healthz":
            response: HttpResponse = JsonResponse({"status": "ok"})  # as config.asgi.healthz
        else:
            response = readiness_response()
        response["Cache-Control"] = "no-store"
        return response


def request_id_of(request: HttpRequest) -> str:
    """The caller's ``X-Request-ID`` when well formed, else a new one (32 hex digits)."""
    given = request.headers.get(REQUEST_ID_HEADER, "")
    return given if _REQUEST_ID.match(given) else uuid.uuid4().hex


def operation_of(request: HttpRequest) -> str:
    """The URL pattern the request matched (``api/v1/memories/<uuid:pk>``), ``unmatched`` if none."""
    match = getattr(request, "resolver_match", None)
    return str(match.route) if match is not None and match.route else "unmatched"


class RequestContextMiddleware:
    """Request id, access log line and latency metrics (see the module docstring)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_id_of(request)
        request.request_id = request_id  # type: ignore[attr-defined]
        started, cpu_started = time.perf_counter(), time.thread_time()
        with request_context(request_id), ledger() as spent, connection.execute_wrapper(db_timer):
            response = self.get_response(request)
            seconds = time.perf_counter() - started
            cpu_seconds = time.thread_time() - cpu_started
            operation = operation_of(request)
            method = request.method or ""
            REQUEST_SECONDS.labels(operation, method).observe(seconds)
            REQUESTS.labels(operation, method, f"{response.status_code // 100}xx").inc()
            access_log.info(
                "%s %s %s %.1fms",
                method,
                request.path,
                response.status_code,
                seconds * 1000,
                extra={
                    "method": method,
                    "path": request.path,
                    "operation": operation,
                    "status": response.status_code,
                    "duration_ms": round(seconds * 1000, 2),
                    "cpu_ms": round(cpu_seconds * 1000, 2),
                    "db_ms": round(spent.get("db", 0.0) * 1000, 2),
                    "embed_ms": round(spent.get("embed", 0.0) * 1000, 2),
                },
            )
        response[REQUEST_ID_HEADER] = request_id
        return response
