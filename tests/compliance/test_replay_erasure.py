"""The ``Idempotency-Key`` replay cache keeps nothing an erasure removed (issue 28, item 1).

Every POST sent with a key records its answer for replays. A read (recall, the store's search, the
context) is never stored: its replay runs it again, against what is there now; another agent's
answer may quote a person without being about them. A write's stored answer echoes the rows it
wrote (and may quote rows it met: a reinforced memory or fact): an erasure withdraws the stored
answers of the tenant written before it, keeping each key's fingerprint, so a retried write is
still applied once and answered 409; the verification pass searches the bodies left."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection
from django_tenants.utils import tenant_context

from agents.models import IdempotencyRecord
from compliance import services
from compliance.models import ErasureStatus
from memory.semantic.models import SemanticMemory
from tests.factories import Caller, requires_model

SUBJECT = "cust-4711"
MARKER = "Zyxquorra"  # only the subject's data holds it


def calls(alice: Caller, bob: Caller) -> list[tuple[Caller, str, Any, str]]:
    """(caller, path, body, key): the subject's writes by alice, then bob's reads meeting them."""
    said = f"{MARKER} moved to Quokkaville"
    return [
        (
            alice,
            "/api/v1/memories",
            {"content": said, "scope": "shared", "data_subject": SUBJECT},
            "w-memory",
        ),
        (
            alice,
            "/api/v1/events",
            {
                "session_id": "s-z",
                "kind": "message",
                "content": said,
                "occurred_at": "2026-11-30T09:00:00Z",
                "data_subject": SUBJECT,
            },
            "w-event",
        ),
        (
            alice,
            "/api/v1/store/items",
            {
                "namespace": ["crm", "p"],
                "key": "a",
                "value": {"t": said},
                "index": False,
                "data_subject": SUBJECT,
            },
            "w-item",
        ),
        (
            alice,
            "/api/v1/sessions/s-z/checkpoints",
            {"step_index": 1, "idempotency_key": "c1", "state": {"t": said}, "data_subject": SUBJECT},
            "w-checkpoint",
        ),
        (bob, "/api/v1/memories/search", {"query": "who moved to Quokkaville", "k": 5}, "r-search"),
        (bob, "/api/v1/store/search", {"namespace_prefix": ["crm"]}, "r-store"),
        (bob, "/api/v1/context", {"session_id": "s-z", "query": "Quokkaville", "budget": 500}, "r-context"),
    ]


def erase(caller: Caller) -> Any:
    with tenant_context(caller.tenant):
        request = services.erasure_request(
            kind="subject", value=SUBJECT, legal_basis="Art. 17", note="", username="olga"
        )
        services.erasure_approve(request_id=request.pk, username="pavel")
        done = services.erasure_run(request_id=request.pk)
        assert done.status == ErasureStatus.DONE, done.error
        return done


@requires_model
def test_no_replay_returns_what_an_erasure_removed(alice: Caller, bob: Caller) -> None:
    sent = calls(alice, bob)
    for caller, path, body, key in sent:
        first = caller.post(path, body, **{"Idempotency-Key": key})
        assert first.status_code in (200, 201), (key, first.content)
        assert MARKER in first.content.decode(), key  # each answer quotes the subject
    done = erase(alice)
    with tenant_context(alice.tenant), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {IdempotencyRecord._meta.db_table} WHERE response_body::text LIKE %s",
            [f"%{MARKER}%"],
        )
        assert cursor.fetchone()[0] == 0
        memories = SemanticMemory.objects.count()
    for caller, path, body, key in sent:
        replay = caller.post(path, body, **{"Idempotency-Key": key})
        assert MARKER not in replay.content.decode() and SUBJECT not in replay.content.decode(), key
        if key.startswith("w-"):  # applied once: the replay says so, and writes nothing again
            assert replay.status_code == 409 and "Idempotency-Key" in replay.json()["errors"], replay.content
            assert "withdrawn" in replay.json()["detail"]
        else:  # a read runs again, on what is left
            assert replay.status_code == 200 and replay.get("Idempotent-Replayed") is None, key
    with tenant_context(alice.tenant):
        assert SemanticMemory.objects.count() == memories
    receipt = json.loads(done.receipt)
    assert receipt["stores"]["replay"]["answers_withdrawn"] >= 4
    checked = receipt["verification"]["postgres"]
    assert checked["replay_answers_kept_from_before"] == 0 and checked["replay_answers_naming_subject"] == 0


def test_a_read_is_never_stored_but_its_key_keeps_its_request(alice: Caller) -> None:
    body = {"namespace_prefix": ["crm"]}
    assert alice.post("/api/v1/store/search", body, **{"Idempotency-Key": "r1"}).status_code == 200
    with tenant_context(alice.tenant):
        record = IdempotencyRecord.objects.get(key="r1")
        assert record.response_body is None
    again = alice.post("/api/v1/store/search", body, **{"Idempotency-Key": "r1"})
    assert again.status_code == 200 and again.get("Idempotent-Replayed") is None
    other = alice.post("/api/v1/store/search", {"namespace_prefix": ["x"]}, **{"Idempotency-Key": "r1"})
    assert other.status_code == 409  # the same key with another request, as for a write


def test_a_write_is_still_replayed_until_an_erasure(alice: Caller) -> None:
    body = {"namespace": ["crm", "p"], "key": "plan", "value": {"t": "Ship on Friday"}, "index": False}
    first = alice.post("/api/v1/store/items", body, **{"Idempotency-Key": "w1"})
    replay = alice.post("/api/v1/store/items", body, **{"Idempotency-Key": "w1"})
    assert replay.status_code == first.status_code and replay["Idempotent-Replayed"] == "true"
    assert replay.json() == first.json()
