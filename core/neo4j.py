"""The process-wide Neo4j driver, made from settings, and what this process knows about reaching it.

Neo4j is optional (DESIGN.md): without ``NEO4J_URI`` :func:`get_driver` returns ``None`` and callers
use PostgreSQL. A ``neo4j.Driver`` is thread-safe and pools its connections, so one per server is
shared; a forked child (a Celery prefork worker) makes its own on first use.

Neo4j being down must cost a request seconds, not minutes: the driver's defaults wait up to 30 s to
connect, 60 s for a pooled connection and retry a transaction for 30 s, so ``GET graph/path`` took
over a minute and then failed. The timeouts here are settings (seconds):

- ``NEO4J_CONNECTION_TIMEOUT`` (3): to open a TCP connection;
- ``NEO4J_ACQUISITION_TIMEOUT`` (5): to get a connection from the pool, opening one and the Bolt
  handshake included (a server that accepts and never answers is bounded by this);
- ``NEO4J_MAX_RETRY_TIME`` (3): how long a managed transaction is retried on transient errors;
- ``NEO4J_READ_TIMEOUT`` (5) and ``NEO4J_WRITE_TIMEOUT`` (60): server-side limits on a graph query
  and on a projection write;
- ``NEO4J_UNAVAILABLE_FOR`` (15): after a failure to reach Neo4j, how long :func:`neo4j_guard`
  refuses at once instead of trying again (:class:`Neo4jUnavailable`), so that following requests
  go straight to PostgreSQL instead of waiting on the timeouts again.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import neo4j
from django.conf import settings
from neo4j.exceptions import Neo4jError, ServiceUnavailable, SessionExpired

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Server:
    """The settings a driver is made from (timeouts in seconds)."""

    uri: str
    user: str
    password: str = field(repr=False)
    connect: float
    acquire: float
    retry: float


_lock = threading.Lock()
_drivers: dict[_Server, neo4j.Driver] = {}
# server -> time.monotonic() until which it counts as unreachable
_unavailable_until: dict[_Server, float] = {}

# Server errors that mean "Neo4j did not answer in time" rather than "the query is wrong".
_TIMEOUT_CODES = frozenset(
    {
        "Neo.ClientError.Transaction.TransactionTimedOut",
        "Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration",
    }
)


class Neo4jUnavailable(RuntimeError):
    """Neo4j could not be reached or did not answer in time (now or within ``NEO4J_UNAVAILABLE_FOR``
    seconds before); the caller should answer from PostgreSQL or leave the work for later."""


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def _key() -> _Server | None:
    uri = getattr(settings, "NEO4J_URI", "") or ""
    if not uri:
        return None
    connect = _setting("NEO4J_CONNECTION_TIMEOUT", 3.0)
    return _Server(
        uri=uri,
        user=getattr(settings, "NEO4J_USER", "") or "",
        password=getattr(settings, "NEO4J_PASSWORD", "") or "",
        connect=connect,
        # acquiring includes connecting: a shorter limit would cut connecting short
        acquire=max(_setting("NEO4J_ACQUISITION_TIMEOUT", 5.0), connect),
        retry=_setting("NEO4J_MAX_RETRY_TIME", 3.0),
    )


def get_driver() -> neo4j.Driver | None:
    """The shared driver for the configured server, or ``None`` when ``NEO4J_URI`` is empty.

    Connections are opened lazily, on the first query. Other settings (tests overriding them) give
    another driver; earlier ones stay open for whoever still holds them, until :func:`close_driver`.
    """
    key = _key()
    if key is None:
        return None
    with _lock:
        driver = _drivers.get(key)
        if driver is None:
            driver = neo4j.GraphDatabase.driver(
                key.uri,
                auth=(key.user, key.password) if key.user else None,
                user_agent="engram",
                connection_timeout=key.connect,
                connection_acquisition_timeout=key.acquire,
                max_transaction_retry_time=key.retry,
            )
            _drivers[key] = driver
        return driver


def read_timeout() -> float:
    """Seconds a graph query may run on the server (``NEO4J_READ_TIMEOUT``)."""
    return _setting("NEO4J_READ_TIMEOUT", 5.0)


def write_timeout() -> float:
    """Seconds a projection write may run on the server (``NEO4J_WRITE_TIMEOUT``)."""
    return _setting("NEO4J_WRITE_TIMEOUT", 60.0)


def neo4j_available() -> bool:
    """False while a failure to reach the configured Neo4j is remembered (``NEO4J_UNAVAILABLE_FOR``)."""
    key = _key()
    return key is not None and _unavailable_until.get(key, 0.0) <= time.monotonic()


def is_unavailable_error(exc: BaseException) -> bool:
    """Whether ``exc`` from the driver means Neo4j could not be reached or did not answer in time."""
    if isinstance(exc, ServiceUnavailable | SessionExpired):
        return True
    return isinstance(exc, Neo4jError) and exc.code in _TIMEOUT_CODES


@contextlib.contextmanager
def neo4j_guard() -> Iterator[None]:
    """Run Neo4j work; raises :class:`Neo4jUnavailable` at once while a recent failure is remembered,
    and when the work fails to reach Neo4j (remembering that failure). Other errors pass through."""
    key = _key()
    if key is None:
        raise Neo4jUnavailable("NEO4J_URI is not set")
    if not neo4j_available():
        raise Neo4jUnavailable(f"Neo4j at {key.uri} failed moments ago; not trying again yet")
    try:
        yield
    except Exception as exc:
        if not is_unavailable_error(exc):
            raise
        _unavailable_until[key] = time.monotonic() + _setting("NEO4J_UNAVAILABLE_FOR", 15.0)
        logger.warning("Neo4j at %s is unavailable: %s", key.uri, exc)
        raise Neo4jUnavailable(f"Neo4j at {key.uri} is unavailable: {exc}") from exc


def close_driver() -> None:
    """Close every driver (their pooled connections); the next :func:`get_driver` makes a new one."""
    with _lock:
        drivers = list(_drivers.values())
        _drivers.clear()
        _unavailable_until.clear()
    for driver in drivers:
        driver.close()


def _forget_after_fork() -> None:
    # the parent's sockets are not the child's to use or close: start afresh
    global _lock
    _drivers.clear()
    _unavailable_until.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(close_driver)
