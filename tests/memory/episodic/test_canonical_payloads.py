"""The episodic chain hashes exactly what it stores and returns (issue 7, item 2).

PostgreSQL's ``jsonb`` rewrites numbers (``1e20`` comes back as a 21-digit integer, ``-0.0`` as
``0``), so a hash computed over the payload as sent did not match the row read back: honest events
"broke" the chain and the API returned another payload than the one it had hashed. Payloads are
now kept as RFC 8785 canonical JSON text, and the hash covers that text.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django_tenants.utils import tenant_context

from core.canonical_json import canonical_json
from core.tenancy import maintenance
from memory.episodic.models import Event
from memory.episodic.selectors import chain_verify
from tests.factories import Caller, behind_the_triggers

EDGE_PAYLOADS: list[dict[str, Any]] = [
    {"big": 1e20, "bigger": 1e21, "neg": -1e20},
    {"zero": -0.0, "also": 0.0, "int_zero": 0},
    {"huge": 1.5e300, "max": 1.7976931348623157e308, "min_normal": 2.2250738585072014e-308},
    {"tiny": 5e-324, "small": 1e-7, "exp": 6.02214076e23},
    {"safe": 9007199254740991, "unsafe_but_exact": 100000000000000000000, "negsafe": -9007199254740991},
    {"long": 0.1000000000000000055511151231257827021181583404541015625, "third": 1 / 3},
    {"nested": [1.0, 2.5e-10, {"x": -1e21, "y": [[-0.0], 123456789.123456789]}], "text": "é\u2028🙂"},
]


def numbers(value: Any) -> list[float]:
    """Every number in a JSON value, depth first, as a double (booleans excluded)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [n for key in sorted(value) for n in numbers(value[key])]
    return [n for item in value for n in numbers(item)]


def post_events(caller: Caller, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    events = [
        {"session_id": "edge", "kind": "tool_result", "payload": p, "occurred_at": "2026-12-01T10:00:00Z"}
        for p in payloads
    ]
    response = caller.post("/api/v1/events", events)
    assert response.status_code == 201, response.content
    return response.json()["results"]


def test_edge_numbers_keep_the_chain_intact(alice: Caller) -> None:
    post_events(alice, EDGE_PAYLOADS)
    with tenant_context(alice.tenant):
        report = chain_verify()
    assert report.ok, report
    assert report.checked == len(EDGE_PAYLOADS)


def test_the_api_returns_what_was_hashed_and_stored(alice: Caller) -> None:
    created = post_events(alice, EDGE_PAYLOADS)
    listed = alice.get("/api/v1/events", {"session_id": "edge"}).json()["results"]
    assert [e["payload"] for e in listed] == [e["payload"] for e in created]
    with tenant_context(alice.tenant):
        with connection.cursor() as cursor:
            cursor.execute("SELECT payload_json FROM memory_event ORDER BY seq")
            stored = [row[0] for row in cursor.fetchall()]
    for sent, returned, text in zip(EDGE_PAYLOADS, listed, stored, strict=True):
        # the stored text is the canonical form of what the API returns, and the same numbers as sent
        assert canonical_json(returned["payload"], root="payload") == text
        assert numbers(returned["payload"]) == numbers(sent)
        assert not any(math.copysign(1.0, n) < 0 and n == 0 for n in numbers(returned["payload"]))


def test_returned_payloads_can_be_sent_again_unchanged(alice: Caller) -> None:
    first = post_events(alice, EDGE_PAYLOADS)
    again = post_events(alice, [e["payload"] for e in first])
    assert [e["payload"] for e in again] == [e["payload"] for e in first]


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ({"id": 2**64 + 1}, "payload.id"),
        ({"a": [0, {"b": -(2**70) - 3}]}, "payload.a[1].b"),
        ({"n": 9007199254740993}, "payload.n"),
    ],
)
def test_integers_a_double_cannot_hold_are_a_400_naming_the_path(
    alice: Caller, payload: dict[str, Any], path: str
) -> None:
    event = {
        "session_id": "s",
        "kind": "observation",
        "payload": payload,
        "occurred_at": "2026-12-01T10:00:00Z",
    }
    response = alice.post("/api/v1/events", event)
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert "payload" in errors
    assert path in errors["payload"][0]
    batch = alice.post("/api/v1/events", [dict(event, payload={}), event])
    assert batch.status_code == 400 and "events[1].payload" in batch.json()["errors"]
    with tenant_context(alice.tenant):
        assert not Event.objects.exists()


