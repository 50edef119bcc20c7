"""The MCP server over Streamable HTTP at ``/mcp``, for the ASGI app (``config.asgi``).

Stateless, with JSON responses (see ``build_server``). Each request must carry ``Authorization: Bearer <api key>``; a request without one, or with a key
``resolve_api_key`` refuses, is a 401 with the API's error body before the SDK sees it. Tool calls
are then authorised again by the REST operation they run (scopes, tenant), so a key revoked
between two calls is refused at once even while this gate remembers it (``KEY_CHECK_SECONDS``).
When PostgreSQL is unavailable the key cannot be checked: a 503 with the API's error body and
``Retry-After`` (a tool call whose key the gate remembers gets its REST operation's 503 body).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio.to_thread
from django.db import close_old_connections
from mcp.server.fastmcp import Context, FastMCP
from rest_framework.exceptions import AuthenticationFailed

from agents.authentication import parse_bearer, resolve_api_key
from api.exceptions import domain_error_body, domain_error_headers, error_body
from core.db.availability import database_errors
from core.errors import DatabaseUnavailable
from core.tenancy import activate_public

from .server import Refused, build_server

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

PATH = "/mcp"
KEY_CHECK_SECONDS = 10.0
_checked: dict[str, float] = {}


def _key_of(ctx: Context[Any, Any, Any]) -> tuple[str, str]:
    request = ctx.request_context.request
    headers = getattr(request, "headers", None) or {}
    try:
        key = parse_bearer(headers.get("authorization"))
    except AuthenticationFailed as exc:
        raise Refused(error_body(str(exc.detail), "authentication_failed")) from exc
    if key is None:  # the gate let no such request through; stdio has its own key source
        raise Refused(error_body("No API key.", "not_authenticated"))
    return key, headers.get("host", "localhost")


def _refusal(raw_header: bytes | None) -> str | None:
    """Why the request's key is refused (None: it is valid), checked in a worker thread."""
    try:
        key = parse_bearer(raw_header)
    except AuthenticationFailed as exc:
        return str(exc.detail)
    if key is None:
        return "Authentication credentials were not provided: send 'Authorization: Bearer <api key>'."
    digest = hashlib.sha256(key.encode()).hexdigest()
    if _checked.get(digest, 0.0) > time.monotonic():
        return None
    close_old_connections()
    try:
        with database_errors():  # PostgreSQL down: DatabaseUnavailable, a 503
            resolve_api_key(key)
    except AuthenticationFailed as exc:
        return str(exc.detail)
    finally:
        activate_public()
    _checked[digest] = time.monotonic() + KEY_CHECK_SECONDS
    if len(_checked) > 10_000:
        _checked.clear()
    return None


class McpHttp:
    """The ASGI app of ``/mcp``: the key gate in front of the SDK's Streamable HTTP app.

    ``lifespan()`` must be entered for the app's lifetime (``config.asgi`` does it on startup).
    """

    def __init__(self) -> None:
        self.server: FastMCP[Any] = build_server(_key_of, streamable_http_path=PATH)
        self.app = self.server.streamable_http_app()

    def lifespan(self) -> Any:
        """The SDK's session manager (its task group), as an async context manager."""
        return self.server.session_manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        try:
            reason = await anyio.to_thread.run_sync(_refusal, headers.get(b"authorization"))
        except DatabaseUnavailable as exc:  # the key could not be checked: retry later
            await _answer(send, exc.status, domain_error_body(exc), domain_error_headers(exc))
            return
        if reason is not None:
            body = error_body(reason, "not_authenticated")
            await _answer(send, 401, body, {"WWW-Authenticate": "Bearer"})
            return
        await self.app(scope, receive, send)


async def _answer(send: Send, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
    """Send a JSON response of ``status`` with ``body`` and ``headers``."""
    content = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                *((name.lower().encode(), value.encode()) for name, value in headers.items()),
                (b"content-length", str(len(content)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": content})
