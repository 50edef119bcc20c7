"""Run one REST operation in process for an MCP tool: the tool *is* that operation.

An MCP tool call becomes a request to the REST view it names, passed through Django's own request
handler (the middleware, ``ApiKeyAuthentication``, the scope check, the view's input serializer,
the service or selector, the output serializer and the one exception handler), without an HTTP hop.
So a tool validates, authorises, records and fails exactly as its REST operation does: a tool error
carries the REST API's 4xx body, ``{"detail", "code", "errors"}``, word for word.

Django is synchronous, so each call runs on a worker thread (``anyio.to_thread``); Django's request
signals open and close that thread's database connection as for any request.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import anyio.to_thread
from django.core.handlers.wsgi import WSGIHandler

_handler: WSGIHandler | None = None


def _wsgi() -> WSGIHandler:
    global _handler
    if _handler is None:
        _handler = WSGIHandler()
    return _handler


@dataclass(frozen=True)
class RestResult:
    """The REST operation's answer: HTTP ``status``, the JSON ``body`` (None when empty) and the
    response headers Engram documents (``Engram-Degraded``, ``Engram-Source``, ...)."""

    status: int
    body: Any
    headers: dict[str, str]

    @property
    def ok(self) -> bool:
        return self.status < 400


def _json_bytes(value: Any) -> bytes:
    """``value`` as a client would send it: UTF-8 JSON, and a lone surrogate (not text, which UTF-8
    cannot carry) as its JSON escape, for REST to refuse it as it refuses it from anyone."""
    try:
        return json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value).encode("ascii")


def _call(
    *,
    key: str,
    method: str,
    path: str,
    body: Any,
    query: dict[str, Any] | None,
    host: str,
    idempotency_key: str | None,
) -> RestResult:
    data = b"" if body is None else _json_bytes(body)
    name, _, port = host.partition(":")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        # WSGI (PEP 3333) carries the path as its bytes, one character per byte: a server decodes
        # the URL's percent-escapes into UTF-8 bytes, and Django decodes those as UTF-8 (a lone
        # surrogate's bytes are not UTF-8: Django keeps them percent-encoded, as from a client)
        "PATH_INFO": path.encode("utf-8", "surrogatepass").decode("latin-1"),
        "SCRIPT_NAME": "",
        "QUERY_STRING": urlencode(
            {k: v for k, v in (query or {}).items() if v is not None}, doseq=True, errors="surrogatepass"
        ),
        "SERVER_NAME": name or "localhost",
        "SERVER_PORT": port or "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": host,
        "HTTP_AUTHORIZATION": f"Bearer {key}",
        "HTTP_ACCEPT": "application/json",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(data)),
        "wsgi.input": io.BytesIO(data),
        "wsgi.errors": io.StringIO(),
        "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    if idempotency_key is not None:
        environ["HTTP_IDEMPOTENCY_KEY"] = idempotency_key
    status: list[str] = []
    headers: dict[str, str] = {}

    def start_response(line: str, header_list: list[tuple[str, str]], exc_info: Any = None) -> None:
        status.append(line)
        headers.update({k.lower(): v for k, v in header_list})

    response = _wsgi()(environ, start_response)  # type: ignore[arg-type]  # a WSGI callable
    try:
        content = b"".join(response)
    finally:
        response.close()
    code = int(status[0].split(" ", 1)[0])
    parsed = json.loads(content) if content else None
    kept = {k: v for k, v in headers.items() if k.startswith("engram-") or k == "idempotent-replayed"}
    return RestResult(code, parsed, kept)


async def rest_call(
    *,
    key: str,
    method: str,
    path: str,
    body: Any = None,
    query: dict[str, Any] | None = None,
    host: str = "localhost",
    idempotency_key: str | None = None,
) -> RestResult:
    """``method path`` (under ``/api/v1/``) with ``body`` as JSON and ``query`` as parameters
    (``None`` values left out, lists repeated), authenticated with the API key ``key``, answered by
    the REST view in a worker thread. Never raises for an HTTP error: see ``RestResult.status``."""
    return await anyio.to_thread.run_sync(
        lambda: _call(
            key=key,
            method=method,
            path=path,
            body=body,
            query=query,
            host=host,
            idempotency_key=idempotency_key,
        )
    )
