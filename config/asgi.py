"""ASGI entry point (uvicorn): the API, the admin and the Server-Sent Events streams in one process.

Only the SSE streams (``/api/v1/executions/<id>/stream``) go through Django's ASGI handler: they
wait on Redis for minutes and must not hold a thread. Every other request goes through Django's
WSGI handler on a2wsgi's thread pool. Django's ASGI path runs a sync view with a new thread and
many thread hops per request (about 5.5 ms of server time for a checkpoint restore, against
2.8 ms through WSGI: benchmarks/checkpoint_restore.py), and every view here except the stream is
sync.

``/mcp`` is the MCP server over Streamable HTTP (``api.mcp.asgi``, the official SDK's ASGI app);
its session manager runs for the app's lifetime, entered at lifespan startup.

Static files (the admin's CSS and JS, the vendored htmx) are served by Django itself when ``DEBUG``
is on or ``ENGRAM_SERVE_STATIC=1`` is set (the browser tests run uvicorn with the test settings,
where ``DEBUG`` is off). Otherwise whatever fronts the app must serve ``collectstatic``'s output
under ``STATIC_URL``.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any

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

from api.mcp.asgi import PATH as MCP_PATH  # noqa: E402  # needs Django set up (above)
from api.mcp.asgi import McpHttp  # noqa: E402

STREAM_PATH = re.compile(r"^/api/v1/executions/[^/]+/stream$")
mcp_http = McpHttp()


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Route ``/mcp`` to the MCP server, SSE streams to Django's ASGI handler, everything else to
    WSGI; answer lifespan (running the MCP session manager from startup to shutdown)."""
    if scope["type"] == "lifespan":
        async with contextlib.AsyncExitStack() as stack:
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await stack.enter_async_context(mcp_http.lifespan())
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await stack.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
    path = scope.get("path", "")
    if scope["type"] == "http" and (path == MCP_PATH or path.startswith(MCP_PATH + "/")):
        await mcp_http(scope, receive, send)
        return
    if scope["type"] != "http" or STREAM_PATH.match(path):
        await django_asgi(scope, receive, send)
        return
    await django_wsgi(scope, receive, send)  # type: ignore[arg-type]  # an HTTP scope here
