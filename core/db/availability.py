"""Whether this process can reach PostgreSQL, so that a server that is down or hung costs a request
a fraction of a second to two seconds and a 503 (``DatabaseUnavailable``), not a 500 after the
pool's timeout (issue 28, item 6).

Three bounds, in seconds (settings):

- ``connect_timeout`` (``DATABASE_CONNECT_TIMEOUT``, 2: libpq's minimum) on every new connection,
  pooled or not: a server that accepts TCP and never answers (a stopped postmaster) would otherwise
  hold a connection attempt for psycopg's default of 130 s.
- ``DATABASE_UNAVAILABLE_FOR`` (2): after an attempt to connect fails because the server cannot be
  reached (refused, timed out, closed, shutting down or starting up), new connections are refused
  at once (``DatabaseUnreachable``) for that long, and again after each failure; the first
  connection that succeeds ends it. With the pool, a request then still takes a connection that is
  ready in the pool, and asking for one makes the pool try to connect again in the background (one
  attempt at a time), so under traffic the server is found again within about a second of coming
  back.
- ``DATABASE_POOL_TIMEOUT`` (the pool's ``timeout``, 10): how long a request waits for a pooled
  connection while every one is busy, as before; but the wait ends at once (within ``STEP``) when
  one of the pool's attempts to connect fails meanwhile (``GuardedPool``), instead of waiting out
  the timeout for a connection that will not come.

The pool learns of its attempts through ``Connection`` (its ``connection_class``); without the pool
the backend reports its own attempts (``connect_direct``). Failures are per server (host, port) and
per process. A server that stops answering on connections already open is not bounded here: a
stopped postmaster leaves its backends serving; a server frozen whole hangs queries already sent.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Self, TypeVar, cast

import psycopg
from django.conf import settings
from django.db import Error as DjangoDatabaseError
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from core.errors import DatabaseUnavailable, ServiceUnavailable

logger = logging.getLogger(__name__)

#: seconds a request waits for the pool between two looks at whether its attempts fail
STEP = 0.25
#: seconds a request waits for a connection that is ready in the pool while the server is unreachable
READY = 0.001
#: SQLSTATEs (besides class 08, connection exception) meaning the server cannot serve this
#: connection: admin_shutdown, crash_shutdown, cannot_connect_now
UNREACHABLE_STATES = frozenset({"57P01", "57P02", "57P03"})
#: ... and those meaning a request can be served again later: too_many_connections
UNAVAILABLE_STATES = UNREACHABLE_STATES | {"53300"}

#: what a server that is up answers at start-up when it refuses this login or database (a role that
#: does not exist or may not log in, a wrong password, no pg_hba.conf entry, a missing database):
#: that connection's fault, so it must not refuse every other connection to the server. libpq
#: reports start-up errors without their SQLSTATE, so they are told by the server's message
#: (English, as the embedded server and the documented setup run, lc_messages 'C')
REFUSED_LOGIN = re.compile(
    r"FATAL:\s+(password authentication failed|role \".*\" (does not exist|is not permitted to log in)"
    r"|database \".*\" does not exist|no pg_hba\.conf entry|pg_hba\.conf rejects connection"
    r"|permission denied for database)"
)

T = TypeVar("T")
Server = tuple[str, str]

# server -> time.monotonic() of its last failure to connect / until which connecting is refused
_failed_at: dict[Server, float] = {}
_refused_until: dict[Server, float] = {}
# servers whose last attempt failed (for logging the change both ways once)
_down: set[Server] = set()


class DatabaseUnreachable(psycopg.OperationalError):
    """No connection was tried: an attempt to reach the server failed moments ago."""


def unavailable_for() -> float:
    """Seconds connecting is refused after a failure to reach the server (``DATABASE_UNAVAILABLE_FOR``)."""
    return float(getattr(settings, "DATABASE_UNAVAILABLE_FOR", 2.0))


def retry_after() -> int:
    """The ``Retry-After`` of a 503 for the database, in whole seconds (at least 1)."""
    return max(1, math.ceil(unavailable_for()))


def server_of(params: Mapping[str, Any], conninfo: str = "") -> Server:
    """The server (host, port) a connection with these parameters goes to (``("", "")``: libpq's
    defaults)."""
    return _server(conninfo, str(params.get("host") or ""), str(params.get("port") or ""))


@functools.lru_cache(maxsize=64)
def _server(conninfo: str, host: str, port: str) -> Server:
    resolved = conninfo_to_dict(conninfo, **{k: v for k, v in (("host", host), ("port", port)) if v})
    return str(resolved.get("host") or ""), str(resolved.get("port") or "")


def available(server: Server) -> bool:
    """False while connecting to ``server`` is refused (a failure within ``DATABASE_UNAVAILABLE_FOR``)."""
    return _refused_until.get(server, 0.0) <= time.monotonic()


def failed_since(server: Server, moment: float) -> bool:
    """Whether an attempt to reach ``server`` failed at or after ``moment`` (``time.monotonic()``)."""
    return _failed_at.get(server, -math.inf) >= moment


def is_unreachable_error(exc: BaseException) -> bool:
    """Whether ``exc``, from an attempt to connect, means the server cannot be reached right now
    (refused, timed out, closed the connection, shutting down or starting up); not when the server
    answered by refusing this login or database (``REFUSED_LOGIN``)."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    if state is None:
        return not REFUSED_LOGIN.search(str(exc))
    return state.startswith("08") or state in UNREACHABLE_STATES


