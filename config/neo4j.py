"""The process-wide Neo4j driver, made from settings (``NEO4J_URI``, ``NEO4J_USER``, ``NEO4J_PASSWORD``).

Neo4j is optional (DESIGN.md): without ``NEO4J_URI`` :func:`get_driver` returns ``None`` and callers
fall back to PostgreSQL. A ``neo4j.Driver`` is thread-safe and pools its connections, so one per
process is shared; a forked child (a Celery prefork worker) makes its own on first use.
"""

from __future__ import annotations

import atexit
import os
import threading

import neo4j
from django.conf import settings

_lock = threading.Lock()
_driver: neo4j.Driver | None = None
_driver_key: tuple[str, str, str] | None = None


def get_driver() -> neo4j.Driver | None:
    """The shared driver for the configured server, or ``None`` when ``NEO4J_URI`` is empty.

    Connections are opened lazily, on the first query. A change of settings (tests overriding
    them) gives a new driver for the new server.
    """
    global _driver, _driver_key
    uri = getattr(settings, "NEO4J_URI", "") or ""
    if not uri:
        return None
    user = getattr(settings, "NEO4J_USER", "") or ""
    password = getattr(settings, "NEO4J_PASSWORD", "") or ""
    key = (uri, user, password)
    with _lock:
        if _driver is None or _driver_key != key:
            if _driver is not None:
                _driver.close()
            auth = (user, password) if user else None
            _driver = neo4j.GraphDatabase.driver(uri, auth=auth, user_agent="engram")
            _driver_key = key
        return _driver


def close_driver() -> None:
    """Close the shared driver (its pooled connections); the next :func:`get_driver` makes a new one."""
    global _driver, _driver_key
    with _lock:
        if _driver is not None:
            _driver.close()
        _driver = None
        _driver_key = None


def _forget_after_fork() -> None:
    # the parent's sockets are not the child's to use or close: start afresh
    global _driver, _driver_key, _lock
    _driver = None
    _driver_key = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(close_driver)
