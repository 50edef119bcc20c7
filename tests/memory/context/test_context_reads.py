"""The layers' reads that context assembly makes, each in one round trip: the working state (one
Redis pipeline), the session's latest events with its size, the facts about the entities a text
names, skill matching; and the assembly's whole database budget. Each read gives what the reads it
replaces gave, and nothing of another agent's or tenant's."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django_tenants.utils import tenant_context

from core.fulltext import query_lexemes
from memory.context.services import context_build
from memory.episodic.selectors import session_tail
from memory.knowledge import selectors as knowledge
from memory.procedural.selectors import skill_match
from memory.working import services as working
from tests.factories import (
    Caller,
    assert_fact,
    event,
    fact,
    remember,
    requires_model,
    skill_publish,
    skill_seed,
)


@pytest.fixture
def ids() -> tuple[str, str]:
    """A session and an execution of their own (Redis keys outlive the rolled-back database)."""
    tag = uuid.uuid4().hex[:10]
    return f"s-{tag}", f"x-{tag}"


def _warm() -> None:
    """One query first, so the counted ones do not include the connection's tenant setup."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def test_working_state_is_the_three_reads_and_private_to_the_agent(
    alice: Caller, bob: Caller, mallory: Caller, ids: tuple[str, str]
) -> None:
    session, execution = ids
    put = alice.client.put
    assert (
        put(f"/api/v1/executions/{execution}/scratchpad/plan", {"value": [1, 2]}, format="json").status_code
        == 201
    )
    assert (
        put(f"/api/v1/executions/{execution}/blackboard/city", {"value": "Lisbon"}, format="json").status_code
        == 201
    )
    for n in range(3):
        assert alice.post(
            f"/api/v1/sessions/{session}/window", {"role": "user", "content": f"turn {n}"}
        ).status_code in (
            200,
            201,
        )
    with tenant_context(alice.tenant):
        state = working.working_state_read(
            agent=alice.agent, execution_id=execution, session_id=session, last=2
        )
        assert (
            state.scratchpad
            == working.scratchpad_read(agent=alice.agent, execution_id=execution)
            == {"plan": [1, 2]}
        )
        assert state.blackboard == working.blackboard_read(reader=alice.agent, execution_id=execution)
        assert [e.field for e in state.blackboard] == ["alice:city"]
        assert state.window == working.window_read(agent=alice.agent, session_id=session, last=2)
        assert [t["content"] for t in state.window] == ["turn 1", "turn 2"]

        teammate = working.working_state_read(
            agent=bob.agent, execution_id=execution, session_id=session, last=2
        )
        assert teammate.scratchpad == {}  # alice's scratchpad is hers
        assert [e.field for e in teammate.blackboard] == ["alice:city"]  # the blackboard is shared

        nothing = working.working_state_read(agent=alice.agent, execution_id=None, session_id=None, last=5)
        assert (nothing.scratchpad, nothing.blackboard, nothing.window) == ({}, [], [])
    with tenant_context(mallory.tenant):
        outsider = working.working_state_read(
            agent=mallory.agent, execution_id=execution, session_id=session, last=5
        )
        assert (outsider.scratchpad, outsider.blackboard, outsider.window) == ({}, [], [])


def test_session_tail_is_the_latest_events_in_time_order_with_the_session_size_in_one_query(
    alice: Caller, mallory: Caller, ids: tuple[str, str], django_assert_num_queries
) -> None:  # type: ignore[no-untyped-def]
    session, _ = ids
    events = [event(f"turn {n}", session_id=session, occurred_at=f"2026-03-01T10:0{n}:00Z") for n in range(5)]
    assert alice.post("/api/v1/events", events[::-1]).status_code == 201  # stored out of time order
    with tenant_context(alice.tenant):
        _warm()
        with django_assert_num_queries(1):
            tail = session_tail(agent=alice.agent, session_id=session, last=3)
        assert [e.content for e in tail.events] == ["turn 2", "turn 3", "turn 4"]
        assert tail.total == 5
        assert tail.events[0].agent.name == "alice"
        assert session_tail(agent=alice.agent, session_id=session, last=10).total == 5
        with django_assert_num_queries(1):
            empty = session_tail(agent=alice.agent, session_id="s-none", last=3)
        assert (list(empty.events), empty.total) == ([], 0)
    with tenant_context(mallory.tenant):
        outsider = session_tail(agent=mallory.agent, session_id=session, last=3)
        assert (list(outsider.events), outsider.total) == ([], 0)


def _facts_one_entity_at_a_time(text: str, *, entities: int, per_entity: int) -> list[int]:
    """What context assembly read before: each named entity's live facts, a query each."""
    out: list[int] = []
    for entity in knowledge.entities_named_in(text, limit=entities):
        for f in knowledge.fact_list(entity=entity)[:per_entity]:
            if f.pk not in out:
                out.append(f.pk)
    return out


