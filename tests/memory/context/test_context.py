"""Context assembly against the real PostgreSQL, Redis and embedder: the sections of every layer,
duplicates merged across layers with all their sources, the budget never exceeded (counted again
with the real tokenizer), the lost-in-the-middle order, the saving against the whole history, and
what another agent or another tenant may not see."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client

from memory.context.services import edge_order
from memory.context.tokens import token_counter
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

pytestmark = requires_model

MOVED = "Alice moved to Lisbon in March"


def build(caller: Caller, **body: Any) -> dict[str, Any]:
    response = caller.post("/api/v1/context", body)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def ids() -> tuple[str, str]:
    """A session and an execution of their own (Redis keys outlive the rolled-back database)."""
    tag = uuid.uuid4().hex[:10]
    return f"s-{tag}", f"x-{tag}"


def seed(caller: Caller, session: str, execution: str) -> None:
    """One thing in every layer; ``MOVED`` in three of them (a turn, an event, a memory)."""
    put = caller.client.put
    assert (
        put(
            f"/api/v1/executions/{execution}/scratchpad/plan",
            {"value": "ask where Alice works"},
            format="json",
        ).status_code
        == 201
    )
    assert (
        put(f"/api/v1/executions/{execution}/blackboard/city", {"value": "Lisbon"}, format="json").status_code
        == 201
    )
    assert caller.post(
        f"/api/v1/sessions/{session}/window", {"role": "user", "content": MOVED}
    ).status_code in (200, 201)
    events = [
        event(MOVED, session_id=session, occurred_at="2026-03-01T10:00:00Z"),
        event("We talked about the weather", session_id=session, occurred_at="2026-03-01T10:01:00Z"),
        event("Alice asked for the quarterly report", session_id=session, occurred_at="2026-03-01T10:02:00Z"),
    ]
    assert caller.post("/api/v1/events", events).status_code == 201
    assert remember(caller, MOVED, importance=0.9).status_code == 201
    assert remember(caller, "Bob prefers tea over coffee in the morning.").status_code == 201
    assert_fact(caller, fact("Alice", "works_at", {"entity": "Acme"}, confidence=0.9))
    assert_fact(caller, fact("Alice", "lives_in", {"entity": "Lisbon"}, confidence=0.8))
    skill_seed(caller)
    skill_publish(caller.tenant, "reset-password", 1)


def all_items(context: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for section in context["sections"] for item in section["items"]]


def assert_edges_first(values: list[float]) -> None:
    """Best at the start, second best at the end, and so on inwards (Liu et al. 2024)."""
    ranked = sorted(values, reverse=True)
    assert values == edge_order(ranked), values


def test_every_layer_is_a_section_duplicates_are_merged_and_the_best_sit_at_the_ends(
    alice: Caller, ids: tuple[str, str]
) -> None:
    session, execution = ids
    seed(alice, session, execution)
    context = build(
        alice, session_id=session, execution_id=execution, query="Where does Alice work?", budget=2000
    )
    layers = [s["layer"] for s in context["sections"]]
    assert sorted(layers) == sorted(["working", "window", "episodes", "semantic", "facts", "procedures"])
    # the hierarchy: working state is worth most, so it opens the context
    assert layers[0] == "working"
    assert_edges_first([max(i["value"] for i in s["items"]) for s in context["sections"]])
    for section in context["sections"]:
        if section["layer"] in ("semantic", "facts"):
            assert_edges_first([i["value"] for i in section["items"]])

    texts = [i["text"] for i in all_items(context)]
    moved = [i for i in all_items(context) if MOVED.lower() in i["text"].lower()]
    assert len(moved) == 1, texts  # a turn, an event and a memory: one item
    assert {s["layer"] for s in moved[0]["sources"]} == {"window", "episodic", "semantic"}
    assert context["duplicates_merged"] >= 2
    assert any(t.startswith("Alice works_at Acme") for t in texts)
    assert any(t.startswith("scratchpad plan =") for t in texts)
    assert any(t.startswith("blackboard alice:city =") for t in texts)
    assert any(t.startswith("skill reset-password v1") for t in texts)
    for item in all_items(context):
        assert item["sources"] and all(s["id"] for s in item["sources"])


@pytest.mark.parametrize("budget", [16, 40, 64, 100, 250, 600])
def test_the_budget_is_never_exceeded_and_what_fits_is_the_most_valuable_per_token(
    alice: Caller, ids: tuple[str, str], budget: int
) -> None:
    session, execution = ids
    seed(alice, session, execution)
    context = build(
        alice, session_id=session, execution_id=execution, query="Where does Alice work?", budget=budget
    )
    counter = token_counter()
    assert context["tokenizer"] == "minilm"
    assert context["tokens_used"] == counter.count(context["text"]) <= budget
    # the text is the sections, in their order
    for section in context["sections"]:
        assert f"## {section['title']}" in context["text"]
        for item in section["items"]:
            assert f"- {item['text']}" in context["text"]
    if budget >= 250:
        assert context["dropped"] < context["candidates"]
    assert (
        context["candidates"] == len(all_items(context)) + context["dropped"] + context["duplicates_merged"]
    )


def test_a_small_budget_keeps_the_denser_items(alice: Caller, ids: tuple[str, str]) -> None:
    session, execution = ids
    seed(alice, session, execution)
    small = build(
        alice, session_id=session, execution_id=execution, query="Where does Alice work?", budget=40
    )
    large = build(
        alice, session_id=session, execution_id=execution, query="Where does Alice work?", budget=4000
    )
    density = {i["text"]: i["value"] / i["tokens"] for i in all_items(large)}
    kept = {i["text"] for i in all_items(small)}
    assert kept and kept < set(density)
    # nothing left out is denser than everything kept, unless it did not fit in what was left
    worst_kept = min(density[t] for t in kept)
    left_out = [t for t in density if t not in kept and density[t] > worst_kept]
    assert all(
        next(i["tokens"] for i in all_items(large) if i["text"] == t) > 40 - small["tokens_used"]
        for t in left_out
    )


def test_weights_choose_the_layers_and_their_order(alice: Caller, ids: tuple[str, str]) -> None:
    session, execution = ids
    seed(alice, session, execution)
    context = build(
        alice,
        session_id=session,
        execution_id=execution,
        query="Where does Alice work?",
        budget=2000,
        weights={"working": 0, "window": 0, "episodes": 0, "procedures": 0, "facts": 1.0, "semantic": 0.2},
    )
    assert [s["layer"] for s in context["sections"]] == ["facts", "semantic"]
    assert context["weights"]["facts"] == 1.0


def test_the_saving_against_the_whole_history_is_reported_and_counted_in_metrics(
    alice: Caller, ids: tuple[str, str]
) -> None:
    session, _ = ids
    turns = [
        event(f"turn number {n} of a long conversation about Lisbon", session_id=session) for n in range(40)
    ]
    assert alice.post("/api/v1/events", turns).status_code == 201
    context = build(alice, session_id=session, query="Lisbon", budget=64)
    m, dt = context["history_turns"], context["turn_tokens_mean"]
    assert m == 40 and dt > 5
    assert context["full_history_tokens"] == round(m * dt)
    assert context["cumulative_full_history_tokens"] == round(m * (m + 1) / 2 * dt)
    assert context["saved_tokens"] == context["full_history_tokens"] - context["tokens_used"] > 0
    metrics = Client().get("/metrics").content.decode()
    assert 'engram_context_tokens_total{kind="full_history",tenant="alpha"}' in metrics
    assert 'engram_context_builds_total{tenant="alpha"}' in metrics


def test_bad_input_is_a_400_naming_the_field(alice: Caller) -> None:
    for body, path in [
        ({"session_id": "s1", "query": "q", "budget": 3}, "budget"),
        ({"session_id": "s1", "query": "q", "budget": "100"}, "budget"),
        ({"session_id": "s1", "query": "q", "budget": 100, "weights": {"bogus": 1}}, "weights.bogus"),
        ({"session_id": "s1", "query": "q", "budget": 100, "weights": {"facts": 2}}, "weights.facts"),
        ({"session_id": "bad id!", "query": "q", "budget": 100}, "session_id"),
        ({"session_id": "s1", "budget": 100}, "query"),
        ({"session_id": "s1", "query": "q", "budget": 100, "extra": 1}, "extra"),
    ]:
        response = alice.post("/api/v1/context", body)
        assert response.status_code == 400, (body, response.content)
        assert path in response.json()["errors"], (body, response.json())


def test_another_agent_and_another_tenant_see_only_their_own(
    alice: Caller, bob: Caller, mallory: Caller, ids: tuple[str, str]
) -> None:
    session, execution = ids
    seed(alice, session, execution)
    assert remember(alice, "Alice keeps her private diary in a blue notebook").status_code == 201
    query = "Where does Alice work and where is her diary?"
    own = build(alice, session_id=session, execution_id=execution, query=query, budget=4000)
    assert any("blue notebook" in i["text"] for i in all_items(own))

    teammate = build(bob, session_id=session, execution_id=execution, query=query, budget=4000)
    texts = [i["text"] for i in all_items(teammate)]
    assert not any("blue notebook" in t for t in texts)  # alice's private memory
    assert not any(t.startswith("scratchpad") for t in texts)  # alice's private scratchpad
    assert any(t.startswith("blackboard alice:city") for t in texts)  # the blackboard is shared

    outsider = build(mallory, session_id=session, execution_id=execution, query=query, budget=4000)
    assert outsider["sections"] == [] and outsider["history_turns"] == 0, outsider
