"""The checkpoint API's LangGraph operations over REST, against the real PostgreSQL and Redis:
namespaces, parents, metadata, opaque serialized payloads, pending writes (LangGraph's idx rule),
the tuples listing with its filters, deleting a thread (recorded), bad input and isolation."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from django_tenants.utils import tenant_context

from agents.models import Scope
from core.redis import get_redis
from memory.checkpoints import services
from memory.checkpoints.models import Checkpoint, CheckpointWrite
from memory.episodic.models import Event
from tenants.models import Tenant
from tests.factories import Caller, make_caller


@pytest.fixture
def trio_tenants(committed_tenants: tuple[Tenant, Tenant]) -> tuple[Tenant, Tenant]:
    """The trio in committed tenants: a save's after-commit Redis write really runs."""
    return committed_tenants


@pytest.fixture
def critic(trio_tenants: tuple[Tenant, Tenant]) -> Caller:
    return make_caller(trio_tenants[0], "critic", scopes=(Scope.READ, Scope.WRITE, Scope.CURATE))


@pytest.fixture
def thread() -> str:
    return f"thread-{uuid.uuid4().hex[:12]}"


def url(session_id: str, suffix: str = "") -> str:
    return f"/api/v1/sessions/{session_id}/checkpoints{suffix}"


def blob(data: bytes, kind: str = "msgpack") -> dict[str, str]:
    return {"type": kind, "data": base64.b64encode(data).decode()}


def put(caller: Caller, thread: str, key: str, *, ns: str = "", parent: str = "", **metadata: object):  # type: ignore[no-untyped-def]
    return caller.post(
        url(thread),
        {
            "idempotency_key": key,
            "checkpoint_ns": ns,
            "parent_key": parent,
            "metadata": metadata,
            "serialized": blob(f"checkpoint {key}".encode() + b"\x00\xff"),
        },
    )


def tuples(caller: Caller, thread: str, **params: str):  # type: ignore[no-untyped-def]
    return caller.get(url(thread, "/tuples"), params)


def writes(caller: Caller, thread: str, key: str, task: str, items: list[tuple[str, bytes]], ns: str = ""):  # type: ignore[no-untyped-def]
    return caller.post(
        url(thread, "/writes"),
        {
            "key": key,
            "checkpoint_ns": ns,
            "task_id": task,
            "task_path": "a:b",
            "writes": [{"channel": ch, "value": blob(v)} for ch, v in items],
        },
    )


def test_a_langgraph_checkpoint_round_trips_opaque_bytes_and_gets_the_next_step(
    alice: Caller, thread: str
) -> None:
    first = put(alice, thread, "id-1", source="input", step=-1)
    assert first.status_code == 201, first.content
    doc = first.json()
    assert doc["step_index"] == 0 and doc["checkpoint_ns"] == "" and doc["parent_key"] is None
    assert doc["metadata"] == {"source": "input", "step": -1}
    assert base64.b64decode(doc["serialized"]["data"]) == b"checkpoint id-1\x00\xff"
    second = put(alice, thread, "id-2", parent="id-1", source="loop", step=0).json()
    assert second["step_index"] == 1 and second["parent_key"] == "id-1"

    # a retry is a replay; the same id with another body a 409 naming what differs
    again = put(alice, thread, "id-2", parent="id-1", source="loop", step=0)
    assert again.status_code == 200 and again.json()["replayed"] is True and again.json()["step_index"] == 1
    changed = put(alice, thread, "id-2", parent="id-1", source="loop", step=5)
    assert changed.status_code == 409 and "metadata" in changed.json()["detail"]

    # the latest of the root namespace goes through Redis like any checkpoint
    latest = alice.get(url(thread, "/latest"))
    assert latest.status_code == 200 and latest.json()["idempotency_key"] == "id-2"
    assert latest.json()["serialized"] == second["serialized"]