def is_unavailable_error(exc: BaseException) -> bool:
    """Whether ``exc`` (a driver or pool error, or Django's wrapper of one) means PostgreSQL cannot
    serve the request now: it cannot be reached, closed the connection, is shutting down or
    starting up, has no connection slot left, or the pool had none in time. Other database errors
    (a statement timeout, a deadlock, a constraint) are not, nor is any other exception."""
    # Django's wrapper keeps the driver's error as its cause
    error = exc.__cause__ if isinstance(exc, DjangoDatabaseError) else exc
    if not isinstance(error, psycopg.OperationalError):
        return False
    state = error.sqlstate
    return state is None or state.startswith("08") or state in UNAVAILABLE_STATES


def unavailable(exc: BaseException) -> ServiceUnavailable | None:
    """The 503 to answer for ``exc`` (``core.errors.DatabaseUnavailable``; ``exc`` itself when it
    is a ``ServiceUnavailable`` already, e.g. a moving tenant's unit refused by the backend), or
    ``None`` when it is not one (see ``is_unavailable_error``)."""
    if isinstance(exc, ServiceUnavailable):
        return exc
    if not is_unavailable_error(exc):
        return None
    return DatabaseUnavailable(retry_after=retry_after())


@contextmanager
def database_errors() -> Iterator[None]:
    """Turn PostgreSQL being unavailable into ``DatabaseUnavailable`` (503), for code outside the
    API's exception handler (the SSE stream's and MCP's key checks); other errors pass through."""
    try:
        yield
    except Exception as exc:
        answer = unavailable(exc)
        if answer is None:
            raise
        raise answer from exc


def _note(server: Server, exc: BaseException | None) -> None:
    """Remember how an attempt to connect to ``server`` ended (``exc``: ``None`` when it succeeded)."""
    if exc is None:
        _refused_until.pop(server, None)
        if server in _down:
            _down.discard(server)
            logger.warning("PostgreSQL at %s:%s answers again", *server)
        return
    if not is_unreachable_error(exc):
        return
    now = time.monotonic()
    _failed_at[server] = now
    _refused_until[server] = now + unavailable_for()
    if server not in _down:
        _down.add(server)
        logger.warning(
            "PostgreSQL at %s:%s cannot be reached (%s); new connections are refused for %.1f s after "
            "each failure until one succeeds",
            *server,
            (str(exc).strip().splitlines() or [type(exc).__name__])[0],
            unavailable_for(),
        )


def _refusal(server: Server) -> DatabaseUnreachable:
    return DatabaseUnreachable(
        f"PostgreSQL at {server[0]}:{server[1]} could not be reached moments ago; not trying again yet"
    )


