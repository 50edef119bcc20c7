"""Decisions land in the session the object came from, never in a synthetic one (``memory:<uuid>``,
``fact:6``, ``execution:...``); an object without a session takes the request's ``session_id``,
else the agent's ``agent:<name>`` session. Real PostgreSQL and Redis."""

from __future__ import annotations

import uuid

from django_tenants.utils import tenant_context

from agents.models import Scope
from memory.episodic.models import Event
from tests.factories import Caller, assert_fact, fact, make_caller, requires_model


def decision(caller: Caller, event_id: int) -> Event:
    with tenant_context(caller.tenant):
        return Event.objects.get(pk=event_id)


def last_decision(caller: Caller, action: str) -> Event:
    with tenant_context(caller.tenant):
        return Event.objects.filter(payload_index__action=action).latest("seq")


@requires_model
def test_a_forget_lands_in_the_memorys_session(alice: Caller) -> None:
    memory = alice.post(
        "/api/v1/memories", {"content": "The vault code is 0000.", "session_id": "s-vault"}
    ).json()
    forgotten = alice.client.delete(f"/api/v1/memories/{memory['id']}?session_id=s-elsewhere")
    assert forgotten.status_code == 200, forgotten.content
    assert decision(alice, forgotten.json()["event_id"]).session_id == "s-vault"  # the memory's wins


@requires_model
def test_a_forget_of_a_sessionless_memory_takes_the_requests_session_or_the_agents(alice: Caller) -> None:
    first = alice.post("/api/v1/memories", {"content": "Standing order: tea at four."}).json()
    second = alice.post("/api/v1/memories", {"content": "Standing order: coffee at nine."}).json()
    one = alice.client.delete(f"/api/v1/memories/{first['id']}?session_id=s-cleanup").json()
    two = alice.client.delete(f"/api/v1/memories/{second['id']}").json()
    assert decision(alice, one["event_id"]).session_id == "s-cleanup"
    assert decision(alice, two["event_id"]).session_id == "agent:alice"
    assert alice.client.delete(f"/api/v1/memories/{first['id']}?bogus=1").status_code == 400


def test_a_retraction_lands_in_the_facts_session(alice: Caller) -> None:
    created = assert_fact(alice, fact("Ana", "works_at", {"entity": "Acme"}, session_id="s-hr"))
    critic = make_caller(alice.tenant, "critic", (Scope.READ, Scope.WRITE, Scope.CURATE))
    response = critic.post(
        f"/api/v1/facts/{created['fact']['id']}/retract", {"reason": "left", "session_id": "s-bob"}
    )
    assert response.status_code == 200, response.content
    event = last_decision(alice, "fact_retract")
    assert event.session_id == "s-hr" and event.agent.name == "critic"


def test_a_retraction_of_a_sessionless_fact_takes_the_requests_session(alice: Caller) -> None:
    first = assert_fact(alice, fact("Ana", "likes", {"string": "tea"}))
    second = assert_fact(alice, fact("Ana", "likes", {"string": "jazz"}))
    alice.post(f"/api/v1/facts/{first['fact']['id']}/retract", {"session_id": "s-review"})
    assert last_decision(alice, "fact_retract").session_id == "s-review"
    alice.post(f"/api/v1/facts/{second['fact']['id']}/retract", {})
    assert last_decision(alice, "fact_retract").session_id == "agent:alice"


def test_a_close_lands_in_the_session_its_first_write_named(alice: Caller, bob: Caller) -> None:
    execution = f"exec-{uuid.uuid4().hex[:8]}"
    board = f"/api/v1/executions/{execution}/blackboard"
    assert (
        alice.client.put(f"{board}/plan", {"value": 1, "session_id": "s-run"}, format="json").status_code
        == 201
    )
    # a later write naming another session does not move the execution
    bob.client.put(f"{board}/note", {"value": 2, "session_id": "s-hijack"}, format="json")
    closed = alice.post(f"/api/v1/executions/{execution}/close", {"session_id": "s-other"})
    assert closed.status_code == 200, closed.content
    assert decision(alice, closed.json()["event_id"]).session_id == "s-run"


def test_a_close_without_a_recorded_session(alice: Caller) -> None:
    for body, expected in (({"session_id": "s-given"}, "s-given"), ({}, "agent:alice")):
        execution = f"exec-{uuid.uuid4().hex[:8]}"
        alice.client.put(f"/api/v1/executions/{execution}/scratchpad/k", {"value": 1}, format="json")
        closed = alice.post(f"/api/v1/executions/{execution}/close", body)
        assert decision(alice, closed.json()["event_id"]).session_id == expected


def test_a_scratchpad_write_records_the_session_too(alice: Caller) -> None:
    execution = f"exec-{uuid.uuid4().hex[:8]}"
    alice.client.put(
        f"/api/v1/executions/{execution}/scratchpad/k", {"value": 1, "session_id": "s-pad"}, format="json"
    )
    closed = alice.post(f"/api/v1/executions/{execution}/close", {})
    assert decision(alice, closed.json()["event_id"]).session_id == "s-pad"


def test_no_decision_goes_to_a_synthetic_session(alice: Caller) -> None:
    created = assert_fact(alice, fact("Ana", "visited", {"string": "Oslo"}))
    alice.post(f"/api/v1/facts/{created['fact']['id']}/retract", {})
    with tenant_context(alice.tenant):
        sessions = set(Event.objects.filter(kind="decision").values_list("session_id", flat=True))
    assert not any(s.startswith(("memory:", "fact:", "execution:", "contradiction:")) for s in sessions)
