"""What one fact assert costs the database: the statements of ``POST /api/v1/facts`` with one fact,
and no outbox work when there is no projection to feed (the load test's fact path,
docs/decisions/0113-the-fact-path-under-load.md)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_tenants.utils import tenant_context

from memory.knowledge.models import GraphOutbox
from tests.factories import Caller

FACT = {
    "subject": "invoice 7",
    "predicate": "owned_by",
    "object": {"entity": "Alice", "type": "person"},
    "session_id": "s1",
}


def _statements(caller: Caller, body: dict) -> list[str]:  # type: ignore[type-arg]
    with CaptureQueriesContext(connection) as captured:
        response = caller.post("/api/v1/facts", body)
    assert response.status_code in (200, 201), response.content
    return [q["sql"] for q in captured.captured_queries]


def test_a_single_reinforcing_assert_takes_ten_statements(alice: Caller, settings) -> None:  # type: ignore[no-untyped-def]
    """The key, the transaction's savepoint (the test's transaction holds the request's), the
    entities and the predicate (one statement each), the lock, the facts judged against, the
    provenance row, the outbox row, the release and the fact as answered: no nested savepoint, no
    statement per entity."""
    settings.NEO4J_URI = "bolt://127.0.0.1:1"  # a projection (never connected to here)
    _statements(alice, FACT)
    statements = _statements(alice, FACT)
    assert len(statements) == 10, "\n".join(s[:100] for s in statements)
    assert sum(s.startswith("SAVEPOINT") for s in statements) == 1


@pytest.mark.parametrize("projected", [False, True], ids=["without a projection", "with one"])
def test_a_fact_write_queues_its_outbox_row_and_one_drain_only_for_a_projection(
    alice: Caller,
    settings,  # type: ignore[no-untyped-def]
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
    projected: bool,
) -> None:
    settings.NEO4J_URI = "bolt://127.0.0.1:1" if projected else ""  # never connected to here
    with django_capture_on_commit_callbacks() as callbacks:
        response = alice.post("/api/v1/facts", FACT)
    assert response.status_code == 201
    assert response.json()["projection"] == ("pending" if projected else "none")
    assert len(callbacks) == (1 if projected else 0)
    with tenant_context(alice.tenant):
        rows = list(GraphOutbox.objects.values_list("fact_id", flat=True))
    assert rows == ([response.json()["fact"]["id"]] if projected else [])
