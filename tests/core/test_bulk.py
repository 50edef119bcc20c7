"""``core.bulk.rows_insert`` stores what ``bulk_create`` would: every field type facts use, read back."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, transaction
from django_tenants.utils import tenant_context

from agents.services import agent_create
from core.bulk import rows_insert
from memory.knowledge.models import Contradiction, Entity, Fact, FactProvenance, Predicate


def test_rows_come_back_as_sent_with_their_ids(tenant_a) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(tenant_a):
        agent = agent_create(by=None, name="bulk")
        ada, lisbon = (
            Entity.objects.create(key="ada", name="Ada"),
            Entity.objects.create(key="lisbon", name="Lisbon"),
        )
        lives, age = Predicate.objects.create(name="lives_in"), Predicate.objects.create(name="age")
        when = datetime(2026, 1, 31, 12, 0, 0, 123456, tzinfo=UTC)
        facts = [
            Fact(subject=ada, predicate=lives, object_entity=lisbon, object_key=f"e:{lisbon.pk}",
                 confidence=0.9, valid_from=when, agent=agent, session_id="s1"),
            Fact(subject=ada, predicate=age, literal_type="number", literal_value=41.5, object_key="number:41.5",
                 confidence=1.0, valid_from=when, agent=agent, data_subject="customer-7"),
            Fact(subject=lisbon, predicate=age, literal_type="string", literal_value={"a": [1, None, "é"]},
                 object_key="string:x", confidence=0.25, valid_from=when, agent=agent, status="disputed"),
        ]  # fmt: skip
        rows_insert(facts)
        assert all(f.pk is not None and not f._state.adding for f in facts)
        assert facts[0].pk < facts[1].pk < facts[2].pk  # in the order sent
        stored = {f.pk: f for f in Fact.objects.filter(pk__in=[f.pk for f in facts])}
        for sent in facts:
            back = stored[sent.pk]
            for name in ("subject_id", "predicate_id", "object_entity_id", "literal_type", "literal_value",
                         "object_key", "confidence", "status", "valid_from", "valid_to", "recorded_at",
                         "agent_id", "session_id", "source_event_id", "data_subject", "ended_at"):  # fmt: skip
                assert getattr(back, name) == getattr(sent, name), name
        assert Fact.objects.filter(
            pk=facts[0].pk, literal_value__isnull=True
        ).exists()  # SQL NULL, not JSON null
        # a foreign key assigned before its target was saved takes the target's id
        contradiction = Contradiction(existing_fact=facts[1], new_fact=facts[2])
        rows = [FactProvenance(fact=f, agent=agent, session_id="s1", confidence=f.confidence) for f in facts]
        rows_insert([contradiction])
        rows_insert(rows)
        assert Contradiction.objects.get(pk=contradiction.pk).new_fact_id == facts[2].pk
        assert sorted(FactProvenance.objects.values_list("fact_id", flat=True)) == sorted(f.pk for f in facts)


def test_a_constraint_is_an_integrity_error_and_nothing_is_stored(tenant_a) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(tenant_a):
        agent = agent_create(by=None, name="bulk")
        ada = Entity.objects.create(key="ada", name="Ada")
        lives = Predicate.objects.create(name="lives_in")
        when = datetime(2026, 1, 31, tzinfo=UTC)
        same = [
            Fact(subject=ada, predicate=lives, literal_type="string", literal_value="Lisbon",
                 object_key="string:Lisbon", confidence=0.9, valid_from=when, agent=agent)
            for _ in range(2)
        ]  # fmt: skip
        with pytest.raises(IntegrityError), transaction.atomic():
            rows_insert(same)  # fact_live_uniq: one live row per (subject, predicate, object)
        assert not Fact.objects.exists()
