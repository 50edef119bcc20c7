"""``facts_assert_batch``: a batch of facts in one transaction, item by item the outcome of
``fact_assert``; all or nothing; contradictions inside the batch and against stored facts; the
retracted-fact rule of jobs; one projection task; decisions recorded; isolation; Neo4j converges."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from django_tenants.utils import tenant_context

from agents.services import agent_create
from core.errors import Conflict, InvalidInput, NotFound
from memory.episodic.models import Event, EventKind
from memory.knowledge import services
from memory.knowledge.models import Contradiction, Entity, Fact, FactProvenance, FactStatus, GraphOutbox
from memory.knowledge.projection import projection_enabled
from tenants.models import Tenant
from tests.factories import Caller, neo4j_projection, postgres_projection, projection_caught_up

F = services.FactData
E = services.FactObject


def ent(name: str) -> services.FactObject:
    return E(entity=name)


def counts() -> tuple[int, int, int, int, int]:
    return (
        Fact.objects.count(),
        Entity.objects.count(),
        FactProvenance.objects.count(),
        Contradiction.objects.count(),
        Event.objects.count(),
    )


def test_a_batch_gives_fact_asserts_outcomes_item_by_item(
    alice: Caller, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(alice.tenant):
        stored = services.fact_assert(agent=alice.agent, data=F("Ann", "lives_in", ent("Lisbon"))).fact
        batch = [
            F("Ann", "lives_in", ent("Porto"), session_id="s-b"),  # 0 disputes the stored Lisbon
            F("Ben", "lives_in", ent("Paris"), confidence=0.5, session_id="s-b"),  # 1 created
            F("Ben", "lives_in", ent("Rome"), session_id="s-b"),  # 2 disputes item 1
            F("ann", "lives_in", ent("lisbon"), confidence=1.0),  # 3 reinforces the stored fact
            F("Ben", "lives_in", ent("Paris"), confidence=0.9, session_id="s-b"),  # 4 reinforces 1
            F("Ben", "likes", E(literal_type="string", value="tea"), session_id="s-b"),  # 5 created
            F("Ben", "lives_in", ent("Porto"), session_id="s-b"),  # 6 disputes item 1, the oldest active
        ]
        with django_capture_on_commit_callbacks() as callbacks:
            results = services.facts_assert_batch(agent=alice.agent, facts=batch)
        assert [r.outcome for r in results] == [
            "disputed", "created", "disputed", "reinforced", "reinforced", "created", "disputed",
        ]  # fmt: skip
        assert results[3].fact.pk == stored.pk and results[4].fact.pk == results[1].fact.pk
        assert Fact.objects.get(pk=results[1].fact.pk).confidence == 0.9  # max of 0.5 and 0.9
        pairs = {
            (c.existing_fact_id, c.new_fact_id)
            for c in Contradiction.objects.filter(new_fact__in=[r.fact.pk for r in results])
        }
        assert pairs == {
            (stored.pk, results[0].fact.pk),
            (results[1].fact.pk, results[2].fact.pk),
            (results[1].fact.pk, results[6].fact.pk),
        }
        assert Fact.objects.get(pk=results[1].fact.pk).status == FactStatus.ACTIVE  # it stays active
        assert FactProvenance.objects.filter(fact=results[1].fact.pk).count() == 2
        assert FactProvenance.objects.filter(fact=stored.pk).count() == 2
        # the lowercase spellings are the same entities, kept as aliases
        assert Entity.objects.filter(name="Ann").get().aliases == ["ann"]
        # one outbox row per fact touched, one projection task for the batch; none without a
        # projection (no NEO4J_URI)
        touched = {r.fact.pk for r in results}
        queued = set(GraphOutbox.objects.filter(fact__in=touched).values_list("fact", flat=True))
        if projection_enabled():
            assert queued == touched and len(callbacks) == 1
        else:
            assert queued == set() and callbacks == []
        # the batch is recorded: one decision per session of its items
        decisions = {
            e.session_id: e.payload
            for e in Event.objects.filter(kind=EventKind.DECISION).order_by("seq")
            if e.payload.get("action") == "facts_assert_batch"
        }
        assert set(decisions) == {"s-b", f"agent:{alice.agent.name}"}
        assert decisions["s-b"]["count"] == 6
        assert decisions["s-b"]["facts"]["disputed"] == sorted(results[i].fact.pk for i in (0, 2, 6))
        assert len(decisions["s-b"]["contradictions_opened"]) == 3
        assert decisions[f"agent:{alice.agent.name}"]["facts"]["reinforced"] == [stored.pk]


def test_the_same_sequence_one_by_one_gives_the_same_facts(alice: Caller, bob: Caller) -> None:
    """The batch against fact_assert in a loop, on two fresh name spaces: same outcomes, statuses and
    contradictions (by position)."""

    def items(tag: str) -> list[services.FactData]:
        return [
            F(f"{tag}x", "works_for", ent(f"{tag}A")),
            F(f"{tag}x", "works_for", ent(f"{tag}B")),
            F(f"{tag}x", "works_for", ent(f"{tag}A"), confidence=0.3),
            F(f"{tag}y", "tag", E(literal_type="number", value=3)),
            F(f"{tag}y", "tag", E(literal_type="number", value=3.0)),
            F(f"{tag}x", "works_for", ent(f"{tag}C")),
        ]

    with tenant_context(alice.tenant):
        batch = services.facts_assert_batch(agent=alice.agent, facts=items("b-"))
        loop = [services.fact_assert(agent=bob.agent, data=d) for d in items("l-")]

        def shape(results: list[services.AssertResult]) -> list[tuple[str, str, int | None]]:
            position = {r.fact.pk: i for i, r in enumerate(results)}
            return [
                (
                    r.outcome,
                    Fact.objects.get(pk=r.fact.pk).status,
                    position.get(r.contradiction.existing_fact_id) if r.contradiction else None,
                )
                for r in results
            ]

        assert shape(batch) == shape(loop)


def test_a_batch_is_all_or_nothing(alice: Caller) -> None:
    with tenant_context(alice.tenant):
        before = counts()
        with pytest.raises(InvalidInput) as bad_predicate:
            services.facts_assert_batch(
                agent=alice.agent,
                facts=[F("Cid", "knows", ent("Dee")), F("Cid", "Knows Well", ent("Eve"))],
            )
        assert bad_predicate.value.field == "facts[1].predicate"
        with pytest.raises(NotFound) as unknown_event:
            services.facts_assert_batch(
                agent=alice.agent,
                facts=[
                    F("Cid", "knows", ent("Dee")),
                    F("Cid", "knows", ent("Fay")),
                    F("Cid", "knows", ent("Gus"), source_event_id=987654321),
                ],
            )
        assert unknown_event.value.field == "facts[2].source_event_id"
        with pytest.raises(Conflict) as wrong_id:
            services.facts_assert_batch(
                agent=alice.agent, facts=[F("Cid", "knows", E(entity="Dee", entity_id=-5))]
            )
        assert wrong_id.value.field == "facts[0].object.id"
        with pytest.raises(InvalidInput) as naive:
            services.facts_assert_batch(
                agent=alice.agent, facts=[F("Cid", "knows", ent("Dee"), valid_from=datetime(2026, 1, 1))]
            )
        assert naive.value.field == "facts[0].valid_from"
        with pytest.raises(InvalidInput):
            services.facts_assert_batch(agent=alice.agent, facts=[])
        assert counts() == before  # no fact, entity, provenance, contradiction or decision


def test_a_job_never_brings_back_a_retracted_fact(alice: Caller) -> None:
    with tenant_context(alice.tenant):
        gone = services.fact_assert(agent=alice.agent, data=F("Hal", "owns", ent("Boat"))).fact
        services.fact_retract(agent=alice.agent, fact_id=gone.pk)
        before = counts()
        with pytest.raises(services.FactRetracted) as refused:
            services.facts_assert_batch(
                agent=alice.agent,
                facts=[F("Hal", "owns", ent("Car")), F("hal", "owns", ent("boat"))],
                refuse_retracted=True,
            )
        assert refused.value.field == "facts[1].object"
        assert counts() == before
        # an agent asserting it again (no refuse_retracted) makes a new fact, as fact_assert does
        again = services.facts_assert_batch(agent=alice.agent, facts=[F("Hal", "owns", ent("Boat"))])
        assert again[0].outcome == "created" and again[0].fact.pk != gone.pk


def test_rest_batches_answer_count_and_results_and_replay(alice: Caller) -> None:
    body = [
        {"subject": "Ivy", "predicate": "lives_in", "object": {"entity": "Oslo"}, "session_id": "s-rest"},
        {"subject": "Ivy", "predicate": "lives_in", "object": {"entity": "Bergen"}, "session_id": "s-rest"},
        {"subject": "Ivy", "predicate": "age", "object": {"number": 41}},
    ]
    first = alice.post("/api/v1/facts", body, **{"Idempotency-Key": "batch-1"})
    assert first.status_code == 201, first.content
    answer = first.json()
    assert answer["count"] == 3 and [r["outcome"] for r in answer["results"]] == [
        "created",
        "disputed",
        "created",
    ]
    assert answer["results"][1]["contradiction_id"] is not None
    assert answer["results"][2]["fact"]["object"] == {"number": 41}
    replay = alice.post("/api/v1/facts", body, **{"Idempotency-Key": "batch-1"})
    assert replay.json() == answer and replay["Idempotent-Replayed"] == "true"
    with tenant_context(alice.tenant):
        assert Fact.objects.filter(subject__name="Ivy").count() == 3  # applied once
    bad = alice.post(
        "/api/v1/facts",
        [*body, {"subject": "Ivy", "predicate": "x", "object": {"entity": "Z"}, "source_event_id": 99999999}],
    )
    assert bad.status_code == 404 and list(bad.json()["errors"]) == ["facts[3].source_event_id"], bad.content
    again = alice.post("/api/v1/facts", body)
    assert again.status_code == 200 and {r["outcome"] for r in again.json()["results"]} == {"reinforced"}


def test_another_tenant_neither_sees_nor_shares_a_batchs_facts(alice: Caller, mallory: Caller) -> None:
    name = f"Jo-{uuid.uuid4().hex[:6]}"
    assert (
        alice.post(
            "/api/v1/facts", [{"subject": name, "predicate": "likes", "object": {"entity": "Jazz"}}]
        ).status_code
        == 201
    )
    theirs = mallory.post(
        "/api/v1/facts", [{"subject": name, "predicate": "likes", "object": {"entity": "Rock"}}]
    )
    assert (
        theirs.status_code == 201 and theirs.json()["results"][0]["outcome"] == "created"
    )  # no contradiction across tenants
    mine = alice.get(f"/api/v1/entities/{name}/facts").json()["facts"]
    assert [f["object"]["entity"] for f in mine] == ["Jazz"]
    assert [f["object"]["entity"] for f in mallory.get(f"/api/v1/entities/{name}/facts").json()["facts"]] == [
        "Rock"
    ]


def test_a_batchs_projection_converges_in_neo4j(graph_tenant: Tenant, neo4j_driver) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(graph_tenant):
        agent = agent_create(by=None, name="batcher")
        facts = [F(f"p{i % 50}", "knows", ent(f"q{i}")) for i in range(200)]
        facts += [F("p1", "lives_in", ent("Here")), F("p1", "lives_in", ent("There"))]
        services.facts_assert_batch(agent=agent, facts=facts)
        assert GraphOutbox.objects.filter(processed_at__isnull=True).count() == 202
        # the batch's projection task is queued on commit (this tenant's work is committed): a worker
        # started by an earlier test may be draining the same rows
        projection_caught_up(batch_size=64)
        assert neo4j_projection(neo4j_driver, graph_tenant.schema_name) == postgres_projection()
