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
import io
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio.to_thread
from django.conf import settings
from django.db import close_old_connections
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import INVALID_REQUEST, PARSE_ERROR
from rest_framework.exceptions import AuthenticationFailed, ParseError

from agents.authentication import parse_bearer, resolve_api_key
from api.exceptions import domain_error_body, domain_error_headers, error_body
from api.parsers import StrictJSONParser
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
    try:
        with database_errors():  # PostgreSQL down: DatabaseUnavailable, a 503
            close_old_connections()
            resolve_api_key(key)
    except AuthenticationFailed as exc:
        return str(exc.detail)
    finally:
        activate_public()
    _checked[digest] = time.monotonic() + KEY_CHECK_SECONDS
    if len(_checked) > 10_000:
        _checked.clear()
    return None


async def _send_json(
    send: Send, status: int, body: Any, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    content = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(content)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": content})


def _rpc_error(code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error answering no request in particular (the body named none)."""
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request's whole body, or None when it is larger than ``limit`` bytes."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _parse_problem(body: bytes) -> str | None:
    """Why the REST API's parser refuses ``body`` (not UTF-8, not JSON, deeper than it walks, lone
    surrogates), or None."""
    try:
        StrictJSONParser().parse(io.BytesIO(body), "application/json", {})
    except ParseError as exc:
        return str(exc.detail)
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then the client's own messages (a disconnect)."""
    given = False

    async def replayed() -> MutableMapping[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


class McpHttp:
    """The ASGI app of ``/mcp``: the key gate in front of the SDK's Streamable HTTP app.

    A POST's body is read (at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes, else a 413) and checked by
    the REST API's own JSON parser before the SDK sees it: a body REST answers with a 400 (not UTF-8,
    not JSON, nested deeper than 200 levels, lone surrogates) is a 400 here too, with a JSON-RPC
    parse error (-32700) carrying the parser's words, where the SDK would answer 500 or pass the
    arguments on to fail in the tool.

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
            extra = tuple((k.lower().encode(), v.encode()) for k, v in domain_error_headers(exc).items())
            await _send_json(send, exc.status, domain_error_body(exc), extra)
            return
        if reason is not None:
            body = error_body(reason, "not_authenticated")
            await _send_json(send, 401, body, ((b"www-authenticate", b"Bearer"),))
            return
        if scope.get("method") == "POST":
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            raw = await _read_body(receive, limit)
            if raw is None:
                await _send_json(
                    send, 413, _rpc_error(INVALID_REQUEST, f"The body is larger than {limit} bytes.")
                )
                return
            problem = await anyio.to_thread.run_sync(_parse_problem, raw)
            if problem is not None:
                await _send_json(send, 400, _rpc_error(PARSE_ERROR, f"Parse error: {problem}"))
                return
            receive = _replay(raw, receive)
        await self.app(scope, receive, send)
