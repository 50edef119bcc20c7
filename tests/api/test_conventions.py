"""The API's conventions (README, Conventions), one test per rule, and a walk over every documented
operation checking that its error responses are the ones it documents, with the one error body."""

from __future__ import annotations

import re
import uuid
from typing import Any

import jsonschema
import pytest
import yaml
from django.test import Client

from agents.models import Scope
from tests.factories import Caller, assert_fact, fact, make_caller, remember, requires_model


def ev(content: str, **extra: Any) -> dict[str, Any]:
    return {
        "session_id": "conv",
        "kind": "message",
        "content": content,
        "occurred_at": "2026-12-01T10:00:00Z",
        **extra,
    }


def test_a_batch_write_answers_count_and_results(alice: Caller) -> None:
    events = alice.post("/api/v1/events", [ev("one"), ev("two")])
    assert events.status_code == 201 and set(events.json()) == {"count", "results"}
    assert events.json()["count"] == 2 and [e["content"] for e in events.json()["results"]] == ["one", "two"]
    facts = alice.post(
        "/api/v1/facts", [fact("Ana", "knows", {"entity": "Ben"}), fact("Ana", "age", {"number": 3})]
    )
    assert set(facts.json()) == {"count", "projection", "results"} and facts.json()["count"] == 2


def test_a_list_answers_results_with_cursor_links(alice: Caller) -> None:
    alice.post("/api/v1/events", [ev(f"turn {i}") for i in range(3)])
    for path in ("/api/v1/events", "/api/v1/contradictions", "/api/v1/sessions/conv/checkpoints"):
        body = alice.get(path, {"limit": 2}).json()
        assert set(body) == {"results", "next", "previous"}, (path, body)
        assert isinstance(body["results"], list)
    first = alice.get("/api/v1/events", {"limit": 2}).json()
    assert len(first["results"]) == 2 and first["next"] and first["previous"] is None
    second = alice.client.get(first["next"]).json()
    assert [e["content"] for e in second["results"]] == ["turn 2"] and second["next"] is None


@requires_model
def test_memories_are_listed_like_every_other_list(alice: Caller) -> None:
    for i in range(3):
        remember(alice, f"memory number {i} about lists", scope="shared")
    body = alice.get("/api/v1/memories", {"limit": 2}).json()
    assert set(body) == {"results", "next", "previous"} and len(body["results"]) == 2


@requires_model
def test_201_only_when_the_request_created_something(alice: Caller) -> None:
    created = remember(alice, "Paris is the capital of France", scope="shared")
    again = remember(alice, "Paris is the capital of France", scope="shared")
    assert (created.status_code, again.status_code) == (201, 200)
    assert again.json()["deduplicated"] is True
    first = alice.post("/api/v1/facts", fact("Lyon", "in", {"entity": "France"}))
    repeat = alice.post("/api/v1/facts", fact("Lyon", "in", {"entity": "France"}))
    assert (first.status_code, repeat.status_code) == (201, 200) and repeat.json()["outcome"] == "reinforced"
    mixed = alice.post(
        "/api/v1/facts", [fact("Lyon", "in", {"entity": "France"}), fact("Nice", "in", {"entity": "France"})]
    )
    known = alice.post(
        "/api/v1/facts", [fact("Lyon", "in", {"entity": "France"}), fact("Nice", "in", {"entity": "France"})]
    )
    assert (mixed.status_code, known.status_code) == (201, 200)
    field = "/api/v1/executions/conv-1/blackboard/plan"
    assert alice.client.put(field, {"value": 1}, format="json").status_code == 201
    assert alice.client.put(field, {"value": 2}, format="json").status_code == 200
    key = "/api/v1/executions/conv-1/scratchpad/note"
    assert alice.client.put(key, {"value": "a"}, format="json").status_code == 201
    assert alice.client.put(key, {"value": "b"}, format="json").status_code == 200


