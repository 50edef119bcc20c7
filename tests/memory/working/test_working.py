"""Working memory against the real Redis: blackboard CAS, TTLs, scratchpads, windows, close, SSE."""

from __future__ import annotations

import json
import queue
import threading
import uuid
from collections.abc import Iterator

import httpx
import pytest
from django_tenants.utils import tenant_context

from core.errors import Conflict
from core.redis import get_redis
from devstack import free_port
from memory.episodic.models import Event, EventKind
from memory.working import services
from tests.factories import Caller, asgi_server, make_caller


@pytest.fixture
def execution() -> str:
    """A fresh execution id (Redis is not rolled back between tests)."""
    return f"exec-{uuid.uuid4().hex[:12]}"


def bb(caller: Caller, execution: str) -> str:
    return f"/api/v1/executions/{execution}/blackboard"


def put(caller: Caller, path: str, body: object):  # type: ignore[no-untyped-def]
    return caller.client.put(path, body, format="json")


def test_blackboard_fields_carry_agent_and_version(alice: Caller, bob: Caller, execution: str) -> None:
    first = put(alice, f"{bb(alice, execution)}/plan", {"value": {"steps": ["search", "summarise"]}})
    assert first.status_code == 201, first.content
    assert first.json()["field"] == "alice:plan" and first.json()["version"] == 1
    assert put(alice, f"{bb(alice, execution)}/plan", {"value": {"steps": ["search"]}}).json()["version"] == 2
    put(bob, f"{bb(bob, execution)}/findings", {"value": ["Lisbon", 3.5, None, True]})

    everything = bob.get(bb(bob, execution)).json()["results"]
    assert [(f["field"], f["agent"], f["version"]) for f in everything] == [
        ("alice:plan", "alice", 2),
        ("bob:findings", "bob", 1),
    ]
    assert everything[1]["value"] == ["Lisbon", 3.5, None, True]
    only_bob = alice.get(bb(alice, execution), {"agent": "bob"}).json()["results"]
    assert [f["field"] for f in only_bob] == ["bob:findings"]
    one = bob.get(f"{bb(bob, execution)}/alice/plan")
    assert one.status_code == 200 and one.json()["value"] == {"steps": ["search"]}
    assert bob.get(f"{bb(bob, execution)}/alice/nothing").status_code == 404


def test_compare_and_set_conflict_returns_current_version(alice: Caller, execution: str) -> None:
    path = f"{bb(alice, execution)}/status"
    assert put(alice, path, {"value": "draft", "expected_version": 0}).json()["version"] == 1
    stale = put(alice, path, {"value": "final", "expected_version": 0})
    assert stale.status_code == 409
    assert stale.json()["current_version"] == 1 and "expected_version" in stale.json()["errors"]
    assert put(alice, path, {"value": "final", "expected_version": 1}).json()["version"] == 2


