"""Structured logs: one JSON object per line, with the request id and the tenant of the work.

``JsonFormatter`` writes ``{"ts", "level", "logger", "message", "request_id", "tenant", ...}``
(``ts``: UTC, ISO 8601 with milliseconds; ``exc``: the traceback, when there is one; the
``extra={...}`` fields a caller passes that are strings, numbers, booleans or null; objects are
left out, never rendered with their ``repr``).
``request_id`` comes from ``request_context`` (set by ``api.middleware.RequestContextMiddleware`` for
an HTTP request), ``tenant`` from the connection's active schema at the moment of the call, so a
line logged after the API key chose its tenant names it. Either is ``null`` when unknown.

Select it with ``DJANGO_LOG_FORMAT=json`` (the production settings' default). What is logged at
INFO is the caller's responsibility: Engram's own INFO lines carry identifiers, counts and timings,
never request bodies, headers or memory content (``tests/core/test_logs.py`` holds the access log to
that).
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

#: the id of the HTTP request (or task) this thread or task is serving; None outside one
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("engram_request_id", default=None)

# the attributes every LogRecord has: whatever else a record carries came from ``extra=``
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
_CONTEXT = frozenset({"tenant", "request_id"})
_PLAIN = (str, int, float, bool, type(None))


@contextmanager
def request_context(request_id: str) -> Iterator[None]:
    """Tag every log line of the block with ``request_id``; the previous id comes back after."""
    token = REQUEST_ID.set(request_id)
    try:
        yield
    finally:
        REQUEST_ID.reset(token)


def current_tenant_name() -> str | None:
    """The schema of the active tenant on this thread's default connection, ``None`` for the public
    schema or when Django's connections are not set up (no query is sent)."""
    try:
        from django.db import connection

        schema = getattr(connection, "schema_name", None)
    except Exception:  # logging before Django is configured
        return None
    return None if not schema or schema == "public" else str(schema)


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": REQUEST_ID.get(),
            "tenant": current_tenant_name(),
        }
        for name, value in vars(record).items():
            # a caller's extra fields, plain values only: Django's ``django.request`` lines carry the
            # request object, whose repr holds the query string; ``tenant`` or ``request_id`` given
            # by the caller win when they know better
            if name in _STANDARD or not isinstance(value, _PLAIN):
                continue
            if name not in entry or (value and name in _CONTEXT):
                entry[name] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)
