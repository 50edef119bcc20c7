"""Promotion: memories with high confidence that were recalled or reinforced often become facts,
through ``fact_assert`` (contradictions as usual), with provenance back to the memory and its
source event; once per memory; never a retracted fact again; without a hint (and no LLM) skipped."""

from __future__ import annotations

import pytest
from django_tenants.utils import tenant_context

from memory.consolidation.models import Promotion, PromotionOutcome
from memory.consolidation.services.promotion import promotion_pass
from memory.episodic.models import Event
from memory.knowledge.models import Contradiction, Fact, FactProvenance, FactStatus
from tests.factories import Caller, assert_fact, event, fact, remember, requires_model

pytestmark = [pytest.mark.django_db, requires_model]

LISBON = {"subject": "Alice", "predicate": "lives_in", "object": {"entity": "Lisbon", "type": "city"}}


def well_used(caller: Caller, content: str, *, times: int = 3, **extra: object) -> dict:
    """A memory written once and reinforced ``times`` times (exact duplicates)."""
    first = remember(caller, content, **extra)
    assert first.status_code == 201, first.content
    for _ in range(times):
        assert remember(caller, content, **extra).status_code == 200
    return first.json()


def said(caller: Caller, text: str) -> int:
    response = caller.post("/api/v1/events", event(text, session_id="s-home"))
    assert response.status_code == 201, response.content
    return response.json()["id"]


def test_a_hinted_well_used_memory_becomes_a_fact_with_provenance(alice: Caller) -> None:
    source = said(alice, "Alice: I moved to Lisbon last spring.")
    memory = well_used(
        alice,
        "Alice lives in Lisbon.",
        confidence=0.95,
        fact=LISBON,
        source_event_id=source,
        session_id="s-home",
    )
    assert memory["fact"] == {**LISBON, "subject_type": None}
    assert memory["source_event_id"] == source
    weak = well_used(alice, "Alice might like jazz.", confidence=0.6, fact={**LISBON, "predicate": "likes"})
    rare = remember(alice, "Alice owns a bike.", confidence=0.99, fact={**LISBON, "predicate": "owns"}).json()
    with tenant_context(alice.tenant):
        run = promotion_pass()
        assert run is not None
        assert run.counts == {"examined": 1, "created": 1}
        promotion = Promotion.objects.select_related("fact", "provenance").get()
        assert str(promotion.memory_id) == memory["id"] and promotion.outcome == PromotionOutcome.CREATED
        promoted = promotion.fact
        assert (promoted.subject.name, promoted.predicate.name, promoted.object_entity.name) == (
            "Alice",
            "lives_in",
            "Lisbon",
        )
        assert promoted.agent_id == alice.agent.pk and promoted.confidence == pytest.approx(0.95)
        assert promoted.source_event_id == source and promoted.session_id == "s-home"
        assert promotion.provenance.fact_id == promoted.pk and promotion.provenance.source_event_id == source
        decision = Event.objects.get(payload_index__action="memories_promote")
        assert decision.actor == "job:consolidation" and decision.session_id == "s-home"
        assert decision.agent_id == alice.agent.pk
        assert decision.payload["promotions"] == [
            {
                "memory_id": memory["id"],
                "outcome": "created",
                "fact_id": promoted.pk,
                "provenance_id": promotion.provenance_id,
                "contradiction_id": None,
                "source_event_id": source,
            }
        ]
        assert not Promotion.objects.filter(memory_id__in=[weak["id"], rare["id"]]).exists()

        # run twice: the same result (a memory is promoted once)
        again = promotion_pass()
        assert again is not None and again.counts == {}
        assert Fact.objects.count() == 1 and FactProvenance.objects.count() == 1
        assert Event.objects.filter(payload_index__action="memories_promote").count() == 1


def test_a_promotion_that_contradicts_a_fact_opens_a_contradiction(alice: Caller, bob: Caller) -> None:
    assert_fact(bob, fact("Alice", "lives_in", {"entity": "Porto"}))
    well_used(alice, "Alice lives in Lisbon.", confidence=0.95, fact=LISBON)
    with tenant_context(alice.tenant):
        run = promotion_pass()
        assert run is not None and run.counts == {"examined": 1, "disputed": 1}
        promotion = Promotion.objects.get()
        assert promotion.outcome == PromotionOutcome.DISPUTED
        contradiction = Contradiction.objects.get()
        assert promotion.contradiction_id == contradiction.pk
        assert contradiction.new_fact_id == promotion.fact_id
        assert contradiction.existing_fact.object_entity.name == "Porto"
    assert alice.get("/api/v1/contradictions", {"status": "open"}).json()["results"]


def test_a_retracted_fact_does_not_come_back(alice: Caller) -> None:
    created = assert_fact(alice, fact("Alice", "lives_in", {"entity": "Lisbon"}))
    assert (
        alice.post(f"/api/v1/facts/{created['fact']['id']}/retract", {"reason": "wrong"}).status_code == 200
    )
    well_used(alice, "Alice lives in Lisbon.", confidence=0.95, fact=LISBON)
    with tenant_context(alice.tenant):
        run = promotion_pass()
        assert run is not None and run.counts == {"examined": 1, "refused": 1}
        assert Promotion.objects.get().outcome == PromotionOutcome.REFUSED
        assert list(Fact.objects.values_list("status", flat=True)) == [FactStatus.RETRACTED]


