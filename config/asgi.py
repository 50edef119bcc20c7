"""ASGI entry point (uvicorn): the API, the admin and the Server-Sent Events streams in one process.

Only the SSE streams (``/api/v1/executions/<id>/stream``) go through Django's ASGI handler: they
wait on Redis for minutes and must not hold a thread. Every other request goes through Django's
WSGI handler on a2wsgi's thread pool. Django's ASGI path runs a sync view with a new thread and
many thread hops per request (about 5.5 ms of server time for a checkpoint restore, against
2.8 ms through WSGI: benchmarks/checkpoint_restore.py), and every view here except the stream is
sync.

``/mcp`` is the MCP server over Streamable HTTP (``api.mcp.asgi``, the official SDK's ASGI app),
loaded on the first ``/mcp`` request (the SDK costs about 2 s of start-up that a process serving
only REST and the admin need not pay); its session manager then runs in a task of its own until
lifespan shutdown.

Static files (the admin's CSS and JS, the vendored htmx) are served by Django itself when ``DEBUG``
is on or ``ENGRAM_SERVE_STATIC=1`` is set (the browser tests run uvicorn with the test settings,
where ``DEBUG`` is off). Otherwise whatever fronts the app must serve ``collectstatic``'s output
under ``STATIC_URL``.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import re
from typing import Any

import anyio.to_thread
from a2wsgi import WSGIMiddleware
from django.conf import settings
from django.contrib.staticfiles.handlers import StaticFilesHandler
from django.core.asgi import get_asgi_application
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

django_asgi = get_asgi_application()
_wsgi = get_wsgi_application()
if settings.DEBUG or os.environ.get("ENGRAM_SERVE_STATIC") == "1":
    # the admin's CSS and JS without a separate static server (developer machine, browser tests)
    _wsgi = StaticFilesHandler(_wsgi)
django_wsgi = WSGIMiddleware(
    _wsgi,  # type: ignore[arg-type]  # Django's WSGIHandler is a WSGI callable; its stubs do not say so
    workers=int(os.environ.get("ENGRAM_WSGI_THREADS", "16")),
)

STREAM_PATH = re.compile(r"^/api/v1/executions/[^/]+/stream$")
MCP_PATH = "/mcp"


class LazyMcp:
    """The MCP app, imported and started on the first request to ``/mcp``."""

    def __init__(self) -> None:
        self.app: Any = None
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _load(self) -> Any:
        async with self._lock:
            if self.app is None:
                # the import takes seconds: off the event loop
                module = await anyio.to_thread.run_sync(importlib.import_module, "api.mcp.asgi")
                app = module.McpHttp()
                ready = asyncio.Event()

                async def run() -> None:  # the session manager's task group lives in this task
                    async with app.lifespan():
                        ready.set()
                        await self._stop.wait()

                self._task = asyncio.create_task(run())
                await ready.wait()
                self.app = app
        return self.app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        app = self.app or await self._load()
        await app(scope, receive, send)

    async def shutdown(self) -> None:
        if self._task is not None:
            self._stop.set()
            await self._task


mcp_http = LazyMcp()

HEALTHZ_PATH = "/healthz"
_HEALTHZ_BODY = b'{"status": "ok"}'


async def healthz(send: Any) -> None:
    """Liveness, answered on the event loop: it proves the process serves even while every WSGI
    thread is busy (a liveness probe queued behind slow requests would restart a busy, healthy
    process). ``api.ops.HealthMiddleware`` gives the same answer where Django serves it."""
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(_HEALTHZ_BODY)).encode()),
        (b"cache-control", b"no-store"),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": _HEALTHZ_BODY})


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answer ``GET /healthz`` at once (``healthz``); route ``/mcp`` to the MCP server, SSE streams
    to Django's ASGI handler, everything else to WSGI; answer lifespan (stopping the MCP session
    manager at shutdown)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await mcp_http.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return
    path = scope.get("path", "")
    if scope["type"] == "http" and path == HEALTHZ_PATH and scope.get("method") in ("GET", "HEAD"):
        await healthz(send)
        return
    if scope["type"] == "http" and (path == MCP_PATH or path.startswith(MCP_PATH + "/")):
        await mcp_http(scope, receive, send)
        return
    if scope["type"] != "http" or STREAM_PATH.match(path):
        await django_asgi(scope, receive, send)
        return
    await django_wsgi(scope, receive, send)  # type: ignore[arg-type]  # an HTTP scope here