def test_namespaces_are_kept_apart_in_latest_tuples_and_writes(alice: Caller, thread: str) -> None:
    put(alice, thread, "root-1")
    put(alice, thread, "child-1", ns="child:abc|x")
    assert alice.get(url(thread, "/latest")).json()["idempotency_key"] == "root-1"
    child = alice.get(url(thread, "/latest"), {"checkpoint_ns": "child:abc|x"})
    assert child.status_code == 200 and child.json()["idempotency_key"] == "child-1"
    assert child.headers["Engram-Source"] == "redis"
    assert alice.get(url(thread, "/latest"), {"checkpoint_ns": "nope"}).status_code == 404

    assert [r["idempotency_key"] for r in tuples(alice, thread).json()["results"]] == ["child-1", "root-1"]
    assert [r["idempotency_key"] for r in tuples(alice, thread, checkpoint_ns="").json()["results"]] == [
        "root-1"
    ]
    # a write names its checkpoint's namespace: to the root one it is not the child's
    assert writes(alice, thread, "child-1", "t1", [("ch", b"root")], ns="").status_code == 201
    assert writes(alice, thread, "child-1", "t1", [("ch", b"child")], ns="child:abc|x").status_code == 201
    child_row = tuples(alice, thread, checkpoint_ns="child:abc|x").json()["results"][0]
    assert [base64.b64decode(w["value"]["data"]) for w in child_row["pending_writes"]] == [b"child"]


def test_pending_writes_follow_langgraphs_idx_rule(alice: Caller, thread: str) -> None:
    put(alice, thread, "cp")
    made = writes(alice, thread, "cp", "task-1", [("a", b"1"), ("b", b"2")])
    assert made.status_code == 201, made.content
    assert [(r["channel"], r["idx"], r["created"]) for r in made.json()["results"]] == [
        ("a", 0, True),
        ("b", 1, True),
    ]
    # a regular write already there is kept (a retried task writes once)
    kept = writes(alice, thread, "cp", "task-1", [("a", b"changed")])
    assert kept.status_code == 200 and kept.json()["results"][0]["created"] is False
    # special channels take their fixed idx and replace the task's earlier write
    writes(alice, thread, "cp", "task-1", [("__error__", b"boom"), ("__interrupt__", b"ask")])
    replaced = writes(alice, thread, "cp", "task-1", [("__error__", b"boom again")])
    assert replaced.status_code == 200 and replaced.json()["results"][0]["idx"] == -1

    row = tuples(alice, thread, key="cp").json()["results"][0]
    got = {(w["channel"], w["idx"]): base64.b64decode(w["value"]["data"]) for w in row["pending_writes"]}
    assert got == {
        ("a", 0): b"1",
        ("b", 1): b"2",
        ("__error__", -1): b"boom again",
        ("__interrupt__", -3): b"ask",
    }
    assert {w["task_path"] for w in row["pending_writes"]} == {"a:b"}


def test_tuples_filter_by_metadata_before_and_limit_newest_first(alice: Caller, thread: str) -> None:
    for i in range(4):
        put(alice, thread, f"id-{i}", source="input" if i % 2 == 0 else "loop", step=i)
    page = tuples(alice, thread, metadata=json.dumps({"source": "input"})).json()
    assert [r["idempotency_key"] for r in page["results"]] == ["id-2", "id-0"]
    both = tuples(alice, thread, metadata=json.dumps({"source": "loop", "step": 3})).json()
    assert [r["idempotency_key"] for r in both["results"]] == ["id-3"]
    before = tuples(alice, thread, before="id-2").json()
    assert [r["idempotency_key"] for r in before["results"]] == ["id-1", "id-0"]
    assert tuples(alice, thread, before="unknown").json()["results"] == []
    first = tuples(alice, thread, limit="1").json()
    assert [r["idempotency_key"] for r in first["results"]] == ["id-3"] and first["next"]
    assert tuples(alice, thread, key="id-1").json()["results"][0]["metadata"] == {"source": "loop", "step": 1}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"metadata": "not json"}, "metadata"),
        ({"metadata": "[1, 2]"}, "metadata"),
        ({"limit": "0"}, "limit"),
        ({"colour": "red"}, "colour"),
        ({"checkpoint_ns": "a\x00b"}, "checkpoint_ns"),
    ],
)
def test_bad_tuple_queries_are_400s_naming_the_parameter(
    alice: Caller, thread: str, params: dict[str, str], field: str
) -> None:
    answer = tuples(alice, thread, **params)
    assert answer.status_code == 400 and field in answer.json()["errors"], answer.content


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"serialized": {"type": "msgpack", "data": "%%%"}}, "serialized.data"),
        ({"serialized": {"type": "", "data": ""}}, "serialized.type"),
        ({"serialized": {"type": "msgpack"}}, "serialized.data"),
        ({"metadata": [1]}, "metadata"),
        ({"checkpoint_ns": "x" * 501}, "checkpoint_ns"),
        ({"parent_key": 7}, "parent_key"),
        ({"step_index": "3"}, "step_index"),
    ],
)
def test_bad_saves_are_400s_naming_the_field(
    alice: Caller, thread: str, data: dict[str, object], field: str
) -> None:
    answer = alice.post(url(thread), {"idempotency_key": "k", **data})
    assert answer.status_code == 400 and field in answer.json()["errors"], answer.content
    with tenant_context(alice.tenant):
        assert not Checkpoint.objects.filter(session_id=thread).exists()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"writes": []}, "writes"),
        ({"writes": [{"channel": "", "value": {"type": "m", "data": ""}}]}, "writes[0].channel"),
        ({"writes": [{"channel": "c", "value": {"type": "m", "data": "!"}}]}, "writes[0].value.data"),
        ({"task_id": ""}, "task_id"),
        ({"key": None}, "key"),
    ],
)
def test_bad_writes_are_400s_naming_the_field(
    alice: Caller, thread: str, data: dict[str, object], field: str
) -> None:
    put(alice, thread, "cp")
    body = {"key": "cp", "task_id": "t", "writes": [{"channel": "c", "value": blob(b"v")}], **data}
    answer = alice.post(url(thread, "/writes"), body)
    assert answer.status_code == 400 and field in answer.json()["errors"], answer.content


