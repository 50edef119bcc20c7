"""Engram's ASGI application with one extra path, ``/slow?seconds=N``: a WSGI request that takes N
seconds on the same thread pool as every other request (``config.asgi.django_wsgi``'s), for the
graceful shutdown test (tests/core/test_operations.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from a2wsgi import WSGIMiddleware

from config.asgi import application as engram
from config.asgi import django_wsgi


def _slow(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    seconds = float(parse_qs(environ.get("QUERY_STRING", "")).get("seconds", ["2"])[0])
    if mark := os.environ.get("ENGRAM_SLOW_MARK"):
        Path(mark).touch()  # the request is in flight: the test may now stop the server
    time.sleep(seconds)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [f"slept {seconds}\n".encode()]


slow = WSGIMiddleware(_slow, workers=1)  # type: ignore[arg-type]
slow.executor.shutdown()
slow.executor = django_wsgi.executor  # Django's threads: a slow request holds one of them


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``/slow`` here, everything else to Engram."""
    if scope["type"] == "http" and scope.get("path") == "/slow":
        await slow(scope, receive, send)  # type: ignore[arg-type]
        return
    await engram(scope, receive, send)
