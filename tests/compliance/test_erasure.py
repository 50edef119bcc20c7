"""Erasure reaches every store and stays erased: a data subject's events, memories, facts and
checkpoints, written through the API by two agents in a committed tenant, are erased by a real
Celery worker after two people decided it; then direct SQL, Cypher and a Redis SCAN find nothing
of them, the chain still verifies (counting the redactions), recall, facts, graph paths, an export
and a full graph rebuild return nothing of them, the signed receipt verifies and names no content,
and everything of other subjects (and of another tenant with the same subject id) is intact."""

from __future__ import annotations

import json
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from django.db import connection
from django_tenants.utils import tenant_context

from compliance import services, signing, verify_export
from compliance.models import ErasureRequest, ErasureStatus, Export, ExportStatus
from core.errors import Conflict, PermissionDenied
from core.redis import get_redis
from memory.episodic.models import Event
from memory.episodic.selectors import chain_verify
from memory.knowledge.projection import graph_rebuild
from tenants.models import Tenant
from tests.factories import (
    Caller,
    fact,
    make_caller,
    neo4j_projection,
    postgres_projection,
    projection_caught_up,
    requires_model,
)

SUBJECT = "cust-4711"
SECRET_WORDS = ("Zoltan", "Quokkaville", "Elmstreet")  # only the subject's data holds them


