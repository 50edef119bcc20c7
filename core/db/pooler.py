"""Engram needs each client connection to keep its own server session: a pooler in front of
PostgreSQL must pool by session (PgBouncer ``pool_mode = session``), never by transaction or
statement (docs/decisions/0061-session-pooling-required.md).

The backend sends ``SET ROLE`` and ``SET search_path`` once per connection and unit of work, as
session settings, and relies on them for the statements that follow (``core.db.base``); hot paths
use server-side prepared statements (``core.db.prepared``, psycopg's automatic preparation), and
some locks are session advisory locks (``core.locks``). A transaction pooler hands the next transaction
to whichever server connection is free: another unit's role and search path, or none.

``session_pooling_problem`` finds such a pooler: two client connections, one holding a transaction
open; a transaction pooler then serves the other's next statement on another server process (or
makes it wait for the held one), while PostgreSQL itself, or a session pooler, keeps each client on
its own process. ``check_session_pooling`` is the Django system check that runs it (tag
``database``: ``manage.py check --database default``, which the deploy files run before the web
server and the worker start, and ``migrate``), once per server and process.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import psycopg
from django.core import checks
from django.db import connections

#: seconds the probe waits for its second statement before calling the wait itself proof
WAIT = 3.0

_PID = "SELECT pg_backend_pid()"

# (host, port, dbname, user) -> the probe's answer, in this process
_probed: dict[tuple[str, ...], str | None] = {}


def session_pooling_problem(params: dict[str, Any]) -> str | None:
    """Why the server reached with psycopg connection ``params`` does not keep a client on its own
    session (a sentence), or ``None`` when it does. Raises ``psycopg.Error`` when it cannot connect."""
    params = {**params, "autocommit": True}
    with psycopg.connect(**params) as probe, psycopg.connect(**params) as holder:
        first = probe.execute(_PID).fetchone()
        try:
            holder.execute("BEGIN")
            holder.execute(_PID).fetchone()  # pins a server connection until COMMIT
        except psycopg.Error as exc:
            return f"a transaction block was refused ({exc}): the server is a statement pooler"

        answer: dict[str, Any] = {}

        def second() -> None:
            try:
                answer["pid"] = probe.execute(_PID).fetchone()
            except psycopg.Error as exc:
                answer["error"] = exc

        thread = threading.Thread(target=second, daemon=True)
        thread.start()
        thread.join(WAIT)
        waited = thread.is_alive()
        holder.execute("COMMIT")
        thread.join(WAIT)
    if waited:
        return (
            "a statement on one connection waited for another connection's transaction: the server "
            "is a pooler lending server connections per transaction or statement"
        )
    if "error" in answer:
        raise answer["error"]
    if answer.get("pid") != first:
        return (
            f"one client connection ran on server process {first[0] if first else '?'} and then on "
            f"{answer['pid'][0] if answer.get('pid') else '?'}: the server is a pooler lending server "
            "connections per transaction or statement"
        )
    return None


def check_session_pooling(
    app_configs: Any = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """The ``engram.E010`` error for each database in ``databases`` reached through a transaction
    or statement pooler (see the module docstring); a warning when it cannot be probed."""
    messages: list[checks.CheckMessage] = []
    for alias in databases or []:
        wrapper = connections[alias]
        if wrapper.vendor != "postgresql":
            continue
        params = wrapper.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        server = tuple(str(params.get(name, "")) for name in ("host", "port", "dbname", "user"))
        try:
            if server not in _probed:  # once per server and process: migrate_schemas checks per schema
                _probed[server] = session_pooling_problem(params)
            problem = _probed[server]
        except psycopg.Error as exc:
            messages.append(
                checks.Warning(
                    f"Could not probe how database {alias!r} pools connections: {exc}",
                    id="engram.W010",
                )
            )
            continue
        if problem:
            messages.append(
                checks.Error(
                    f"Database {alias!r} is reached through a transaction pooler: {problem}.",
                    hint="Engram sets the role and search path per session: use PgBouncer's "
                    "pool_mode = session (docs/operations/production.md), or connect to PostgreSQL directly.",
                    id="engram.E010",
                )
            )
    return messages