def test_two_concurrent_writers_exactly_one_wins(alice: Caller, execution: str) -> None:
    policy = alice.tenant.working_memory_policy
    for round_no in range(25):
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def write(label: str, expected: int = round_no, barrier=barrier, outcomes=outcomes) -> None:  # type: ignore[no-untyped-def]
            with tenant_context(alice.tenant):
                barrier.wait()
                try:
                    services.blackboard_write(
                        agent=alice.agent,
                        execution_id=execution,
                        name="counter",
                        value=label,
                        expected_version=expected,
                        policy=policy,
                    )
                    outcomes.append("won")
                except Conflict:
                    outcomes.append("lost")

        threads = [threading.Thread(target=write, args=(name,)) for name in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["lost", "won"], f"round {round_no}: {outcomes}"
    final = alice.get(f"{bb(alice, execution)}/alice/counter").json()
    assert final["version"] == 25


def test_ttls_are_set_and_refreshed(alice: Caller, execution: str) -> None:
    put(alice, f"{bb(alice, execution)}/plan", {"value": 1})
    put(alice, f"/api/v1/executions/{execution}/scratchpad/notes", {"value": "x"})
    alice.post("/api/v1/sessions/sess-ttl/window", {"role": "user", "content": "hi"})
    redis = get_redis()
    bb_key, pad_key = "{alpha}:bb:" + execution, "{alpha}:sp:" + execution + f":{alice.agent.pk}"
    assert 86_000 < redis.ttl(bb_key) <= 86_400
    assert 3_500 < redis.ttl(pad_key) <= 3_600
    assert 3_500 < redis.ttl("{alpha}:win:sess-ttl") <= 3_600
    redis.expire(bb_key, 10)
    put(alice, f"{bb(alice, execution)}/plan", {"value": 2})
    assert redis.ttl(bb_key) > 86_000


def test_scratchpads_are_private(alice: Caller, bob: Caller, execution: str) -> None:
    pad = f"/api/v1/executions/{execution}/scratchpad"
    assert put(alice, f"{pad}/hypothesis", {"value": {"h": "the butler"}}).status_code == 201
    assert alice.get(pad).json()["values"] == {"hypothesis": {"h": "the butler"}}
    assert bob.get(pad).json()["values"] == {}
    assert bob.client.delete(f"{pad}/hypothesis").status_code == 404
    assert alice.client.delete(f"{pad}/hypothesis").status_code == 204
    assert alice.get(pad).json()["values"] == {}


def test_window_is_bounded_and_returns_the_last_turns(alice: Caller) -> None:
    session = f"sess-{uuid.uuid4().hex[:8]}"
    for i in range(60):
        response = alice.post(f"/api/v1/sessions/{session}/window", {"role": "user", "content": f"turn {i}"})
        assert response.status_code == 201
    assert response.json()["length"] == 50
    turns = alice.get(f"/api/v1/sessions/{session}/window", {"last": 3}).json()["results"]
    assert [t["content"] for t in turns] == ["turn 57", "turn 58", "turn 59"]
    assert turns[0]["agent"] == "alice" and turns[0]["role"] == "user"
    assert len(alice.get(f"/api/v1/sessions/{session}/window", {"last": 1000}).json()["results"]) == 50


def test_every_key_type_is_tenant_isolated(alice: Caller, mallory: Caller, execution: str) -> None:
    put(alice, f"{bb(alice, execution)}/secret", {"value": "alpha only"})
    put(alice, f"/api/v1/executions/{execution}/scratchpad/k", {"value": "alpha only"})
    alice.post(f"/api/v1/sessions/{execution}/window", {"role": "user", "content": "alpha only"})
    assert mallory.get(bb(mallory, execution)).json()["results"] == []
    assert mallory.get(f"{bb(mallory, execution)}/alice/secret").status_code == 404
    assert mallory.get(f"/api/v1/executions/{execution}/scratchpad").json()["values"] == {}
    assert mallory.get(f"/api/v1/sessions/{execution}/window").json()["results"] == []
    # the same ids in tenant beta make keys of their own
    put(mallory, f"{bb(mallory, execution)}/secret", {"value": "beta"})
    assert alice.get(f"{bb(alice, execution)}/alice/secret").json()["value"] == "alpha only"
    keys = {k.decode() for k in get_redis().scan_iter(match=f"*{execution}*")}
    assert keys and all(k.startswith(("{alpha}:", "{beta}:")) for k in keys)
    assert any(k.startswith("{beta}:") for k in keys)


def test_close_deletes_scratchpads_keeps_blackboard_and_logs_a_decision(
    alice: Caller, bob: Caller, execution: str
) -> None:
    put(alice, f"{bb(alice, execution)}/answer", {"value": "42"})
    put(alice, f"/api/v1/executions/{execution}/scratchpad/tmp", {"value": "x"})
    put(bob, f"/api/v1/executions/{execution}/scratchpad/tmp", {"value": "y"})
    closed = alice.post(f"/api/v1/executions/{execution}/close", {"session_id": "sess-close"})
    assert closed.status_code == 200, closed.content
    assert alice.get(f"/api/v1/executions/{execution}/scratchpad").json()["values"] == {}
    assert bob.get(f"/api/v1/executions/{execution}/scratchpad").json()["values"] == {}
    assert [f["field"] for f in bob.get(bb(bob, execution)).json()["results"]] == ["alice:answer"]
    with tenant_context(alice.tenant):
        event = Event.objects.get(pk=closed.json()["event_id"])
    assert (
        event.kind == EventKind.DECISION
        and event.execution_id == execution
        and event.session_id == "sess-close"
    )
    assert event.payload["blackboard"][0]["field"] == "alice:answer"
    assert event.payload["blackboard"][0]["value"] == "42"  # a JSON value, not its text
    assert event.payload["scratchpads_deleted"] == 2
    assert put(alice, f"{bb(alice, execution)}/answer", {"value": "43"}).status_code == 409
    assert alice.post(f"/api/v1/executions/{execution}/close", {}).status_code == 409


def test_oversize_values_are_413_pointing_to_semantic_memory(alice: Caller, execution: str) -> None:
    big = "x" * (10 * 1024)
    response = put(alice, f"{bb(alice, execution)}/blob", {"value": big})
    assert response.status_code == 413
    assert "/api/v1/memories" in response.json()["detail"]
    assert put(alice, f"/api/v1/executions/{execution}/scratchpad/blob", {"value": big}).status_code == 413
    assert put(alice, f"{bb(alice, execution)}/small", {"value": "x" * 1000}).status_code == 201


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("blackboard/plan", {}, "value"),
        ("blackboard/plan", {"value": 1, "expected_version": "1"}, "expected_version"),
        ("blackboard/plan", {"value": 1, "expected_version": -1}, "expected_version"),
        ("blackboard/plan", {"value": 1, "extra": 2}, "extra"),
        ("blackboard/plan", [1, 2], "body"),
        ("blackboard/bad:name", {"value": 1}, "field"),
        ("scratchpad/k", {"valu": 1}, "value"),
    ],
)
def test_malformed_writes_are_400(alice: Caller, execution: str, path: str, body: object, field: str) -> None:
    response = put(alice, f"/api/v1/executions/{execution}/{path}", body)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]