def test_without_a_hint_or_a_model_the_memory_is_skipped_and_counted(alice: Caller) -> None:
    well_used(alice, "Alice lives in Lisbon.", confidence=0.95)
    forgotten = well_used(
        alice,
        "Bob lives in Porto.",
        confidence=0.95,
        fact={**LISBON, "subject": "Bob", "object": {"entity": "Porto"}},
    )
    assert alice.client.delete(f"/api/v1/memories/{forgotten['id']}").status_code == 200
    with tenant_context(alice.tenant):
        run = promotion_pass()
        assert run is not None and run.counts == {"examined": 1, "skipped_no_hint": 1}
        assert not Fact.objects.exists() and not Promotion.objects.exists()


def test_a_malformed_hint_is_a_400_naming_the_field(alice: Caller) -> None:
    response = remember(
        alice,
        "Alice lives in Lisbon.",
        fact={"subject": "Alice", "predicate": "Lives In", "object": {"entity": "Lisbon"}},
    )
    assert response.status_code == 400 and "fact.predicate" in response.json()["errors"]
    response = remember(
        alice,
        "Alice lives in Lisbon.",
        fact={"subject": "Alice", "predicate": "lives_in", "object": {"city": "Lisbon"}},
    )
    assert response.status_code == 400 and "fact.object" in response.json()["errors"]
    response = remember(alice, "Alice lives in Lisbon.", source_event_id=999999)  # no such event
    assert response.status_code == 404 and "source_event_id" in response.json()["errors"]


def test_a_batch_of_promotions_records_one_decision_per_session_naming_each_memory(
    alice: Caller, bob: Caller
) -> None:
    """Set-based batches: the Promotion rows and their provenance are written per batch, and the
    trail gets one decision per (author, session) listing every memory, fact and outcome."""
    # three statements, not versions of one (near ones that differ in a number are updates)
    trips = [
        "Alice toured the old town on foot.",
        "Alice hiked along the coast.",
        "Alice took a cooking class.",
    ]
    home = [
        well_used(
            alice,
            trips[i],
            times=3,
            confidence=0.95,
            session_id="s-home",
            fact={"subject": "Alice", "predicate": "visited", "object": {"entity": f"City {i}"}},
        )
        for i in range(3)
    ]
    work = well_used(
        alice,
        "Alice works at Acme.",
        confidence=0.95,
        session_id="s-work",
        fact={"subject": "Alice", "predicate": "works_at", "object": {"entity": "Acme"}},
    )
    # the same fact from two agents in one batch: one fact, two provenance rows, each linked
    same = [
        well_used(
            caller,
            f"{caller.agent.name} knows Lisbon is in Portugal.",
            confidence=0.95,
            fact={"subject": "Lisbon", "predicate": "located_in", "object": {"entity": "Portugal"}},
        )
        for caller in (alice, bob)
    ]
    with tenant_context(alice.tenant):
        run = promotion_pass(batch=10)
        # "visited" is a one-valued predicate: the 2nd and 3rd city dispute the 1st, as fact_assert rules
        assert run is not None and run.counts == {"examined": 6, "created": 3, "disputed": 2, "reinforced": 1}
        promotions = {str(p.memory_id): p for p in Promotion.objects.select_related("provenance")}
        assert set(promotions) == {m["id"] for m in [*home, work, *same]}
        for p in promotions.values():
            assert p.provenance is not None and p.provenance.fact_id == p.fact_id
            assert p.provenance.agent_id == p.memory.agent_id
        assert len({p.provenance_id for p in promotions.values()}) == 6
        decisions = Event.objects.filter(payload_index__action="memories_promote")
        by_session = {(e.agent_id, e.session_id): e for e in decisions}
        assert set(by_session) == {
            (alice.agent.pk, "s-home"),
            (alice.agent.pk, "s-work"),
            (alice.agent.pk, "consolidation"),
            (bob.agent.pk, "consolidation"),
        }
        listed = {item["memory_id"]: item for e in decisions for item in e.payload["promotions"]}
        assert set(listed) == set(promotions)
        for memory_id, item in listed.items():
            assert item["fact_id"] == promotions[memory_id].fact_id
            assert item["provenance_id"] == promotions[memory_id].provenance_id
        assert all(e.actor == "job:consolidation" for e in decisions)
        assert [
            i["memory_id"] for i in by_session[(alice.agent.pk, "s-home")].payload["promotions"]
        ] == sorted(m["id"] for m in home)


def test_a_superseded_memory_is_never_promoted(alice: Caller) -> None:
    """Its fact would come back as current: only the newer version may be promoted."""
    old = well_used(alice, "Alice lives in Lisbon.", confidence=0.95, fact=LISBON)
    response = remember(alice, "Alice lives in Porto now.", supersedes=old["id"])
    assert response.status_code == 201 and response.json()["outcome"] == "updated", response.content
    with tenant_context(alice.tenant):
        run = promotion_pass()
        assert run is not None and run.counts == {}
        assert not Fact.objects.exists() and not Promotion.objects.exists()