def test_facts_about_named_entities_are_each_entitys_first_facts_in_one_query(
    alice: Caller, mallory: Caller, django_assert_num_queries
) -> None:  # type: ignore[no-untyped-def]
    assert_fact(alice, fact("Alice", "works_at", {"entity": "Acme Corp"}, valid_from="2026-01-01T00:00:00Z"))
    assert_fact(alice, fact("Alice", "lives_in", {"entity": "Lisbon"}, valid_from="2026-02-01T00:00:00Z"))
    assert_fact(alice, fact("Alice", "age", {"number": 34}, valid_from="2026-03-01T00:00:00Z"))
    assert_fact(alice, fact("Bob", "manages", {"entity": "Alice"}, valid_from="2025-06-01T00:00:00Z"))
    assert_fact(alice, fact("Acme Corp", "based_in", {"entity": "Lisbon"}, valid_from="2025-01-01T00:00:00Z"))
    retracted = assert_fact(alice, fact("Alice", "likes", {"entity": "Tea"}))["fact"]["id"]
    assert alice.post(f"/api/v1/facts/{retracted}/retract", {"reason": "test"}).status_code == 200
    text = "Did Alice leave acme corp, and where is Lisbon?"
    with tenant_context(alice.tenant):
        _warm()
        for entities, per_entity in [(5, 20), (5, 2), (1, 20), (2, 1)]:
            with django_assert_num_queries(1):
                found = knowledge.facts_about_named(text, entities=entities, per_entity=per_entity)
            assert [f.pk for f in found] == _facts_one_entity_at_a_time(
                text, entities=entities, per_entity=per_entity
            ), (entities, per_entity)
        every = knowledge.facts_about_named(text, entities=5, per_entity=20)
        # the longest name first (acme corp), then by id; a fact about two of them once
        assert [(f.subject.name, f.predicate.name) for f in every][:2] == [
            ("Acme Corp", "based_in"),
            ("Alice", "works_at"),
        ]
        assert len({f.pk for f in every}) == len(every) == 5
        assert retracted not in {str(f.pk) for f in every}
        assert knowledge.facts_about_named("nobody named here", entities=5, per_entity=20) == []
        assert knowledge.facts_about_named("", entities=5, per_entity=20) == []
    with tenant_context(mallory.tenant):
        assert knowledge.facts_about_named(text, entities=5, per_entity=20) == []


@requires_model
def test_skill_match_is_one_round_trip_once_the_words_are_known(
    alice: Caller, mallory: Caller, django_assert_num_queries
) -> None:  # type: ignore[no-untyped-def]
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    intent = "reset a user's password"
    with tenant_context(alice.tenant):
        query_lexemes(intent)  # the words, as semantic recall of the same query leaves them
        with django_assert_num_queries(2):  # the candidates, then the best's version row
            matches = skill_match(intent=intent, k=1)
        assert [m.version.skill.name for m in matches] == ["reset-password"]
        # the HNSW options were local to the statement's implicit transaction
        with connection.cursor() as cursor:
            cursor.execute("SHOW hnsw.ef_search")
            assert cursor.fetchone()[0] == "40"
    with tenant_context(mallory.tenant):
        assert skill_match(intent=intent, k=1) == []


@requires_model
def test_an_assembly_costs_one_query_per_layer_read(
    alice: Caller, ids: tuple[str, str], django_assert_num_queries
) -> None:  # type: ignore[no-untyped-def]
    session, execution = ids
    assert (
        alice.post("/api/v1/events", [event("Alice moved to Lisbon", session_id=session)]).status_code == 201
    )
    assert remember(alice, "Alice moved to Lisbon in March").status_code == 201
    assert_fact(alice, fact("Alice", "lives_in", {"entity": "Lisbon"}))
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    query = "Where does Alice live, and how do I reset a password?"
    with tenant_context(alice.tenant):
        build = dict(
            agent=alice.agent, tenant=alice.tenant, session_id=session, execution_id=execution, query=query
        )
        first = context_build(**build, budget=2000)  # type: ignore[arg-type]
        # the latest events with the session's size, the summaries, the facts, the recall, the
        # skills and the matched skill's version (the query's words are known after the first)
        with django_assert_num_queries(6):
            again = context_build(**build, budget=2000)  # type: ignore[arg-type]
        assert [s.layer for s in again.sections] == [s.layer for s in first.sections]
        assert {s.layer for s in again.sections} == {"episodes", "semantic", "facts", "procedures"}
        assert again.history_turns == 1
