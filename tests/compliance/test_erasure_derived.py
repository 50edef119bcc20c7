"""Erasure reaches what was derived from a subject's data: the summary nodes covering its events
(and their summary memories, vectors and lexical postings), the promotions of its memories and the
facts they made, and the skill runs reported in its sessions. Direct SQL finds nothing of it after
the erasure; the session's tree is rebuilt from the events that remain without the erased text;
and no job (a summary pass, a promotion pass, a whole consolidation pass) brings any of it back.
Retention removes a summary like its sources, and a promoted memory's retention does not fail on
its promotion."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import Sum
from django.utils import timezone
from django_tenants.utils import tenant_context

from compliance import lifecycle, services
from compliance.models import ErasureStatus, RetentionRule
from core.errors import InvalidInput
from memory.consolidation.models import Promotion, PromotionOutcome, SummaryNode
from memory.consolidation.services.lifecycle import summary_tree_rebuild
from memory.consolidation.services.promotion import promotion_pass
from memory.consolidation.services.schedule import consolidate
from memory.consolidation.services.summaries import summaries_pass
from memory.episodic.models import Event
from memory.knowledge.models import Fact
from memory.procedural.models import SkillRun
from memory.semantic.models import MemoryAccess, MemoryType, SemanticMemory
from tests.factories import Caller, event, remember, requires_model, skill_publish, skill_seed

SUBJECT = "cust-4711"
WORDS = ("Zoltan", "Quokkaville")  # only the subject's data holds them
SESSION = "s-mixed"


def ok(response: Any, status: int = 201) -> Any:
    assert response.status_code == status, response.content
    return response.json()


def post_mixed_session(alice: Caller, bob: Caller) -> None:
    """Session s-mixed: the subject's events (by alice) between other people's (by bob)."""
    for i in range(10):
        if i in (2, 3, 6):
            body = event(
                f"Zoltan from Quokkaville asked about parcel {i}",
                session_id=SESSION,
                data_subject=SUBJECT,
                occurred_at=f"2026-11-30T09:0{i}:00Z",
            )
            ok(alice.post("/api/v1/events", body))
        else:
            body = event(
                f"Maria ordered tea number {i}", session_id=SESSION, occurred_at=f"2026-11-30T09:0{i}:00Z"
            )
            ok(bob.post("/api/v1/events", body))


def promoted_memory(alice: Caller) -> dict[str, Any]:
    """A memory of the subject with a fact hint, reinforced enough to be promoted."""
    extra = {
        "confidence": 0.95,
        "fact": {"subject": "Zoltan", "predicate": "lives_in", "object": {"entity": "Quokkaville"}},
        "session_id": SESSION,
        "data_subject": SUBJECT,
    }
    first = remember(alice, "Zoltan lives in Quokkaville.", **extra)
    assert first.status_code == 201, first.content
    for _ in range(3):
        assert remember(alice, "Zoltan lives in Quokkaville.", **extra).status_code == 200
    return first.json()


def secret_rows() -> dict[str, int]:
    """Direct SQL over the derived tables: rows holding the subject's words or id."""
    words = [f"%{w}%" for w in WORDS]
    checks = {
        "summary nodes": "SELECT count(*) FROM memory_summarynode WHERE content ILIKE ANY(%(w)s)",
        "summary memories": "SELECT count(*) FROM memory_semanticmemory WHERE content ILIKE ANY(%(w)s) "
        "OR search @@ to_tsquery('english', 'zoltan | quokkaville')",
        "lexical postings": "SELECT count(*) FROM memory_lexicalposting WHERE lexeme IN ('zoltan', 'quokkavill')",
        "promotions": "SELECT count(*) FROM memory_promotion p LEFT JOIN memory_fact f ON f.id = p.fact_id "
        "WHERE p.memory_id NOT IN (SELECT id FROM memory_semanticmemory) OR f.data_subject = %(s)s",
        "facts": "SELECT count(*) FROM memory_fact WHERE data_subject = %(s)s OR subject_id IN "
        "(SELECT id FROM memory_entity WHERE name ILIKE ANY(%(w)s))",
        "skill runs": "SELECT count(*) FROM memory_skillrun WHERE error ILIKE ANY(%(w)s) OR session_id = %(c)s",
    }
    found = {}
    with connection.cursor() as cursor:
        for name, query in checks.items():
            cursor.execute(query, {"w": words, "s": SUBJECT, "c": SESSION})
            found[name] = cursor.fetchone()[0]
    return found