def connect_direct(connect: Callable[[], T], params: Mapping[str, Any]) -> T:
    """``connect()`` (a new connection without the pool, to the server ``params`` name), unless a
    recent failure is remembered (``DatabaseUnreachable`` at once); its outcome is remembered."""
    server = server_of(params)
    if not available(server):
        raise _refusal(server)
    try:
        connection = connect()
    except Exception as exc:
        _note(server, exc)
        raise
    _note(server, None)
    return connection


class Connection(psycopg.Connection[Any]):
    """psycopg's connection, remembering whether each attempt to connect reached the server: the
    pool's ``connection_class`` (its attempts run in its own threads)."""

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
        server = server_of(kwargs, conninfo)
        try:
            connection = super().connect(conninfo, **kwargs)
        except Exception as exc:
            _note(server, exc)
            raise
        _note(server, None)
        return connection


class GuardedPool(ConnectionPool[Any]):
    """psycopg's pool whose ``getconn`` waits for a connection in steps of ``STEP`` and stops
    waiting when one of the pool's attempts to connect fails meanwhile (``DatabaseUnreachable``);
    while the server is refused, it takes a connection only if one is ready. Its ``close`` also
    closes the connections whose return was still queued. Django builds the pool itself, as a plain
    ``ConnectionPool`` (no setting names its class): ``guard`` makes it this one.
    """

    def getconn(self, timeout: float | None = None) -> Any:
        """A connection of the pool (see the class docstring); ``timeout``: the pool's own unless
        given. Raises ``DatabaseUnreachable`` or ``psycopg_pool.PoolTimeout``."""
        conn = self._getconn_guarded(timeout)
        self._given_back().discard(conn)
        return conn

    def putconn(self, conn: Any) -> None:
        """psycopg's, remembering ``conn`` until it is lent again (see ``close``)."""
        self._given_back().add(conn)
        super().putconn(conn)

    def close(self, timeout: float = 5.0) -> None:
        """psycopg's, then closes every connection given back and not lent since: psycopg's workers
        give a connection back (its ``reset``) in a task, and drop a task still queued when the pool
        closes, with the connection in it, left open until garbage collection (dropping the
        database then fails: "being accessed by other users"). Connections lent out stay open, as
        psycopg's ``close`` leaves them."""
        super().close(timeout)
        given_back = self._given_back()
        for conn in list(given_back):
            conn.close()
        given_back.clear()

    def _given_back(self) -> weakref.WeakSet[Any]:
        # ``guard`` makes a pool of this class without running an __init__ of it
        return cast("weakref.WeakSet[Any]", self.__dict__.setdefault("_given_back_set", weakref.WeakSet()))

    def _getconn_guarded(self, timeout: float | None) -> Any:
        kwargs = self.kwargs if isinstance(self.kwargs, Mapping) else {}
        server = server_of(kwargs, self.conninfo if isinstance(self.conninfo, str) else "")
        start = time.monotonic()
        if not available(server):
            try:
                return super().getconn(timeout=READY)
            except PoolTimeout:
                raise _refusal(server) from None
        wait = self.timeout if timeout is None else timeout
        deadline = start + wait
        while True:
            try:
                return super().getconn(timeout=max(READY, min(STEP, deadline - time.monotonic())))
            except PoolTimeout:
                if failed_since(server, start):
                    raise _refusal(server) from None
                if time.monotonic() >= deadline:
                    raise PoolTimeout(f"couldn't get a connection after {wait:.2f} sec") from None


def guard(pool: ConnectionPool[Any]) -> ConnectionPool[Any]:
    """``pool`` as a ``GuardedPool`` (the same object: it changes ``getconn``, ``putconn`` and
    ``close``)."""
    if type(pool) is ConnectionPool:
        pool.__class__ = GuardedPool
    return pool


def pool_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` (the ``pool`` of a database's ``OPTIONS``) with the connection class that
    reports its attempts and a short ``reconnect_timeout``: after a failure the pool retries once
    and leaves further attempts to demand (``GuardedPool``), instead of backing off for minutes
    while the server is back. Returns ``options``."""
    options.setdefault("connection_class", Connection)
    options.setdefault("reconnect_timeout", unavailable_for())
    return options