def wait_for(predicate: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the worker did not finish in time"
        time.sleep(0.25)


def ok(response: Any, status: int = 201) -> Any:
    assert response.status_code == status, response.content
    return response.json()


def write_everything(alice: Caller, bob: Caller) -> None:
    """The subject's data in every store (by alice, in session s-zoltan), and other data beside it."""
    ok(
        alice.post(
            "/api/v1/events",
            [
                {
                    "session_id": "s-zoltan",
                    "kind": "message",
                    "role": "user",
                    "content": f"Zoltan moved to {SECRET_WORDS[1]}, {SECRET_WORDS[2]} 5",
                    "payload": {"address": "Elmstreet 5", "n": i},
                    "occurred_at": "2026-11-30T09:00:00Z",
                    "data_subject": SUBJECT,
                }
                for i in range(5)
            ],
        )
    )
    ok(
        bob.post(
            "/api/v1/events",
            [
                {
                    "session_id": "s-other",
                    "kind": "message",
                    "content": f"Maria ordered tea number {i}",
                    "occurred_at": "2026-11-30T09:00:00Z",
                    "data_subject": "cust-0001",
                }
                for i in range(5)
            ],
        )
    )
    ok(
        alice.post(
            "/api/v1/memories",
            {
                "content": "Zoltan lives in Quokkaville at Elmstreet 5",
                "scope": "shared",
                "session_id": "s-zoltan",
                "data_subject": SUBJECT,
            },
        )
    )
    ok(bob.post("/api/v1/memories", {"content": "Maria prefers green tea", "scope": "shared"}))
    ok(
        alice.post(
            "/api/v1/facts",
            [
                fact(
                    "Zoltan",
                    "lives_in",
                    {"entity": "Quokkaville"},
                    session_id="s-zoltan",
                    data_subject=SUBJECT,
                ),
                fact("Zoltan", "knows", {"entity": "Maria"}, session_id="s-zoltan", data_subject=SUBJECT),
            ],
        )
    )
    ok(
        bob.post(
            "/api/v1/facts",
            [fact("Maria", "lives_in", {"entity": "Porto"}), fact("Maria", "knows", {"entity": "Rui"})],
        )
    )
    ok(
        alice.post(
            "/api/v1/sessions/s-zoltan/checkpoints",
            {"step_index": 1, "idempotency_key": "k1", "state": {"who": "Zoltan"}, "data_subject": SUBJECT},
        )
    )
    ok(
        bob.post(
            "/api/v1/sessions/s-other/checkpoints",
            {"step_index": 1, "idempotency_key": "k1", "state": {"x": 1}},
        )
    )
    # working memory of the subject's session, and a scratchpad naming the subject elsewhere
    ok(alice.post("/api/v1/sessions/s-zoltan/window", {"role": "user", "content": "Zoltan says hi"}))
    put = alice.client.put(
        "/api/v1/executions/e-zoltan/blackboard/plan",
        {"value": {"for": "Zoltan"}, "session_id": "s-zoltan"},
        format="json",
    )
    assert put.status_code in (200, 201), put.content
    pad = alice.client.put(
        "/api/v1/executions/e-misc/scratchpad/note", {"value": f"call {SUBJECT} back"}, format="json"
    )
    assert pad.status_code in (200, 201), pad.content
    ok(bob.post("/api/v1/sessions/s-other/window", {"role": "user", "content": "Maria says hi"}))


def secret_rows_in_postgres() -> dict[str, int]:
    """Direct SQL over every table of the layers: rows holding the subject's id or words."""
    words = [f"%{w}%" for w in SECRET_WORDS]
    checks = {
        "memory_event": "content ILIKE ANY(%s) OR payload_json ILIKE ANY(%s) OR data_subject = %s "
        "OR search @@ to_tsquery('english', 'zoltan | quokkaville')",
        "memory_semanticmemory": "content ILIKE ANY(%s) OR metadata::text ILIKE ANY(%s) OR data_subject = %s "
        "OR search @@ to_tsquery('english', 'zoltan | quokkaville')",
        "memory_fact": "literal_value::text ILIKE ANY(%s) OR session_id ILIKE ANY(%s) OR data_subject = %s",
        "memory_entity": "name ILIKE ANY(%s) OR array_to_string(aliases, ' ') ILIKE ANY(%s) OR key = %s",
        "memory_checkpoint": "state::text ILIKE ANY(%s) OR plan::text ILIKE ANY(%s) OR data_subject = %s",
    }
    found = {}
    with connection.cursor() as cursor:
        for table, where in checks.items():
            cursor.execute(f"SELECT count(*) FROM {table} WHERE {where}", [words, words, SUBJECT])
            found[table] = cursor.fetchone()[0]
    return found


def redis_keys_naming_the_subject(schema: str) -> list[str]:
    client = get_redis()
    found = []
    for key in client.scan_iter(match="{" + schema + "}:*", count=1000):
        kind = client.type(key).decode()
        if kind == "string":
            blob = client.get(key) or b""
        elif kind == "hash":
            blob = b" ".join(k + v for k, v in client.hgetall(key).items())
        elif kind == "list":
            blob = b" ".join(client.lrange(key, 0, -1))
        else:
            blob = b" ".join(client.smembers(key)) if kind == "set" else b""
        text = key + b" " + blob
        if any(w.encode() in text for w in (*SECRET_WORDS, SUBJECT)):
            found.append(key.decode())
    return found


def neo4j_names(driver: Any, schema: str) -> set[str]:
    records, _, _ = driver.execute_query("MATCH (n:Entity {tenant: $t}) RETURN n.name AS name", t=schema)
    return {r["name"] for r in records}


@requires_model
def test_an_erasure_reaches_every_store_and_nothing_comes_back(  # type: ignore[no-untyped-def]
    graph_tenant: Tenant, neo4j_driver, celery_worker, tmp_path: Path
) -> None:
    alice, bob = make_caller(graph_tenant, "alice"), make_caller(graph_tenant, "bob")
    schema = graph_tenant.schema_name
    write_everything(alice, bob)
    with tenant_context(graph_tenant):
        projection_caught_up()
        assert {"Zoltan", "Quokkaville", "Maria"} <= neo4j_names(neo4j_driver, schema)
        assert all(secret_rows_in_postgres().values()), secret_rows_in_postgres()
        others_before = (
            list(
                Event.objects.exclude(session_id="s-zoltan")
                .exclude(actor__startswith="user:")
                .values_list("seq", "hash")
            ),
            neo4j_projection(neo4j_driver, schema)[0],
        )
        # an export made before the erasure holds the subject's content: it is withdrawn
        old = services.export_request(username="auditor", scope="all")
    with tenant_context(graph_tenant):
        wait_for(lambda: Export.objects.get(pk=old.pk).is_done)
        assert Export.objects.get(pk=old.pk).status == ExportStatus.DONE
    assert redis_keys_naming_the_subject(schema)

    with tenant_context(graph_tenant):
        request = services.erasure_request(
            kind="subject", value=SUBJECT, legal_basis="GDPR Art. 17(1)(a)", note="ticket 99", username="olga"
        )
        with pytest.raises(PermissionDenied, match="second person"):
            services.erasure_approve(request_id=request.pk, username="olga")
        services.erasure_approve(request_id=request.pk, username="pavel")
        wait_for(lambda: ErasureRequest.objects.get(pk=request.pk).is_done)
        request.refresh_from_db()
        assert request.status == ErasureStatus.DONE, request.error

        # direct queries: nothing of the subject in any table, Neo4j or Redis
        assert secret_rows_in_postgres() == dict.fromkeys(secret_rows_in_postgres(), 0)
        assert not {"Zoltan", "Quokkaville"} & neo4j_names(neo4j_driver, schema)
        assert "Maria" in neo4j_names(neo4j_driver, schema)  # bob's facts still reach her
    assert redis_keys_naming_the_subject(schema) == []

    with tenant_context(graph_tenant):
        # the chain verifies and counts the five redactions
        report = chain_verify()
        assert report.ok, report.findings
        # the subject's five events and the knowledge layer's record of their facts (it carries the subject)
        assert report.redacted == 6
        assert Event.objects.filter(redacted_at__isnull=False).count() == 6
        # everything else is as it was, in PostgreSQL and in Neo4j
        assert (
            list(
                Event.objects.exclude(session_id="s-zoltan")
                .exclude(actor__startswith="user:")
                .exclude(actor__startswith="job:")
                .values_list("seq", "hash")
            )[: len(others_before[0])]
            == others_before[0]
        )
        assert neo4j_projection(neo4j_driver, schema)[0] <= others_before[1]
        assert neo4j_projection(neo4j_driver, schema) == postgres_projection()
        # a full graph rebuild brings nothing back
        graph_rebuild()
        assert not {"Zoltan", "Quokkaville"} & neo4j_names(neo4j_driver, schema)
        assert neo4j_projection(neo4j_driver, schema) == postgres_projection()
        # the old export's archive is gone; a new one has the events redacted and verifies offline
        withdrawn = Export.objects.get(pk=old.pk)
        assert withdrawn.path == "" and "withdrawn by erasure" in withdrawn.error
        fresh = services.export_request(username="auditor", scope="session", session_id="s-zoltan")
        wait_for(lambda: Export.objects.get(pk=fresh.pk).is_done)
        fresh.refresh_from_db()
    assert fresh.status == ExportStatus.DONE, fresh.error
    assert verify_export.verify(fresh.path).ok
    with tarfile.open(fresh.path) as archive:
        member = archive.extractfile("events.jsonl")
        assert member is not None
        lines = [json.loads(line) for line in member.read().splitlines()]
        everything = b"".join(archive.extractfile(m).read() for m in archive.getmembers() if m.isfile())  # type: ignore[union-attr]
    assert len(lines) == 6 and all(line["redacted"] and line["content"] == "" for line in lines)
    assert not any(w.encode() in everything for w in (*SECRET_WORDS, SUBJECT))

    # the agents' reads return nothing of it: recall, facts, graph paths, the checkpoint, the window
    hits = ok(alice.post("/api/v1/memories/search", {"query": "Where does Zoltan live?", "k": 10}), 200)[
        "results"
    ]
    assert [h["memory"]["content"] for h in hits] == ["Maria prefers green tea"]
    assert alice.get("/api/v1/entities/Zoltan/facts").status_code == 404
    assert alice.get("/api/v1/graph/path", {"source": "Zoltan", "target": "Maria"}).status_code == 404
    maria = ok(alice.get("/api/v1/entities/Maria/facts", {"depth": 2}), 200)
    assert "Zoltan" not in json.dumps(maria)
    assert alice.get("/api/v1/sessions/s-zoltan/checkpoints/latest").status_code == 404
    assert ok(alice.get("/api/v1/sessions/s-zoltan/window"), 200)["results"] == []
    assert ok(bob.get("/api/v1/sessions/s-other/checkpoints/latest"), 200)["state"] == {"x": 1}
    events = ok(alice.get("/api/v1/events", {"session_id": "s-zoltan"}), 200)["results"]
    assert len(events) == 6 and all(
        e["redacted"] and e["content"] == "" and e["payload"] == {} for e in events
    )

    # the signed receipt: verifies, names counts and ids per store, holds no erased content
    with tenant_context(graph_tenant):
        request.refresh_from_db()
        public = load_pem_public_key(signing.public_key_pem())
    assert request.value == "" and request.value_digest
    public.verify(bytes.fromhex(request.receipt_signature), request.receipt.encode())  # type: ignore[union-attr]
    receipt = json.loads(request.receipt)
    assert receipt["stores"]["postgres"]["events_redacted"] == 6
    assert receipt["stores"]["postgres"]["memories_deleted"] == 1
    assert receipt["stores"]["postgres"]["facts_deleted"] == 2
    assert receipt["stores"]["postgres"]["checkpoints_deleted"] == 1
    assert receipt["stores"]["neo4j"]["relationships_removed"] == 2
    assert receipt["stores"]["redis"]["keys_deleted"] >= 4
    assert receipt["stores"]["exports"]["archives_withdrawn"] == [str(old.pk)]
    assert receipt["verification"]["clean"] is True
    vacuumed = set(receipt["stores"]["postgres"]["tables_vacuumed"])
    assert {"memory_event", "memory_semanticmemory", "memory_fact", "memory_checkpoint"} <= vacuumed
    with connection.cursor() as cursor:  # and PostgreSQL's statistics say so
        cursor.execute(
            "SELECT count(*) FROM pg_stat_all_tables WHERE schemaname = %s AND last_vacuum IS NOT NULL "
            "AND relname IN ('memory_event', 'memory_semanticmemory', 'memory_fact', 'memory_checkpoint')",
            [schema],
        )
        assert cursor.fetchone()[0] == 4
    assert not any(w in request.receipt for w in (*SECRET_WORDS, SUBJECT))
    with tenant_context(graph_tenant):
        done = Event.objects.get(payload_index__action="erasure_done")
        assert done.actor == "job:erasure" and SUBJECT not in done.content + done.payload_json


def test_another_tenant_keeps_the_same_subject_and_cannot_see_the_erasure(
    alice: Caller, mallory: Caller
) -> None:  # type: ignore[no-untyped-def]
    for caller in (alice, mallory):
        ok(
            caller.post(
                "/api/v1/events",
                {
                    "session_id": "s1",
                    "kind": "message",
                    "content": "hello",
                    "occurred_at": "2026-11-30T09:00:00Z",
                    "data_subject": SUBJECT,
                },
            )
        )
    with tenant_context(alice.tenant):
        request = services.erasure_request(
            kind="subject", value=SUBJECT, legal_basis="Art. 17", note="", username="olga"
        )
        services.erasure_approve(request_id=request.pk, username="pavel")
        done = services.erasure_run(request_id=request.pk)
        assert done.status == ErasureStatus.DONE, done.error
    with tenant_context(mallory.tenant):
        assert Event.objects.filter(data_subject=SUBJECT, content="hello").count() == 1
        assert not ErasureRequest.objects.filter(pk=request.pk).exists()
    from tests.factories import admin_client

    officer = admin_client(mallory.tenant, "beta-officer", group="compliance officer")
    assert officer.get(f"/admin/compliance/erasurerequest/{request.pk}/state/").status_code == 404
    assert officer.get(f"/admin/compliance/erasurerequest/{request.pk}/receipt/").status_code == 404
    assert str(request.pk) not in officer.get("/admin/compliance/erasurerequest/").content.decode()


def test_a_hold_refuses_the_erasure_naming_it(alice: Caller) -> None:
    ok(
        alice.post(
            "/api/v1/events",
            {
                "session_id": "s-court",
                "kind": "message",
                "content": "x",
                "occurred_at": "2026-11-30T09:00:00Z",
                "data_subject": SUBJECT,
            },
        )
    )
    with tenant_context(alice.tenant):
        hold = services.hold_place(
            kind="session", value="s-court", reason="case 12/2026", username="olga", four_eyes=False
        )
        with pytest.raises(Conflict, match=f"legal hold #{hold.pk} on session s-court .case 12/2026."):
            services.erasure_request(
                kind="subject", value=SUBJECT, legal_basis="Art. 17", note="", username="olga"
            )
        # requested before the hold: approval and the run refuse too
        services.hold_release(hold=hold, username="olga", reason="case closed")
        request = services.erasure_request(
            kind="subject", value=SUBJECT, legal_basis="Art. 17", note="", username="olga"
        )
        again = services.hold_place(
            kind="subject", value=SUBJECT, reason="audit", username="olga", four_eyes=False
        )
        with pytest.raises(Conflict, match="legal hold"):
            services.erasure_approve(request_id=request.pk, username="pavel")
        services.hold_release(hold=again, username="olga", reason="audit done")
        services.erasure_approve(request_id=request.pk, username="pavel")
        services.hold_place(kind="tenant", value="", reason="regulator", username="olga")
        failed = services.erasure_run(request_id=request.pk)
        assert failed.status == ErasureStatus.FAILED and "the whole tenant" in failed.error
        assert Event.objects.filter(data_subject=SUBJECT, content="x").count() == 1
        actions = list(
            Event.objects.filter(actor="user:olga").values_list("payload_index__action", flat=True)
        )
    assert actions.count("legal_hold_place") == 3 and actions.count("legal_hold_release") == 2


def test_the_admin_refuses_a_held_erasure_with_409_and_the_requester_cannot_approve(alice: Caller) -> None:
    from tests.factories import admin_client

    with tenant_context(alice.tenant):
        services.hold_place(kind="subject", value=SUBJECT, reason="litigation", username="olga")
    olga = admin_client(alice.tenant, "olga", group="compliance officer")
    page = olga.post(
        "/admin/compliance/erasurerequest/new/",
        {"kind": "subject", "value": SUBJECT, "legal_basis": "Art. 17"},
    )
    assert page.status_code == 409 and "litigation" in page.content.decode()
    bad = olga.post(
        "/admin/compliance/erasurerequest/new/", {"kind": "subject", "value": "", "legal_basis": ""}
    )
    assert bad.status_code == 400 and "This field is required" in bad.content.decode()
    made = olga.post(
        "/admin/compliance/erasurerequest/new/", {"kind": "session", "value": "s-9", "legal_basis": "Art. 17"}
    )
    assert made.status_code == 302
    with tenant_context(alice.tenant):
        request = ErasureRequest.objects.get(value="s-9")
    state = olga.get(made["Location"]).content.decode()
    assert "Waiting for a second person" in state and "erasure-approve" not in state
    refused = olga.post(f"/admin/compliance/erasurerequest/{request.pk}/approve/")
    assert refused.status_code == 403 and "second person" in refused.content.decode()
    pavel = admin_client(alice.tenant, "pavel", group="compliance officer")
    assert 'id="erasure-approve"' in pavel.get(made["Location"]).content.decode()
    assert pavel.post(f"/admin/compliance/erasurerequest/{request.pk}/approve/").status_code == 302
    with tenant_context(alice.tenant):
        request.refresh_from_db()
    assert request.status == ErasureStatus.APPROVED and request.approved_by == "user:pavel"
    viewer = admin_client(alice.tenant, "nobody")
    assert viewer.get("/admin/compliance/erasurerequest/new/").status_code == 403
