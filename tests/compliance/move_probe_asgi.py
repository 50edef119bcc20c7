"""Engram's ASGI application with one extra path for the move tests
(tests/compliance/test_tenant_move.py): ``POST /slow-write?seconds=N`` with an agent's key runs
``move_probe_tasks.write_slowly`` as a request of that key's tenant on Django's request threads,
and answers 201 with the seqs, or a domain error's status (503 while the tenant is moving)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from a2wsgi import WSGIMiddleware
from django.core import signals

from config.asgi import application as engram  # first: sets Django up
from config.asgi import django_wsgi


def _slow_write(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    from agents.authentication import parse_bearer, resolve_api_key
    from core.errors import DomainError
    from tests.compliance.move_probe_tasks import write_slowly

    seconds = float(parse_qs(environ.get("QUERY_STRING", "")).get("seconds", ["2"])[0])
    signals.request_started.send(sender=None, environ=environ)  # as Django's handler: units begin
    try:
        _, agent, _ = resolve_api_key(parse_bearer(environ.get("HTTP_AUTHORIZATION")) or "")
        status, body = "201 Created", {"seqs": write_slowly(agent, "request", seconds=seconds)}
    except DomainError as exc:
        status, body = f"{exc.status} Refused", {"detail": exc.message}
    except Exception as exc:  # the test reads what went wrong
        status, body = "500 Internal Server Error", {"detail": f"{type(exc).__name__}: {exc}"}
    finally:
        signals.request_finished.send(sender=None)  # ... and end: connections given back
    start_response(status, [("Content-Type", "application/json")])
    return [json.dumps(body).encode()]


slow = WSGIMiddleware(_slow_write, workers=1)  # type: ignore[arg-type]
slow.executor.shutdown()
slow.executor = django_wsgi.executor  # Django's threads, as every other request


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``/slow-write`` here, everything else to Engram."""
    if scope["type"] == "http" and scope.get("path") == "/slow-write":
        await slow(scope, receive, send)  # type: ignore[arg-type]
        return
    await engram(scope, receive, send)
