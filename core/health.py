"""Readiness: can this process serve requests now? PostgreSQL and Redis are required, Neo4j is
reported and required only when ``ENGRAM["READINESS_NEO4J_REQUIRED"]`` says so (recall and the
knowledge layer answer from PostgreSQL while Neo4j is away, so by default it never takes a process
out of rotation).

Each dependency is checked in a thread of its own, all at once, and the answer waits at most
``ENGRAM["READINESS_TIMEOUT"]`` seconds (default 1.0): a dependency that has not answered by then is
reported down (``"timeout"``). A check still running from an earlier probe is waited on, not started
twice, so a hung server never piles up threads. What each check does:

- ``postgresql``: ``SELECT 1`` on this thread's Django connection (the process's pool when it has
  one, so it proves what requests use; ``core.db.availability`` refuses at once for a couple of
  seconds after a failure to connect), then the connection is given back.
- ``redis``: ``PING`` through ``core.redis.get_redis`` (0.5 s to connect, 1 s to answer).
- ``neo4j``: the driver's ``verify_connectivity`` (``NEO4J_CONNECTION_TIMEOUT``); ``configured``
  false and ``ok`` null when ``NEO4J_URI`` is empty.

Liveness needs nothing from here: the process answering at all is the proof.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

#: the names that appear in the readiness body, in order
DEPENDENCIES = ("postgresql", "redis", "neo4j")
LABELS = {"postgresql": "PostgreSQL", "redis": "Redis", "neo4j": "Neo4j"}

_executor = ThreadPoolExecutor(max_workers=len(DEPENDENCIES), thread_name_prefix="readiness")
_pending: dict[str, Future[None]] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Check:
    """One dependency's answer: ``ok`` (``None``: not configured), whether it is ``required``, the
    seconds it took (``None`` on a timeout), and the error's kind (an exception class name or
    ``"timeout"``; the message goes to the log only, not to unauthenticated callers)."""

    name: str
    ok: bool | None
    required: bool
    seconds: float | None = None
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"ok": self.ok, "required": self.required}
        if self.seconds is not None:
            body["ms"] = round(self.seconds * 1000, 1)
        if self.error:
            body["error"] = self.error
        return body


def timeout() -> float:
    """Seconds a readiness probe waits for its dependencies (``ENGRAM["READINESS_TIMEOUT"]``)."""
    return float(settings.ENGRAM.get("READINESS_TIMEOUT", 1.0))


def neo4j_required() -> bool:
    """Whether Neo4j being down makes the process unready (``ENGRAM["READINESS_NEO4J_REQUIRED"]``)."""
    return bool(settings.ENGRAM.get("READINESS_NEO4J_REQUIRED", False))


def _postgresql() -> None:
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        connection.close()  # a thread of the probe's own: give the connection back to the pool


def _redis() -> None:
    from core.redis import get_redis

    get_redis().ping()


def _neo4j() -> None:
    from core.neo4j import get_driver

    driver = get_driver()
    if driver is not None:
        driver.verify_connectivity()


_PROBES: dict[str, Callable[[], None]] = {"postgresql": _postgresql, "redis": _redis, "neo4j": _neo4j}


def _submit(name: str) -> Future[None]:
    with _lock:
        future = _pending.get(name)
        if future is None or future.done():
            future = _executor.submit(_PROBES[name])
            _pending[name] = future
        return future


def readiness() -> list[Check]:
    """Check every dependency at once (see the module docstring); returns one ``Check`` per name of
    ``DEPENDENCIES``, within about ``timeout()`` seconds whatever the dependencies do."""
    required = {"postgresql": True, "redis": True, "neo4j": neo4j_required()}
    neo4j_configured = bool(getattr(settings, "NEO4J_URI", ""))
    names = [n for n in DEPENDENCIES if n != "neo4j" or neo4j_configured]
    started = time.monotonic()
    futures = {name: _submit(name) for name in names}
    deadline = started + timeout()
    checks: dict[str, Check] = {"neo4j": Check("neo4j", None, required["neo4j"], error="not configured")}
    for name, future in futures.items():
        try:
            future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            checks[name] = Check(name, False, required[name], error="timeout")
            logger.warning("readiness: %s did not answer within %.1f s", LABELS[name], timeout())
        except Exception as exc:
            checks[name] = Check(name, False, required[name], time.monotonic() - started, type(exc).__name__)
            logger.warning("readiness: %s is unavailable: %s", LABELS[name], exc)
        else:
            checks[name] = Check(name, True, required[name], time.monotonic() - started)
    return [checks[name] for name in DEPENDENCIES]


def down(checks: list[Check]) -> list[str]:
    """The labels (``PostgreSQL``, ``Redis``, ``Neo4j``) of the required dependencies that failed."""
    return [LABELS[c.name] for c in checks if c.required and c.ok is False]