def test_malformed_json_and_bad_ids_are_400(alice: Caller) -> None:
    response = alice.client.put(
        "/api/v1/executions/e1/blackboard/plan", data=b'{"value": ', content_type="application/json"
    )
    assert response.status_code == 400 and "body" in response.json()["errors"]
    too_long = "e" * 201
    assert put(alice, f"/api/v1/executions/{too_long}/blackboard/plan", {"value": 1}).status_code == 400
    assert alice.get("/api/v1/sessions/s1/window", {"last": 0}).status_code == 400


def test_redis_down_is_503_with_a_clear_message(alice: Caller, settings) -> None:  # type: ignore[no-untyped-def]
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    response = put(alice, "/api/v1/executions/e1/blackboard/plan", {"value": 1})
    assert response.status_code == 503
    assert "Redis" in response.json()["detail"]
    assert alice.get("/api/v1/sessions/s1/window").status_code == 503


@pytest.fixture
def sse_server(scratch_tenant) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The base URL of a real uvicorn process on the test database."""
    with asgi_server() as port:
        yield f"http://127.0.0.1:{port}"


def test_sse_client_receives_a_write_made_by_another_agent(scratch_tenant, sse_server: str) -> None:  # type: ignore[no-untyped-def]
    watcher, writer = make_caller(scratch_tenant, "watcher"), make_caller(scratch_tenant, "writer")
    execution = f"exec-{uuid.uuid4().hex[:8]}"
    received: queue.Queue[dict] = queue.Queue()
    connected = threading.Event()

    def follow() -> None:
        headers = {"Authorization": f"Bearer {watcher.key}"}
        with httpx.stream(
            "GET",
            f"{sse_server}/api/v1/executions/{execution}/stream",
            headers=headers,
            timeout=httpx.Timeout(20, read=20),
        ) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            event: dict[str, str] = {}
            for line in response.iter_lines():
                if line.startswith(": following"):
                    connected.set()
                elif line.startswith(("event:", "id:", "data:")):
                    name, _, value = line.partition(":")
                    event[name] = value.strip()
                elif line == "" and "data" in event:
                    received.put(event)
                    return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    assert connected.wait(15), "the stream did not open"
    response = httpx.put(
        f"{sse_server}/api/v1/executions/{execution}/blackboard/verdict",
        json={"value": {"guilty": False}},
        headers={"Authorization": f"Bearer {writer.key}"},
    )
    assert response.status_code == 201, response.text  # the field is created
    event = received.get(timeout=15)
    assert event["event"] == "blackboard" and event["id"] == "writer:verdict@1"
    assert json.loads(event["data"])["value"] == {"guilty": False}
    assert json.loads(event["data"])["agent"] == "writer"

    # a key of another tenant cannot follow this tenant's execution
    stranger = httpx.get(f"{sse_server}/api/v1/executions/{execution}/stream", timeout=5)
    assert stranger.status_code == 401


def test_one_scratchpad_key_can_be_read_and_the_whole_pad_cleared(alice: Caller, bob: Caller) -> None:
    execution = f"pad-{uuid.uuid4().hex[:8]}"
    pad = f"/api/v1/executions/{execution}/scratchpad"
    assert put(alice, f"{pad}/hypothesis", {"value": {"h": "the butler"}}).status_code == 201
    assert put(alice, f"{pad}/count", {"value": 3}).status_code == 201
    one = alice.get(f"{pad}/hypothesis")
    assert one.status_code == 200 and one.json() == {
        "execution_id": execution,
        "key": "hypothesis",
        "value": {"h": "the butler"},
    }
    assert bob.get(f"{pad}/hypothesis").status_code == 404  # private: bob's pad has no such key
    assert alice.get(f"{pad}/missing").status_code == 404
    assert bob.client.delete(pad).json() == {"execution_id": execution, "deleted": 0}  # bob's own, empty
    assert alice.get(pad).json()["values"] == {"hypothesis": {"h": "the butler"}, "count": 3}
    cleared = alice.client.delete(pad)
    assert cleared.status_code == 200 and cleared.json() == {"execution_id": execution, "deleted": 2}
    assert alice.get(pad).json()["values"] == {}
    assert alice.get(f"{pad}/count").status_code == 404