@requires_model
def test_summaries_promotions_and_skill_runs_of_a_subject_go_and_no_job_brings_them_back(
    alice: Caller, bob: Caller
) -> None:
    tenant = alice.tenant
    tenant.summary_leaf_events, tenant.summary_fanout = 4, 2  # three leaves, two levels above
    tenant.save()
    post_mixed_session(alice, bob)
    memory = promoted_memory(alice)
    skill_seed(alice)
    skill_publish(tenant, "reset-password", 1)
    ran = {"version": 1, "success": False, "session_id": SESSION, "error": "Zoltan's code expired"}
    ok(alice.post("/api/v1/skills/reset-password/runs", ran))
    ok(
        alice.post(
            "/api/v1/skills/reset-password/runs", {"version": 1, "success": True, "session_id": "s-else"}
        )
    )
    with tenant_context(tenant):
        assert summaries_pass() is not None and promotion_pass() is not None
        promotion = Promotion.objects.get(memory_id=memory["id"])
        assert promotion.outcome == PromotionOutcome.CREATED
        # the promoted fact is about whom the memory was
        assert Fact.objects.get(pk=promotion.fact_id).data_subject == SUBJECT
        assert all(secret_rows().values()), secret_rows()
        before = dict(
            SummaryNode.objects.filter(session_id=SESSION).values_list("level", "position").distinct()
        )
        assert max(before) == 3  # leaves, their parents, the root

        request = services.erasure_request(
            kind="subject", value=SUBJECT, legal_basis="Art. 17", note="", username="olga"
        )
        services.erasure_approve(request_id=request.pk, username="pavel")
        done = services.erasure_run(request_id=request.pk)
        assert done.status == ErasureStatus.DONE, done.error
        assert secret_rows() == dict.fromkeys(secret_rows(), 0)
        assert not SummaryNode.objects.filter(session_id=SESSION).exists()
        assert not SemanticMemory.objects.filter(memory_type=MemoryType.SUMMARY, session_id=SESSION).exists()
        receipt = json.loads(done.receipt)
        stores = receipt["stores"]
        assert stores["postgres"]["summary_nodes_deleted"] == 6
        assert stores["postgres"]["summary_trees_rebuilt"] == [SESSION]
        assert stores["postgres"]["facts_deleted"] == 1 and stores["postgres"]["skill_runs_deleted"] == 1
        assert len(stores["postgres"]["promotions_deleted"]) == 1
        assert done.receipt and all(w not in done.receipt for w in (*WORDS, SUBJECT))
        verification = receipt["verification"]["postgres"]
        assert verification["summaries_stale"] == 0 and verification["promotions"] == 0

        # the tree is rebuilt from what remains (bob's seven events and the promotion's decision; the
        # knowledge layer's record of the subject's promoted fact carries the subject and is
        # redacted with it), none of the erased text
        left = Event.objects.filter(session_id=SESSION, redacted_at__isnull=True)
        assert left.count() == 8
        written = summary_tree_rebuild(session_id=SESSION)
        assert written
        leaves = SummaryNode.objects.filter(session_id=SESSION, level=1)
        assert leaves.aggregate(n=Sum("event_count"))["n"] == 8
        assert "Maria" in " ".join(n.content for n in leaves)  # bob's events are summarised again
        assert secret_rows() == dict.fromkeys(secret_rows(), 0)
        assert summary_tree_rebuild(session_id=SESSION) == []  # whole: left as it is

        # no job recreates any of it
        summaries_pass()
        promotion_pass()
        consolidate(force=True)
        assert secret_rows() == dict.fromkeys(secret_rows(), 0)
        # and the others' data is as it was
        assert Event.objects.filter(session_id=SESSION, redacted_at__isnull=True).count() == 8
        assert SkillRun.objects.filter(session_id="s-else").count() == 1
        assert lifecycle.verification_clean(
            lifecycle.verification_pass(kind="subject", value=SUBJECT, progress=done.progress)
        )


