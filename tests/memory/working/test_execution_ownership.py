"""An execution belongs to the agent that started it (its first writer): only that agent closes it."""

from __future__ import annotations

import uuid

import pytest
from django_tenants.utils import tenant_context

from core.redis import get_redis
from memory.episodic.models import Event
from tenants.models import Tenant
from tests.factories import Caller


@pytest.fixture
def trio_tenants(committed_tenants: tuple[Tenant, Tenant]) -> tuple[Tenant, Tenant]:
    """The trio in committed tenants: an execution's owner is kept in Redis beside committed rows."""
    return committed_tenants


@pytest.fixture
def execution() -> str:
    return f"exec-{uuid.uuid4().hex[:12]}"


def ex_url(execution_id: str, suffix: str) -> str:
    return f"/api/v1/executions/{execution_id}/{suffix}"


def put(caller: Caller, path: str, value: object):  # type: ignore[no-untyped-def]
    return caller.client.put(path, {"value": value}, format="json")


def close(caller: Caller, execution_id: str, **body: object):  # type: ignore[no-untyped-def]
    return caller.post(ex_url(execution_id, "close"), body)


def owner_key(caller: Caller, execution_id: str) -> str:
    return "{" + caller.tenant.schema_name + "}:bb-owner:" + execution_id


def events_of(caller: Caller, execution_id: str) -> list[Event]:
    with tenant_context(caller.tenant):
        return list(Event.objects.filter(execution_id=execution_id))


def test_only_the_agent_that_started_an_execution_may_close_it(
    alice: Caller, bob: Caller, execution: str
) -> None:
    assert put(alice, ex_url(execution, "blackboard/answer"), "42").status_code == 201
    assert put(alice, ex_url(execution, "scratchpad/hunch"), "the butler").status_code == 201
    # a teammate takes part: writes the blackboard and a scratchpad of its own
    assert put(bob, ex_url(execution, "blackboard/check"), "ok").status_code == 201
    assert put(bob, ex_url(execution, "scratchpad/tmp"), "y").status_code == 201

    refused = close(bob, execution, session_id="sess-x")
    assert refused.status_code == 403, refused.content
    doc = refused.json()
    assert doc["code"] == "permission_denied" and list(doc["errors"]) == ["execution_id"]
    assert "only the agent that started" in doc["detail"].lower()

    # nothing happened: scratchpads intact, still open, no event in the trail
    assert alice.get(ex_url(execution, "scratchpad")).json()["values"] == {"hunch": "the butler"}
    assert bob.get(ex_url(execution, "scratchpad")).json()["values"] == {"tmp": "y"}
    assert not get_redis().exists("{" + alice.tenant.schema_name + "}:bb-closed:" + execution)
    assert events_of(alice, execution) == []
    assert put(bob, ex_url(execution, "blackboard/check"), "still ok").status_code == 200
    # the blackboard stays readable by the tenant's agents
    fields = bob.get(ex_url(execution, "blackboard")).json()["results"]
    assert [f["field"] for f in fields] == ["alice:answer", "bob:check"]

    closed = close(alice, execution, session_id="sess-x")
    assert closed.status_code == 200, closed.content
    [event] = events_of(alice, execution)
    assert event.pk == closed.json()["event_id"] and event.agent_id == alice.agent.pk
    assert event.payload["owner"] == "alice" and event.payload["scratchpads_deleted"] == 2
    assert bob.get(ex_url(execution, "scratchpad")).json()["values"] == {}
    assert close(alice, execution).status_code == 409  # already closed
    assert close(bob, execution).status_code == 403  # still not his


def test_the_first_writer_owns_the_execution_whatever_it_writes_first(
    alice: Caller, bob: Caller, execution: str
) -> None:
    assert put(bob, ex_url(execution, "scratchpad/notes"), "first").status_code == 201
    assert put(alice, ex_url(execution, "blackboard/plan"), ["a", "b"]).status_code == 201
    redis = get_redis()
    assert redis.get(owner_key(bob, execution)) == str(bob.agent.pk).encode()  # never overwritten
    # the owner key outlives every other key of the execution (it is refreshed with them)
    policy = alice.tenant.working_memory_policy
    assert (
        redis.ttl(owner_key(bob, execution))
        > max(policy.blackboard_ttl_seconds, policy.scratchpad_ttl_seconds) - 60
    )
    assert close(alice, execution).status_code == 403
    assert close(bob, execution).status_code == 200


def test_a_failed_compare_and_set_does_not_make_its_agent_the_owner(
    alice: Caller, bob: Caller, execution: str
) -> None:
    stale = bob.client.put(
        ex_url(execution, "blackboard/plan"), {"value": 1, "expected_version": 3}, format="json"
    )
    assert stale.status_code == 409
    assert not get_redis().exists(owner_key(bob, execution))
    put(alice, ex_url(execution, "blackboard/plan"), 1)
    assert close(bob, execution).status_code == 403
    assert close(alice, execution).status_code == 200


def test_closing_an_execution_nobody_wrote_is_404_and_logs_nothing(alice: Caller, execution: str) -> None:
    response = close(alice, execution, session_id="sess-y")
    assert response.status_code == 404, response.content
    assert response.json()["code"] == "not_found" and list(response.json()["errors"]) == ["execution_id"]
    assert events_of(alice, execution) == []
    # the refused close left no mark: the execution can still start, and its first writer owns it
    assert put(alice, ex_url(execution, "blackboard/plan"), 1).status_code == 201
    assert close(alice, execution).status_code == 200


def test_an_outsider_cannot_close_or_reach_another_tenants_execution(
    alice: Caller, mallory: Caller, execution: str
) -> None:
    put(alice, ex_url(execution, "scratchpad/k"), "alpha only")
    # the same id in tenant beta names no execution there
    assert close(mallory, execution).status_code == 404
    assert events_of(mallory, execution) == []
    assert alice.get(ex_url(execution, "scratchpad")).json()["values"] == {"k": "alpha only"}
    # mallory starting an execution with that id owns hers, not alice's
    put(mallory, ex_url(execution, "blackboard/x"), 1)
    assert close(mallory, execution).status_code == 200
    assert alice.get(ex_url(execution, "scratchpad")).json()["values"] == {"k": "alpha only"}
    assert close(alice, execution).status_code == 200