def test_another_agent_or_tenant_can_neither_read_nor_write_nor_delete_a_stream(
    alice: Caller, bob: Caller, mallory: Caller, thread: str
) -> None:
    put(alice, thread, "cp")
    writes(alice, thread, "cp", "t", [("ch", b"v")])
    for stranger in (bob, mallory):
        assert tuples(stranger, thread).json()["results"] == []
        assert tuples(stranger, thread, key="cp").json()["results"] == []
        # a stranger's writes land in its own stream, never in alice's
        assert writes(stranger, thread, "cp", "t2", [("ch", b"x")]).status_code == 201
        deleted = stranger.client.delete(url(thread))
        assert deleted.status_code == 200 and deleted.json()["checkpoints"] == 0
        assert deleted.json()["agent"] == stranger.agent.name
    # bob may not delete alice's stream by name without the curate scope; mallory's tenant has no alice
    refused = bob.client.delete(url(thread) + "?agent=alice")
    assert refused.status_code == 403 and "agent" in refused.json()["errors"]
    assert mallory.client.delete(url(thread) + "?agent=alice").status_code == 403
    row = tuples(alice, thread).json()["results"][0]
    assert row["idempotency_key"] == "cp" and len(row["pending_writes"]) == 1


def test_deleting_a_thread_removes_every_namespace_and_write_and_is_recorded(
    alice: Caller, critic: Caller, thread: str
) -> None:
    put(alice, thread, "root")
    put(alice, thread, "child", ns="child:1")
    writes(alice, thread, "root", "t", [("ch", b"v")])
    alice.get(url(thread, "/latest"))
    with tenant_context(alice.tenant):
        copies = [services.cache_key(thread, alice.agent.pk, ns) for ns in ("", "child:1")]
    assert all(get_redis().exists(key) for key in copies)

    deleted = critic.client.delete(url(thread) + "?agent=alice")
    assert deleted.status_code == 200, deleted.content
    answer = deleted.json()
    assert (answer["agent"], answer["checkpoints"], answer["writes"]) == ("alice", 2, 1)
    assert answer["namespaces"] == ["", "child:1"]
    with tenant_context(alice.tenant):
        event = Event.objects.get(pk=answer["event_id"])
        assert event.session_id == thread and event.kind == "decision" and event.agent.name == "critic"
        assert event.payload["action"] == "checkpoints_deleted" and event.payload["agent"] == "alice"
        assert not Checkpoint.objects.filter(session_id=thread).exists()
        assert not CheckpointWrite.objects.filter(session_id=thread).exists()
    assert not any(get_redis().exists(key) for key in copies)
    assert alice.get(url(thread, "/latest")).status_code == 404
    assert tuples(alice, thread).json()["results"] == []

    # a thread can start again after its delete; nothing left to delete records nothing
    assert put(alice, thread, "root").json()["step_index"] == 0
    alice.client.delete(url(thread))
    empty = alice.client.delete(url(thread)).json()
    assert empty["checkpoints"] == 0 and empty["event_id"] is None