@requires_model
def test_a_summary_is_kept_like_its_sources_and_a_promoted_memory_ages_out(
    alice: Caller, bob: Caller
) -> None:
    tenant = alice.tenant
    tenant.summary_leaf_events, tenant.summary_fanout = 4, 2
    tenant.save()
    post_mixed_session(alice, bob)
    memory = promoted_memory(alice)
    with tenant_context(tenant):
        summaries_pass()
        promotion_pass()
        fact_id = Promotion.objects.get(memory_id=memory["id"]).fact_id
        # the tree's summaries have no rule of their own: not even the semantic summaries' one
        services.retention_rule_save(
            rule=RetentionRule(layer="semantic", memory_type=MemoryType.SUMMARY, keep_days=1), username="olga"
        )
        with pytest.raises(InvalidInput) as refused:
            services.retention_rule_save(rule=RetentionRule(layer="summaries", keep_days=1), username="olga")
        assert refused.value.field == "layer"
        # a year on: the memories are past 90 days (summaries too, but they follow their events)
        MemoryAccess.objects.update(last_accessed_at=timezone.now() - timedelta(days=400))
        SemanticMemory.objects.update(created_at=timezone.now() - timedelta(days=400))
        preview = lifecycle.retention_preview(now=timezone.now())
        assert preview["summaries"] == 0 and preview["semantic"] == 1
        run = services.retention_run(run_id=services.retention_run_start(requested_by="job:test").pk)
        assert run.status == "done", run.error
        assert run.removed.get("semantic") == 1 and not run.removed.get("summaries")
        assert SummaryNode.objects.filter(session_id=SESSION).exists()  # their events are kept
        assert not Promotion.objects.filter(memory_id=memory["id"]).exists()
        assert Fact.objects.filter(pk=fact_id).exists()  # a promoted fact has its own retention
        # seven years on the events go, and so do the summaries covering them, even those that
        # also cover held events (those stay, and the rebuilt tree summarises them)
        services.hold_place(kind="subject", value=SUBJECT, reason="case 9", username="olga")
        later = timezone.now() + timedelta(days=7 * 365 + 30)
        assert lifecycle.retention_preview(now=later)["summaries"] == 0  # not until they are redacted
        run = services.retention_run(
            run_id=services.retention_run_start(requested_by="job:test").pk, now=later
        )
        assert run.status == "done", run.error
        assert run.removed["episodic"] >= 7 and run.removed["summaries"] == 6
        assert not SummaryNode.objects.filter(session_id=SESSION).exists()
        # held: the subject's three messages and the knowledge layer's record of the subject's
        # promoted fact (it carries the subject)
        held = Event.objects.filter(session_id=SESSION, redacted_at__isnull=True)
        assert held.count() == 4 and all(e.data_subject == SUBJECT for e in held)
        assert all("Zoltan" in e.content for e in held if e.kind == "message")
        assert held.filter(kind="decision", payload_index__action="facts_assert_batch").count() == 1
        rebuilt = summary_tree_rebuild(session_id=SESSION)
        assert sum(n.event_count for n in rebuilt if n.level == 1) == 4
        assert all("Maria" not in n.content for n in rebuilt)
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM memory_summarynode WHERE content ILIKE '%%Maria%%'")
            assert cursor.fetchone()[0] == 0


def test_the_redis_sweep_of_a_subject_takes_keys_by_what_they_hold_never_by_their_name(
    alice: Caller, bob: Caller
) -> None:
    """A neighbour's keys whose names hold the subject's id as a word (a session or an execution
    named like it, an agent whose id reads like it) survive; a key whose data names it goes."""
    from core.redis import get_redis, tenant_key

    numeric = str(bob.agent.pk)  # a customer number that reads like bob's agent id
    ok(bob.post(f"/api/v1/sessions/{SUBJECT}/window", {"role": "user", "content": "Maria says hi"}))
    put = bob.client.put(f"/api/v1/executions/{SUBJECT}/blackboard/plan", {"value": {"x": 1}}, format="json")
    assert put.status_code in (200, 201), put.content
    pad = bob.client.put("/api/v1/executions/e-bob/scratchpad/note", {"value": "tea"}, format="json")
    assert pad.status_code in (200, 201), pad.content
    named = alice.client.put(
        "/api/v1/executions/e-misc/scratchpad/note",
        {"value": f"call {SUBJECT} back, then {numeric}"},
        format="json",
    )
    assert named.status_code in (200, 201), named.content
    with tenant_context(alice.tenant):
        neighbours = [
            tenant_key("win", SUBJECT),
            tenant_key("bb", SUBJECT),
            tenant_key("bb-owner", SUBJECT),
            tenant_key("sp", "e-bob", bob.agent.pk),
        ]
        holder = tenant_key("sp", "e-misc", alice.agent.pk)
        for value in (SUBJECT, numeric):
            request = services.erasure_request(
                kind="subject", value=value, legal_basis="Art. 17", note="", username="olga"
            )
            services.erasure_approve(request_id=request.pk, username="pavel")
            done = services.erasure_run(request_id=request.pk)
            assert done.status == ErasureStatus.DONE, done.error
            assert (holder not in neighbours and holder in done.progress["redis"]["keys"]) or value == numeric
            assert not set(neighbours) & set(done.progress["redis"]["keys"])
    client = get_redis()
    assert all(client.exists(k) for k in neighbours), [k for k in neighbours if not client.exists(k)]
    assert not client.exists(holder)
