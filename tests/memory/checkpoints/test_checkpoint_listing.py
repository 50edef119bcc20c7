"""``GET /api/v1/checkpoints``: the calling agent's checkpoints in every session (LangGraph's list
without a thread), against the real PostgreSQL: newest saved first with pending writes, the
namespace / metadata / before filters, cursor pages, bad input, and the owner / teammate /
outsider trio (another agent's and another tenant's checkpoints never appear)."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import Caller, make_caller

LIST = "/api/v1/checkpoints"


def session() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def put(caller: Caller, thread: str, key: str, *, ns: str = "", **metadata: object) -> None:
    answer = caller.post(
        f"/api/v1/sessions/{thread}/checkpoints",
        {
            "idempotency_key": key,
            "checkpoint_ns": ns,
            "metadata": metadata,
            "serialized": {"type": "msgpack", "data": base64.b64encode(key.encode()).decode()},
        },
    )
    assert answer.status_code == 201, answer.content


def listing(caller: Caller, **params: Any) -> Any:
    query = {k: json.dumps(v) if isinstance(v, dict) else v for k, v in params.items()}
    return caller.get(LIST, query)


def names(page: dict[str, Any]) -> list[tuple[str, str]]:
    return [(row["session_id"], row["idempotency_key"]) for row in page["results"]]


@pytest.fixture
def saved(alice: Caller, bob: Caller, mallory: Caller) -> tuple[str, str]:
    """Alice's four checkpoints in two sessions (saved in this order), bob's and mallory's in the
    first session under the same keys."""
    first, second = session(), session()
    put(alice, first, "a0", source="input")
    put(alice, first, "a1", ns="child", source="loop")
    put(alice, second, "b0", source="input")
    put(alice, second, "b1", source="loop")
    put(bob, first, "a0", source="input")
    put(mallory, first, "a0", source="input")
    return first, second


def test_the_agents_checkpoints_in_every_session_newest_first_with_their_writes(
    alice: Caller, saved: tuple[str, str]
) -> None:
    first, second = saved
    answer = alice.post(
        f"/api/v1/sessions/{first}/checkpoints/writes",
        {
            "key": "a1",
            "checkpoint_ns": "child",
            "task_id": "t",
            "writes": [{"channel": "c", "value": {"type": "m", "data": ""}}],
        },
    )
    assert answer.status_code == 201, answer.content
    page = listing(alice).json()
    assert names(page) == [(second, "b1"), (second, "b0"), (first, "a1"), (first, "a0")]
    assert page["next"] is None and page["previous"] is None
    row = page["results"][2]
    assert (row["agent"], row["checkpoint_ns"], row["metadata"]) == ("alice", "child", {"source": "loop"})
    assert row["serialized"] == {"type": "msgpack", "data": base64.b64encode(b"a1").decode()}
    assert [(w["task_id"], w["channel"]) for w in row["pending_writes"]] == [("t", "c")]
    assert all(not r["pending_writes"] for i, r in enumerate(page["results"]) if i != 2)


def test_filters_namespace_metadata_and_before(alice: Caller, bob: Caller, saved: tuple[str, str]) -> None:
    first, second = saved
    assert names(listing(alice, checkpoint_ns="").json()) == [(second, "b1"), (second, "b0"), (first, "a0")]
    assert names(listing(alice, checkpoint_ns="child").json()) == [(first, "a1")]
    assert names(listing(alice, metadata={"source": "input"}).json()) == [(second, "b0"), (first, "a0")]
    before = {"session_id": second, "key": "b0"}
    assert names(listing(alice, before=before).json()) == [(first, "a1"), (first, "a0")]
    assert names(listing(alice, before=before, metadata={"source": "loop"}).json()) == [(first, "a1")]
    # an unknown checkpoint, and another agent's under the same session and key, name nothing
    assert listing(alice, before={"session_id": second, "key": "nope"}).json()["results"] == []
    bobs = listing(bob).json()
    assert names(bobs) == [(first, "a0")]
    assert listing(bob, before={"session_id": second, "key": "b1"}).json()["results"] == []


def test_another_agent_or_tenant_never_sees_the_callers_checkpoints(
    alice: Caller, bob: Caller, mallory: Caller, trio_tenants: Any, saved: tuple[str, str]
) -> None:
    first, _ = saved
    for stranger in (bob, mallory):
        rows = listing(stranger).json()["results"]
        assert [(r["agent"], r["session_id"], r["idempotency_key"]) for r in rows] == [
            (stranger.agent.name, first, "a0")
        ]
    # an agent of the same name in the other tenant is another agent
    namesake = make_caller(trio_tenants[1], "alice")
    assert listing(namesake).json()["results"] == []
    assert len(listing(alice).json()["results"]) == 4


def test_cursor_pages_walk_every_checkpoint_once_and_back(alice: Caller, saved: tuple[str, str]) -> None:
    whole = names(listing(alice).json())
    seen: list[tuple[str, str]] = []
    page = listing(alice, limit=1).json()
    while True:
        seen += names(page)
        if page["next"] is None:
            break
        page = alice.client.get(page["next"]).json()
    assert seen == whole and len(seen) == 4
    back = alice.client.get(page["previous"]).json()
    assert names(back) == whole[2:3]
    with_filter = listing(alice, limit=1, metadata={"source": "input"}).json()
    following = alice.client.get(with_filter["next"]).json()
    assert names(with_filter) + names(following) == [whole[1], whole[3]] and following["next"] is None
    refused = listing(alice, cursor="bm90IGEgY3Vyc29y")
    assert refused.status_code == 404 and "cursor" in refused.json()["errors"], refused.content


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"before": "not json"}, "before"),
        ({"before": '["s", "k"]'}, "before"),
        ({"before": '{"session_id": "s"}'}, "before"),
        ({"before": '{"session_id": "a b", "key": "k"}'}, "before"),
        ({"before": '{"session_id": "s\\n", "key": "k"}'}, "before"),
        ({"before": '{"session_id": "s", "key": ""}'}, "before"),
        ({"before": '{"session_id": "s", "key": "k", "more": 1}'}, "before"),
        ({"before": '{"session_id": "s", "key": "\\ud800"}'}, "before"),
        ({"metadata": "[1, 2]"}, "metadata"),
        ({"limit": "0"}, "limit"),
        ({"checkpoint_ns": "a\x00b"}, "checkpoint_ns"),
        ({"session_id": "s"}, "session_id"),
    ],
)
def test_bad_queries_are_400s_naming_the_parameter(alice: Caller, params: dict[str, str], field: str) -> None:
    answer = alice.get(LIST, params)
    assert answer.status_code == 400 and field in answer.json()["errors"], answer.content


def test_a_page_costs_the_same_queries_for_few_or_many_checkpoints(alice: Caller) -> None:
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert listing(alice).status_code == 200
        return len(captured)

    thread = session()
    put(alice, thread, "k0")
    few = queries()
    for i in range(1, 8):
        put(alice, session() if i % 2 else thread, f"k{i}")
    assert queries() == few