def test_absent_optional_values_are_null(alice: Caller) -> None:
    written = assert_fact(alice, fact("Mia", "likes", {"entity": "Tea"}))["fact"]
    assert written["session_id"] is None and written["subject_type"] is None
    assert written["object"] == {"entity": "Tea", "type": None, "id": written["object"]["id"]}
    assert alice.get("/api/v1/me").json()["role"] is None
    event = alice.post("/api/v1/events", ev("no execution")).json()
    assert event["execution_id"] is None
    assert_fact(alice, fact("Mia", "lives_in", {"entity": "Oslo"}))
    assert_fact(bob_like(alice), fact("Mia", "lives_in", {"entity": "Rome"}))
    contradiction = alice.get("/api/v1/contradictions").json()["results"][0]
    assert (
        contradiction["note"] is None
        and contradiction["reviewer"] is None
        and contradiction["resolution"] is None
    )


def bob_like(caller: Caller) -> Caller:
    return make_caller(caller.tenant, "second-voice")


def test_a_value_comes_back_in_the_form_it_was_sent_and_can_be_sent_again(alice: Caller) -> None:
    number = assert_fact(alice, fact("Box", "weight_kg", {"number": 41}))["fact"]
    assert number["object"] == {"number": 41}
    when = assert_fact(alice, fact("Box", "shipped_on", {"date": "2026-11-30"}))["fact"]
    assert when["object"] == {"date": "2026-11-30"}
    entity = assert_fact(alice, fact("Box", "made_by", {"entity": "Acme", "type": "company"}))["fact"]
    assert entity["object"] == {"entity": "Acme", "type": "company", "id": entity["object"]["id"]}
    echoed = alice.post("/api/v1/facts", fact("Box", "made_by", entity["object"]))
    assert echoed.status_code == 200 and echoed.json()["outcome"] == "reinforced"
    wrong = alice.post(
        "/api/v1/facts", fact("Box", "made_by", {**entity["object"], "id": entity["object"]["id"] + 999})
    )
    # well-formed, but not the stored entity's id: a conflict with the stored state (409)
    assert wrong.status_code == 409 and "object.id" in wrong.json()["errors"]


def test_a_list_is_never_null(alice: Caller) -> None:
    assert_fact(alice, fact("Kai", "lives_in", {"entity": "Oslo"}))
    assert_fact(bob_like(alice), fact("Kai", "lives_in", {"entity": "Rome"}))
    contradiction = alice.get("/api/v1/contradictions").json()["results"][0]
    for side in ("existing_fact", "new_fact"):
        assert contradiction[side]["assertions"] == 1  # counted, never null
    assert alice.get("/api/v1/executions/empty-1/blackboard").json()["results"] == []
    assert alice.get("/api/v1/sessions/empty-1/window").json()["results"] == []


def test_one_path_syntax_for_nested_fields(alice: Caller) -> None:
    batch = alice.post("/api/v1/events", [ev("ok"), ev("bad", occurred_at="2026-12-01T10:00:00")])
    assert list(batch.json()["errors"]) == ["events[1].occurred_at"]
    facts = alice.post(
        "/api/v1/facts", [fact("A", "p", {"entity": "B"}), fact("A", "Bad Predicate", {"entity": "B"})]
    )
    assert list(facts.json()["errors"]) == ["facts[1].predicate"]
    nested = alice.post(
        "/api/v1/memories/search", {"query": "x", "filters": {"created_at": {"gte": "2026-01-01"}}}
    )
    assert list(nested.json()["errors"]) == ["filters.created_at.gte"]
    listed = alice.post("/api/v1/memories/search", {"query": "x", "filters": {"tags_any": ["ok", 7]}})
    assert list(listed.json()["errors"]) == ["filters.tags_any[1]"]
    query = alice.get("/api/v1/events", {"kind": "dream"})
    assert list(query.json()["errors"]) == ["kind"]  # a query parameter is named as it is sent


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/v1/memories/not-a-uuid"),
        ("get", f"/api/v1/memories/{uuid.uuid4()}"),
        ("delete", "/api/v1/memories/not-a-uuid"),
        ("post", "/api/v1/facts/abc/retract"),
        ("post", "/api/v1/facts/999999/retract"),
        ("get", "/api/v1/entities/Nobody/facts"),
        ("get", "/api/v1/sessions/conv/checkpoints/latest"),
        ("get", "/api/v1/sessions/conv/checkpoints/x1"),
        ("get", "/api/v1/executions/e1/scratchpad/none"),
        ("get", "/api/v1/no/such/endpoint"),
    ],
)
def test_every_404_has_the_one_error_body(alice: Caller, method: str, path: str) -> None:
    response = (
        getattr(alice.client, method)(path, {}, format="json")
        if method == "post"
        else getattr(alice.client, method)(path)
    )
    assert response.status_code == 404, (path, response.content)
    body = response.json()
    assert set(body) == {"detail", "code", "errors"} and body["code"] == "not_found"
    assert len(body["errors"]) == 1 and all(isinstance(m, list) for m in body["errors"].values())