def test_verify_chain_command_passes_on_honest_edge_events(alice: Caller, capsys) -> None:  # type: ignore[no-untyped-def]
    post_events(alice, EDGE_PAYLOADS)
    call_command("verify_chain", "--tenant", alice.tenant.schema_name)
    assert "chain intact: 7 events verified" in capsys.readouterr().out


def test_a_payload_altered_behind_the_trigger_is_detected(alice: Caller) -> None:
    post_events(alice, EDGE_PAYLOADS[:3])
    with tenant_context(alice.tenant), behind_the_triggers() as cursor:
        # the same numbers as a person would read them, written in another form by the tables' owner
        cursor.execute(
            "UPDATE memory_event SET payload_json = %s WHERE seq = 2",
            [json.dumps({"also": 0.0, "int_zero": 0, "zero": 0.0})],
        )
    with tenant_context(alice.tenant):
        report = chain_verify()
    assert not report.ok
    assert report.broken_seq == 2
    assert "content" in report.reason


def test_events_written_before_format_2_keep_verifying(scratch_tenant, django_db_blocker) -> None:  # type: ignore[no-untyped-def]
    """Migrate a tenant back to before chain format 2, write format-1 events as the old code did
    (hash over ``json.dumps`` of the fields), migrate forward: the old rows verify as format 1 and
    new events chain onto them in format 2."""
    from datetime import UTC, datetime

    from django.db.migrations.executor import MigrationExecutor

    from agents.services import agent_create
    from memory.episodic.models import GENESIS_HASH, chain_hash_v1
    from memory.episodic.services import EventData, events_append

    with django_db_blocker.unblock(), tenant_context(scratch_tenant):
        executor = MigrationExecutor(connection)
        with maintenance():  # migrations run as the tables' owner
            executor.migrate([("memory", "0007_memory_access")])
        agent = agent_create(by=None, name="legacy")
        prev = GENESIS_HASH
        when = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
        with connection.cursor() as cursor:
            for seq, payload in enumerate([{"tool": "search", "n": 3}, {"ok": True, "score": 0.25}], start=1):
                fields = {
                    "session_id": "old",
                    "execution_id": None,
                    "agent_id": agent.pk,
                    "role": "assistant",
                    "kind": "tool_result",
                    "content": f"legacy {seq}",
                    "payload": payload,
                    "occurred_at": when,
                    "recorded_at": when,
                }
                digest = chain_hash_v1(seq=seq, prev_hash=prev, fields=fields)
                cursor.execute(
                    "INSERT INTO memory_event (seq, session_id, execution_id, agent_id, role, kind, content, "
                    "payload, occurred_at, recorded_at, prev_hash, hash) "
                    "VALUES (%s, 'old', NULL, %s, 'assistant', 'tool_result', %s, %s, %s, %s, %s, %s)",
                    [seq, agent.pk, f"legacy {seq}", json.dumps(payload), when, when, prev, digest],
                )
                prev = digest
            cursor.execute("UPDATE memory_chainhead SET last_seq = 2, last_hash = %s WHERE id = 1", [prev])
        executor = MigrationExecutor(connection)
        with maintenance():
            executor.migrate(executor.loader.graph.leaf_nodes("memory"))
        assert list(Event.objects.order_by("seq").values_list("hash_version", flat=True)) == [1, 1]
        assert Event.objects.get(seq=2).payload == {"ok": True, "score": 0.25}
        events_append(
            agent=agent,
            events=[
                EventData(session_id="new", kind="message", content="after the upgrade", occurred_at=when)
            ],
        )
        report = chain_verify()
        assert report.ok and report.checked == 3, report
        assert Event.objects.get(seq=3).hash_version == 2
