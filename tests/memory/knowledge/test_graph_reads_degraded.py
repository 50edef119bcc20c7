"""Graph reads answer correctly when the Neo4j projection cannot: from PostgreSQL, and they say so.

- The projection lags (the tenant's outbox has pending rows): PostgreSQL answers, marked
  ``backend: "postgresql"`` and ``Engram-Degraded: graph-projection-stale``.
- Neo4j cannot be reached: PostgreSQL answers within a bounded time, marked
  ``Engram-Degraded: neo4j-unavailable``, and the failure is remembered for a while so the next
  requests do not wait on Neo4j again. The bounds asserted here are hangs (the defect was a 60 s
  wait and an HTML 500), far above what a healthy answer takes.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import pytest
from django.test import override_settings
from django_tenants.utils import tenant_context

from core.neo4j import Neo4jUnavailable
from devstack import free_port
from memory.knowledge.models import GraphOutbox
from memory.knowledge.projection import outbox_drain
from tests.factories import Caller, assert_fact, fact
from tests.memory.knowledge.test_graph_neo4j import build, neo4j, project  # noqa: F401 - ``neo4j`` is a fixture

DEGRADED = "Engram-Degraded"


def path(caller: Caller, source: str, target: str):  # type: ignore[no-untyped-def]
    return caller.get("/api/v1/graph/path", {"source": source, "target": target})


@pytest.mark.usefixtures("neo4j")
def test_a_lagging_projection_is_answered_from_postgresql(alice: Caller) -> None:
    build(alice)
    assert_fact(alice, fact("Zed", "knows", {"entity": "Yan"}))  # an island
    project(alice)
    fresh = path(alice, "Zed", "Portugal")
    assert fresh.status_code == 404  # no such path yet, and Neo4j is up to date: a real "no path"
    assert DEGRADED not in fresh.headers

    # Yan -> Lisbon joins the island to the rest; Ana's job is withdrawn. Neither is projected yet.
    assert_fact(alice, fact("Yan", "lives_in", {"entity": "Lisbon"}))
    ana_job = alice.get("/api/v1/entities/Ana/facts").json()["facts"]
    ana_acme = next(f for f in ana_job if f["predicate"] == "works_at")
    assert alice.post(f"/api/v1/facts/{ana_acme['id']}/retract", {}).status_code == 200

    stale = path(alice, "Zed", "Portugal")
    assert stale.status_code == 200, stale.content
    assert stale.headers[DEGRADED] == "graph-projection-stale"
    body = stale.json()
    assert body["backend"] == "postgresql" and body["hops"] == 3
    assert [e["name"] for e in body["entities"]] == ["Zed", "Yan", "Lisbon", "Portugal"]
    hood = alice.get("/api/v1/entities/Ana/facts", {"depth": 2})
    assert hood.headers[DEGRADED] == "graph-projection-stale"
    graph = hood.json()["graph"]
    assert graph["backend"] == "postgresql"
    assert ana_acme["id"] not in {f["id"] for f in graph["facts"]}
    assert all(f["status"] in ("active", "disputed") for f in graph["facts"])

    project(alice)  # the projection catches up: Neo4j answers again, unmarked
    caught_up = path(alice, "Zed", "Portugal")
    assert caught_up.status_code == 200 and DEGRADED not in caught_up.headers
    assert caught_up.json()["backend"] == "neo4j" and caught_up.json()["hops"] == body["hops"]
    hood = alice.get("/api/v1/entities/Ana/facts", {"depth": 2})
    assert DEGRADED not in hood.headers and hood.json()["graph"]["backend"] == "neo4j"
    assert ana_acme["id"] not in {f["id"] for f in hood.json()["graph"]["facts"]}


@contextlib.contextmanager
def silent_server() -> Iterator[socket.socket]:
    """A listening TCP socket that takes connections and never answers (a hung Neo4j)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.setblocking(False)
    try:
        yield listener
    finally:
        listener.close()


def connections_since(listener: socket.socket | None) -> int:
    """How many connections reached ``listener`` since the last call (``0`` without one)."""
    count = 0
    while listener is not None:
        try:
            listener.accept()[0].close()
        except BlockingIOError:
            break
        count += 1
    return count


@pytest.mark.usefixtures("neo4j")
@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_neo4j_down_is_answered_from_postgresql_quickly(alice: Caller, kind: str) -> None:
    build(alice)
    assert_fact(alice, fact("Zed", "knows", {"entity": "Yan"}))  # an island
    project(alice)  # the projection is complete: Neo4j would be asked
    with contextlib.ExitStack() as stack:
        listener = stack.enter_context(silent_server()) if kind == "silent" else None
        port = listener.getsockname()[1] if listener is not None else free_port()
        stack.enter_context(
            override_settings(
                NEO4J_URI=f"bolt://127.0.0.1:{port}",
                NEO4J_CONNECTION_TIMEOUT=1.0,
                NEO4J_ACQUISITION_TIMEOUT=1.5,
                NEO4J_MAX_RETRY_TIME=1.0,
            )
        )
        started = time.monotonic()
        first = path(alice, "Ana", "Portugal")
        first_took = time.monotonic() - started
        assert first.status_code == 200, first.content
        assert first.headers[DEGRADED] == "neo4j-unavailable"
        assert first.json()["backend"] == "postgresql" and first.json()["hops"] == 3
        assert first_took < 10

        # the failure is remembered: no second wait on Neo4j (a hung one is not even dialled again)
        assert connections_since(listener) >= (1 if listener is not None else 0)
        started = time.monotonic()
        hood = alice.get("/api/v1/entities/Ana/facts", {"depth": 2})
        assert connections_since(listener) == 0
        assert time.monotonic() - started < (1.0 if listener is None else 10)
        assert hood.status_code == 200 and hood.headers[DEGRADED] == "neo4j-unavailable"
        graph = hood.json()["graph"]
        assert graph["backend"] == "postgresql"
        assert {e["name"] for e in graph["entities"] if e["distance"] == 1} == {"Ben", "Acme", "Eli", "Hub"}
        assert path(alice, "Ana", "Zed").status_code == 404  # a real "no path", from PostgreSQL

        # the drain cannot project: it fails fast and clearly, and the change stays pending
        assert_fact(alice, fact("Ivy", "knows", {"entity": "Ana"}))
        started = time.monotonic()
        with tenant_context(alice.tenant):
            with pytest.raises(Neo4jUnavailable):
                outbox_drain()
            assert time.monotonic() - started < 10
            assert GraphOutbox.objects.filter(processed_at__isnull=True).count() == 1