# --- every documented operation -------------------------------------------------------------------


def documented(client: Client) -> tuple[dict[str, Any], list[tuple[str, str, dict[str, Any]]]]:
    doc = yaml.safe_load(client.get("/api/v1/schema").content)
    ops = [(path, method, op) for path, item in doc["paths"].items() for method, op in item.items()]
    return doc, ops


def concrete(path: str) -> str:
    """A documented path with its parameters filled in with plausible values."""
    values = {"memory_id": str(uuid.uuid4()), "fact_id": "1", "step_index": "1", "name": "Nobody"}
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "x1"), path)


def error_schema(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc["components"]["schemas"]["Error"], "components": doc["components"]}


def test_every_operation_documents_its_errors_with_the_error_body(alice: Caller) -> None:
    _doc, ops = documented(alice.client)
    assert len(ops) >= 29
    for path, method, op in ops:
        for status, response in op["responses"].items():
            if int(status) >= 400:
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/Error"}, (method, path, status)
        if op.get("security") != []:
            assert {"400", "401", "403"} <= set(op["responses"]), (method, path)
        if "{" in path:
            assert "404" in op["responses"], (method, path)


def test_every_operation_answers_the_errors_it_documents(alice: Caller) -> None:
    """Without a key every operation is a 401; with an unknown query parameter a 400; both in the
    one error body, and both documented for the operation."""
    doc, ops = documented(alice.client)
    anonymous = Client()
    for path, method, op in ops:
        if op["operationId"] == "execution_stream":
            continue  # an async view on its own connection: tested live (tests/memory/working)
        url = concrete(path)
        body = {} if method in ("post", "put") else None
        kwargs: dict[str, Any] = (
            {"content_type": "application/json", "data": "{}"} if body is not None else {}
        )
        no_key = getattr(anonymous, method)(url, **kwargs)
        assert no_key.status_code == 401, (method, path, no_key.status_code)
        jsonschema.validate(no_key.json(), error_schema(doc))
        assert "401" in op["responses"]
        unknown = getattr(alice.client, method)(f"{url}?no_such_parameter=1", **kwargs)
        assert unknown.status_code == 400, (method, path, unknown.status_code, unknown.content)
        jsonschema.validate(unknown.json(), error_schema(doc))
        assert "no_such_parameter" in unknown.json()["errors"], (method, path)


def test_a_key_without_the_scope_gets_the_documented_403(tenant_a) -> None:  # type: ignore[no-untyped-def]
    reader = make_caller(tenant_a, "read-only", scopes=(Scope.READ,))
    doc, ops = documented(reader.client)
    for path, method, op in ops:
        if method not in ("post", "put", "delete") or path.endswith(("/search", "/context")):
            continue  # reads with a body: they need the read scope only
        response = getattr(reader.client, method)(concrete(path), {}, format="json")
        assert response.status_code == 403, (method, path, response.status_code)
        jsonschema.validate(response.json(), error_schema(doc))
        assert "403" in op["responses"]


def test_a_null_value_is_valid_where_any_json_value_is_documented(alice: Caller) -> None:
    """A ``oneOf`` with an "any value" branch rejects ``null`` (it matches both branches): the
    document must say ``{}`` for values that may be anything, ``null`` included."""
    doc, _ops = documented(alice.client)
    written = alice.client.put("/api/v1/executions/run-1/blackboard/plan", {"value": None}, format="json")
    assert written.status_code == 201, written.content
    entry = {**doc["components"]["schemas"]["BlackboardEntry"], "components": doc["components"]}
    jsonschema.validate(written.json(), entry)
    assert "[{}, {'type': 'null'}]" not in str(doc)
