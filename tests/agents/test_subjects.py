"""End users (data subjects) and keys bound to one (issue 31, item 3; docs/decisions/0078).

One agent serves two customers, Ana and Ben, through three keys: unbound, bound to ``ana`` and bound
to ``ben``. For every read path (recall, list, one memory, context, store, events, facts,
checkpoints) the key bound to Ana gets nothing of Ben's, asking for Ben is a 403 naming
``data_subject``, and the unbound key can filter by subject; data naming no subject (the agent's
general knowledge) stays visible to a bound key. Writes through a bound key carry its subject."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from django_tenants.utils import tenant_context

from memory.checkpoints.models import Checkpoint
from memory.episodic.models import Event
from memory.knowledge.models import Contradiction, Fact
from memory.semantic.models import SemanticMemory
from memory.store.models import StoreItem
from tests.api.mcp.test_mcp_rest_schemas import document
from tests.api.test_subject_writes import _body_members
from tests.factories import Caller, assert_fact, fact, make_caller, remember, requires_model

pytestmark = requires_model
__all__ = ["document"]  # the fixture, used by name

ANA_FLIGHT = "Ana's return flight departs Lisbon at 09:05 on Sunday"
BEN_FLIGHT = "Ben's return flight departs Porto at 11:30 on Monday"
POLICY = "Flight changes are free of charge up to 24 hours before departure"
ITEMS = "/api/v1/store/items"
# POST operations that read: their bodies are filters
READS_WITH_SUBJECT = {"memories_search", "store_search", "context_build"}


@dataclass
class World:
    unbound: Caller
    ana: Caller
    ben: Caller
    memories: dict[str, str]  # subject ("" for none) -> memory id
    sessions: dict[str, str]  # subject -> session id


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.content
    return response.json()


def refused(response: Any, field: str = "data_subject") -> dict[str, Any]:
    """A 403 naming ``field``: a bound key asked for another subject."""
    body: dict[str, Any] = ok(response, 403)
    assert body["code"] == "permission_denied" and field in body["errors"], body
    return body


@pytest.fixture
def world(alice: Caller) -> World:
    unbound = make_caller(alice.tenant, "support")
    ana = make_caller(alice.tenant, "support", data_subject="ana")
    ben = make_caller(alice.tenant, "support", data_subject="ben")
    tag = uuid.uuid4().hex[:8]
    sessions = {"ana": f"s-ana-{tag}", "ben": f"s-ben-{tag}"}
    memories = {
        "ana": ok(remember(unbound, ANA_FLIGHT, data_subject="ana"), 201)["id"],
        "ben": ok(remember(unbound, BEN_FLIGHT, data_subject="ben"), 201)["id"],
        "": ok(remember(unbound, POLICY), 201)["id"],
    }
    for subject, place in (("ana", "Lisbon"), ("ben", "Porto")):
        event = {
            "session_id": sessions[subject],
            "kind": "message",
            "role": "user",
            "content": f"My return flight from {place} is on the weekend",
            "occurred_at": "2026-03-01T10:00:00Z",
            "data_subject": subject,
        }
        ok(unbound.post("/api/v1/events", event), 201)
        assert_fact(unbound, fact(subject.title(), "flies_from", {"entity": place}, data_subject=subject))
        ok(
            unbound.post(
                f"/api/v1/sessions/{sessions[subject]}/checkpoints",
                {"idempotency_key": f"k-{subject}", "state": {"customer": subject}, "data_subject": subject},
            ),
            201,
        )
        ok(
            unbound.post(
                ITEMS,
                {
                    "namespace": ["customers"],
                    "key": subject,
                    "value": {"home": place},
                    "data_subject": subject,
                },
            ),
            201,
        )
    return World(unbound, ana, ben, memories, sessions)


def subjects_of(memories: list[dict[str, Any]]) -> set[str | None]:
    return {m["data_subject"] for m in memories}


def test_me_names_the_keys_subject(world: World) -> None:
    assert ok(world.ana.get("/api/v1/me"))["data_subject"] == "ana"
    assert ok(world.unbound.get("/api/v1/me"))["data_subject"] is None


def test_recall(world: World) -> None:
    query = {"query": "When does the return flight depart?", "k": 10}
    hits = ok(world.ana.post("/api/v1/memories/search", query))["results"]
    assert subjects_of([h["memory"] for h in hits]) == {"ana", None}  # hers and general knowledge
    refused(world.ana.post("/api/v1/memories/search", {**query, "filters": {"data_subject": "ben"}}))
    mine = ok(world.ana.post("/api/v1/memories/search", {**query, "filters": {"data_subject": "ana"}}))
    assert [h["memory"]["id"] for h in mine["results"]] == [world.memories["ana"]]
    filtered = ok(
        world.unbound.post("/api/v1/memories/search", {**query, "filters": {"data_subject": "ben"}})
    )
    assert [h["memory"]["id"] for h in filtered["results"]] == [world.memories["ben"]]
    everything = ok(world.unbound.post("/api/v1/memories/search", query))["results"]
    assert subjects_of([h["memory"] for h in everything]) == {"ana", "ben", None}


def test_list(world: World) -> None:
    assert subjects_of(ok(world.ana.get("/api/v1/memories"))["results"]) == {"ana", None}
    refused(world.ana.get("/api/v1/memories", {"data_subject": "ben"}))
    assert subjects_of(ok(world.ben.get("/api/v1/memories"))["results"]) == {"ben", None}
    listed = ok(world.unbound.get("/api/v1/memories", {"data_subject": "ben"}))["results"]
    assert [m["id"] for m in listed] == [world.memories["ben"]]


def test_one_memory_of_another_subject_is_not_found(world: World) -> None:
    body = ok(world.ana.get(f"/api/v1/memories/{world.memories['ben']}"), 404)
    assert body["code"] == "not_found"
    assert ok(world.ana.get(f"/api/v1/memories/{world.memories['ana']}"))["data_subject"] == "ana"
    assert ok(world.ana.get(f"/api/v1/memories/{world.memories['']}"))["data_subject"] is None
    assert ok(world.unbound.get(f"/api/v1/memories/{world.memories['ben']}"))["data_subject"] == "ben"


def test_context(world: World) -> None:
    body = {
        "session_id": world.sessions["ben"],
        "query": "Ben Ana return flight Porto Lisbon",
        "budget": 2000,
    }
    text = ok(world.ana.post("/api/v1/context", body))["text"]
    assert "Ana's return flight" in text and "Porto" not in text and "Ben" not in text
    refused(world.ana.post("/api/v1/context", {**body, "data_subject": "ben"}))
    for_ben = ok(world.unbound.post("/api/v1/context", {**body, "data_subject": "ben"}))["text"]
    assert "Ben's return flight" in for_ben and "Porto" in for_ben and "Ana" not in for_ben
    assert POLICY in for_ben  # general knowledge


def test_store(world: World) -> None:
    assert ok(world.ana.get(ITEMS, {"namespace": "customers", "key": "ben"}), 404)["code"] == "not_found"
    assert ok(world.ana.get(ITEMS, {"namespace": "customers", "key": "ana"}))["value"] == {"home": "Lisbon"}
    found = ok(world.ana.post("/api/v1/store/search", {"namespace_prefix": ["customers"]}))["results"]
    assert [i["key"] for i in found] == ["ana"]
    ranked = {"namespace_prefix": ["customers"], "query": "Porto"}
    assert [i["key"] for i in ok(world.ana.post("/api/v1/store/search", ranked))["results"]] == ["ana"]
    refused(world.ana.post("/api/v1/store/search", {"namespace_prefix": [], "data_subject": "ben"}))
    by_ben = ok(world.unbound.post("/api/v1/store/search", {"namespace_prefix": [], "data_subject": "ben"}))
    assert [i["key"] for i in by_ben["results"]] == ["ben"]
    refused(world.ana.get("/api/v1/store/namespaces", {"data_subject": "ben"}))
    assert ok(world.unbound.get("/api/v1/store/namespaces", {"data_subject": "nobody"}))["results"] == []
    # Ben's item cannot be replaced or deleted through Ana's key
    refused(world.ana.post(ITEMS, {"namespace": ["customers"], "key": "ben", "value": {}}), field="key")
    gone = ok(world.ana.client.delete(f"{ITEMS}?namespace=customers&key=ben"))
    assert gone == {"deleted": False, "event_id": None}
    assert ok(world.unbound.get(ITEMS, {"namespace": "customers", "key": "ben"}))["value"] == {
        "home": "Porto"
    }


def test_events(world: World) -> None:
    assert ok(world.ana.get("/api/v1/events", {"session_id": world.sessions["ben"]}))["results"] == []
    mine = ok(world.ana.get("/api/v1/events", {"session_id": world.sessions["ana"]}))["results"]
    assert [e["data_subject"] for e in mine] == ["ana"]
    assert {e["data_subject"] for e in ok(world.ana.get("/api/v1/events"))["results"]} <= {"ana", None}
    refused(world.ana.get("/api/v1/events", {"data_subject": "ben"}))
    by_ben = ok(world.unbound.get("/api/v1/events", {"data_subject": "ben"}))["results"]
    assert world.sessions["ben"] in {e["session_id"] for e in by_ben}  # and the fact's decision
    assert {e["data_subject"] for e in by_ben} == {"ben"}


def test_facts(world: World) -> None:
    assert ok(world.ana.get("/api/v1/entities/Ben/facts"))["facts"] == []
    assert [f["object"]["entity"] for f in ok(world.ana.get("/api/v1/entities/Ana/facts"))["facts"]] == [
        "Lisbon"
    ]
    refused(world.ana.get("/api/v1/entities/Ben/facts", {"data_subject": "ben"}))
    by_ben = ok(world.unbound.get("/api/v1/entities/Ben/facts", {"data_subject": "ben"}))["facts"]
    assert [f["object"]["entity"] for f in by_ben] == ["Porto"]
    assert ok(world.unbound.get("/api/v1/entities/Ben/facts", {"data_subject": "ana"}))["facts"] == []
    # graph paths and the contradictions list span every subject's facts: not for a bound key
    refused(world.ana.get("/api/v1/graph/path", {"source": "Ben", "target": "Porto"}))
    refused(world.ana.get("/api/v1/contradictions"))
    ben_fact = by_ben[0]["id"]
    ok(world.ana.post(f"/api/v1/facts/{ben_fact}/retract", {}), 404)


def test_checkpoints(world: World) -> None:
    ben_session, ana_session = world.sessions["ben"], world.sessions["ana"]
    assert ok(world.ana.get(f"/api/v1/sessions/{ben_session}/checkpoints"))["results"] == []
    ok(world.ana.get(f"/api/v1/sessions/{ben_session}/checkpoints/latest"), 404)
    ok(world.ana.get(f"/api/v1/sessions/{ben_session}/checkpoints/0"), 404)
    assert ok(world.ana.get(f"/api/v1/sessions/{ben_session}/checkpoints/tuples"))["results"] == []
    assert ok(world.ana.get(f"/api/v1/sessions/{ana_session}/checkpoints/latest"))["state"] == {
        "customer": "ana"
    }
    refused(world.ana.get(f"/api/v1/sessions/{ben_session}/checkpoints", {"data_subject": "ben"}))
    listed = ok(world.unbound.get(f"/api/v1/sessions/{ben_session}/checkpoints", {"data_subject": "ben"}))
    assert len(listed["results"]) == 1
    assert (
        ok(world.unbound.get(f"/api/v1/sessions/{ben_session}/checkpoints", {"data_subject": "ana"}))[
            "results"
        ]
        == []
    )
    refused(world.ana.client.delete(f"/api/v1/sessions/{ben_session}/checkpoints"), field="session_id")
    # the listing across sessions (LangGraph's list without a thread) keeps the same rule
    across = {c["session_id"] for c in ok(world.ana.get("/api/v1/checkpoints"))["results"]}
    assert ana_session in across and ben_session not in across, across
    unbound = {c["session_id"] for c in ok(world.unbound.get("/api/v1/checkpoints"))["results"]}
    assert {ana_session, ben_session} <= unbound, unbound


def test_a_bound_keys_writes_carry_its_subject(world: World) -> None:
    tag = uuid.uuid4().hex[:8]
    written = ok(remember(world.ana, f"Ana prefers aisle seats {tag}"), 201)
    assert written["data_subject"] == "ana"
    refused(remember(world.ana, f"Ben prefers window seats {tag}", data_subject="ben"))
    batch = [
        {"content": f"Ana likes tea {tag}"},
        {"content": f"Ben likes coffee {tag}", "data_subject": "ben"},
    ]
    refused(world.ana.post("/api/v1/memories", batch), field="memories[1].data_subject")
    same = ok(
        world.ana.post("/api/v1/memories", [{"content": f"Ana likes jazz {tag}", "data_subject": "ana"}]), 201
    )
    assert same["results"][0]["data_subject"] == "ana"
    pending = ok(remember(world.ana, f"Ana's loyalty number ends in 42 {tag}", write="async"), 202)
    assert pending["data_subject"] == "ana"
    event = {
        "session_id": f"s-{tag}",
        "kind": "message",
        "content": "hello",
        "occurred_at": "2026-03-01T10:00:00Z",
    }
    assert ok(world.ana.post("/api/v1/events", event), 201)["data_subject"] == "ana"
    refused(world.ana.post("/api/v1/events", {**event, "data_subject": "ben"}))
    refused(
        world.ana.post("/api/v1/events", [event, {**event, "data_subject": "ben"}]),
        field="events[1].data_subject",
    )
    assert_fact(world.ana, fact("Ana", "prefers", {"string": f"aisle {tag}"}))
    refused(world.ana.post("/api/v1/facts", fact("Ben", "prefers", {"string": "window"}, data_subject="ben")))
    checkpoint = {"idempotency_key": f"k-{tag}", "state": {"n": 1}}
    ok(world.ana.post(f"/api/v1/sessions/s-{tag}/checkpoints", checkpoint), 201)
    refused(
        world.ana.post(
            f"/api/v1/sessions/s-{tag}/checkpoints",
            {**checkpoint, "idempotency_key": "x", "data_subject": "ben"},
        )
    )
    assert (
        ok(world.ana.post(ITEMS, {"namespace": ["notes"], "key": tag, "value": {"a": 1}}), 201)[
            "data_subject"
        ]
        == "ana"
    )
    refused(
        world.ana.post(ITEMS, {"namespace": ["notes"], "key": f"{tag}b", "value": {}, "data_subject": "ben"})
    )
    with tenant_context(world.ana.tenant):
        assert set(
            SemanticMemory.objects.filter(content__endswith=tag).values_list("data_subject", flat=True)
        ) == {"ana"}
        assert list(Event.objects.filter(session_id=f"s-{tag}").values_list("data_subject", flat=True)) == [
            "ana"
        ]
        assert list(
            Fact.objects.filter(literal_value=f"aisle {tag}").values_list("data_subject", flat=True)
        ) == ["ana"]
        assert list(
            Checkpoint.objects.filter(session_id=f"s-{tag}").values_list("data_subject", flat=True)
        ) == ["ana"]
        assert list(StoreItem.objects.filter(key=tag).values_list("data_subject", flat=True)) == ["ana"]


def test_the_same_sentence_about_two_end_users_is_two_memories(world: World) -> None:
    """Duplicates are found among one end user's memories: Ben's write of what Ana said is Ben's
    memory, not a reinforcement of hers (which would answer with her memory through Ben's key)."""
    tag = uuid.uuid4().hex[:8]
    seat = f"Prefers a window seat on flights longer than {tag} hours"
    anas = ok(remember(world.ana, seat), 201)
    exact = ok(remember(world.ben, seat), 201)
    near = ok(remember(world.ben, f"{seat}."), 200)  # near duplicate of Ben's own
    assert (exact["deduplicated"], exact["data_subject"]) == (False, "ben")
    assert exact["id"] != anas["id"] and (near["deduplicated"], near["id"]) == (True, exact["id"])
    also_near = ok(remember(world.ana, f"{seat}."), 200)
    assert (also_near["duplicate_of"], also_near["id"]) == ("near", anas["id"])
    meal = f"Orders the vegetarian meal {tag}"
    batch = [{"content": meal, "data_subject": "ana"}, {"content": meal, "data_subject": "ben"}]
    written = ok(world.unbound.post("/api/v1/memories", batch), 201)["results"]
    assert [(m["deduplicated"], m["data_subject"]) for m in written] == [(False, "ana"), (False, "ben")]
    pending = ok(remember(world.ben, f"Orders the vegan meal {tag}", write="async"), 202)
    again = ok(remember(world.ana, f"Orders the vegan meal {tag}", write="async"), 202)
    assert pending["id"] != again["id"] and again["data_subject"] == "ana"


def test_the_same_fact_about_two_end_users_is_two_facts(world: World) -> None:
    """A fact's identity includes its end user: Ben's key asserting what Ana's fact holds creates
    Ben's fact (a reinforcement of hers would answer with her fact through Ben's key), and a fact
    of Ben's is not judged a contradiction of Ana's (docs/decisions/0098)."""
    anas = ok(world.unbound.get("/api/v1/entities/Ana/facts", {"data_subject": "ana"}))["facts"][0]
    same = fact("Ana", "flies_from", {"entity": "Lisbon"})
    bens = ok(world.ben.post("/api/v1/facts", same), 201)
    assert (bens["outcome"], bens["fact"]["data_subject"]) == ("created", "ben")
    assert bens["fact"]["id"] != anas["id"] and bens["fact"]["status"] == "active"
    assert ok(world.ben.post("/api/v1/facts", same), 200)["fact"]["id"] == bens["fact"]["id"]
    # flies_from holds one object: another one contradicts the end user's own fact, not another's
    madrid = fact("Ana", "flies_from", {"entity": "Madrid"})
    cys = ok(world.unbound.post("/api/v1/facts", {**madrid, "data_subject": "cy"}), 201)
    assert (cys["outcome"], cys["fact"]["status"], cys["contradiction_id"]) == ("created", "active", None)
    bens_other = ok(world.ben.post("/api/v1/facts", madrid), 201)
    assert (bens_other["outcome"], bens_other["fact"]["data_subject"]) == ("disputed", "ben")
    with tenant_context(world.ana.tenant):
        disputed = Contradiction.objects.get(pk=bens_other["contradiction_id"]).existing_fact_id
    assert disputed == bens["fact"]["id"]
    # the batch judges by the same rule
    batch = ok(world.unbound.post("/api/v1/facts", [{**same, "data_subject": "dee"}, same]), 201)["results"]
    assert [(r["outcome"], r["fact"]["data_subject"]) for r in batch] == [
        ("created", "dee"),
        ("created", None),
    ]
    assert anas["id"] not in {r["fact"]["id"] for r in batch}
    with tenant_context(world.ana.tenant):
        assert Fact.objects.get(pk=anas["id"]).provenance.count() == 1


def test_an_idempotency_key_replays_only_to_its_end_user(world: World) -> None:
    """The replay cache is per agent and end user: Ben's key sending the request Ana's key sent
    under the same ``Idempotency-Key`` is Ben's write, not a replay of Ana's answer (her memory)."""
    key = {"Idempotency-Key": f"k-{uuid.uuid4().hex[:8]}"}
    body = {"content": f"Needs wheelchair assistance at the gate {uuid.uuid4().hex[:8]}"}
    anas = ok(world.ana.post("/api/v1/memories", body, **key), 201)
    bens = world.ben.post("/api/v1/memories", body, **key)
    assert bens.get("Idempotent-Replayed") is None
    assert (ok(bens, 201)["data_subject"], bens.json()["id"] != anas["id"]) == ("ben", True)
    again = world.ana.post("/api/v1/memories", body, **key)
    assert (again["Idempotent-Replayed"], ok(again, 201)["id"]) == ("true", anas["id"])


def _writes(tag: str) -> list[tuple[str, str, Any]]:
    """A request of every write operation that takes ``data_subject`` (their dedup, reinforce,
    upsert and replay look up stored rows): (operation id, path, body). A body names no subject, so
    the same request through two bound keys is two end users'."""
    event = {
        "session_id": f"s-{tag}",
        "kind": "message",
        "content": "hi",
        "occurred_at": "2026-03-01T10:00:00Z",
    }
    turn = {"role": "user", "content": f"I am allergic to peanuts {tag}"}
    return [
        ("memories_create", "/api/v1/memories", {"content": f"Allergic to peanuts {tag}"}),
        ("memories_create", "/api/v1/memories", [{"content": f"Allergic to shellfish {tag}"}]),
        ("facts_assert", "/api/v1/facts", fact(f"Customer {tag}", "allergic_to", {"string": "peanuts"})),
        ("facts_assert", "/api/v1/facts", [fact(f"Customer {tag}", "allergic_to", {"string": "nuts"})]),
        ("events_append", "/api/v1/events", event),
        ("checkpoints_save", f"/api/v1/sessions/s-{tag}/checkpoints", {"idempotency_key": tag, "state": {}}),
        ("store_put", ITEMS, {"namespace": ["allergies"], "key": tag, "value": {"peanuts": True}}),
        ("window_append", f"/api/v1/sessions/w-{tag}/window", turn),
        ("messages_add", f"/api/v1/sessions/c-{tag}/messages", {"messages": [turn]}),
    ]


def test_the_write_table_holds_every_write_taking_data_subject(document: dict[str, Any]) -> None:
    """``_writes`` walks every write operation of the OpenAPI document that takes ``data_subject``
    (``tests/api/test_subject_writes.py`` holds that every write storing personal data does)."""
    takes = {
        operation["operationId"]
        for item in document["paths"].values()
        for method, operation in item.items()
        if method in ("post", "put", "patch") and "data_subject" in _body_members(document, operation)
    }
    assert takes - READS_WITH_SUBJECT == {op for op, _, _ in _writes("")}


def _ids(body: Any) -> set[Any]:
    """Every ``id`` anywhere in an answer."""
    if isinstance(body, dict):
        return {v for k, v in body.items() if k == "id"} | {i for v in body.values() for i in _ids(v)}
    if isinstance(body, list):
        return {i for v in body for i in _ids(v)}
    return set()


@pytest.mark.parametrize("index", range(len(_writes(""))))
@pytest.mark.parametrize("idempotency", [False, True])
def test_a_write_never_answers_with_another_end_users_row(
    world: World, index: int, idempotency: bool
) -> None:
    """Ana's key writes; Ben's key sends the very same request (and ``Idempotency-Key``): Ben's
    answer is his own write or a refusal, never Ana's row (no id of hers, no ``ana``)."""
    tag = uuid.uuid4().hex[:8]
    _, path, body = _writes(tag)[index]
    headers = {"Idempotency-Key": f"i-{tag}"} if idempotency else {}
    anas = world.ana.post(path, body, **headers)
    assert anas.status_code in (200, 201, 202), anas.content
    bens = world.ben.post(path, body, **headers)
    assert bens.status_code in (200, 201, 202, 403, 409), bens.content
    text = bens.content.decode()
    assert '"ana"' not in text and "'ana'" not in text, text  # nor her subject's name
    assert not (_ids(anas.json()) & _ids(bens.json())), (anas.json(), bens.json())


def test_a_checkpoint_key_another_end_user_used_is_a_conflict_naming_it(world: World) -> None:
    """Ben's save under the key Ana's save used in the session is refused for the key, not told to
    retry (it would fail again), and a key of his own saves."""
    tag = uuid.uuid4().hex[:8]
    path, body = f"/api/v1/sessions/s-{tag}/checkpoints", {"idempotency_key": tag, "state": {}}
    ok(world.ana.post(path, body), 201)
    conflict = ok(world.ben.post(path, body), 409)
    assert list(conflict["errors"]) == ["idempotency_key"], conflict
    ok(world.ben.post(path, {**body, "idempotency_key": f"{tag}-b"}), 201)


def test_the_conversation_window(world: World) -> None:
    """Window turns keep their subject (and so do the events trimmed turns become)."""
    window = f"/api/v1/sessions/w-{uuid.uuid4().hex[:8]}/window"
    ok(world.unbound.post(window, {"role": "user", "content": "Ben: seat 12A", "data_subject": "ben"}), 201)
    ok(world.ana.post(window, {"role": "user", "content": "Ana: seat 3C"}), 201)
    refused(world.ana.post(window, {"role": "user", "content": "Ben: seat 1A", "data_subject": "ben"}))
    assert [t["content"] for t in ok(world.ana.get(window))["results"]] == ["Ana: seat 3C"]
    assert [t["content"] for t in ok(world.unbound.get(window))["results"]] == [
        "Ben: seat 12A",
        "Ana: seat 3C",
    ]


@pytest.fixture
def short_window(alice: Caller) -> None:
    """The tenant's window keeps one turn (saved before any request of the test)."""
    alice.tenant.window_max_turns = 1
    alice.tenant.save()


def test_a_turn_trimmed_by_another_subjects_append_is_logged_with_its_own(
    short_window: None, world: World
) -> None:
    session = f"w-{uuid.uuid4().hex[:8]}"
    window = f"/api/v1/sessions/{session}/window"
    ok(world.unbound.post(window, {"role": "user", "content": "Ben: seat 12A", "data_subject": "ben"}), 201)
    ok(world.ana.post(window, {"role": "user", "content": "Ana: seat 3C"}), 201)  # trims Ben's turn
    with tenant_context(world.ana.tenant):
        logged = Event.objects.get(session_id=session)
    assert (logged.content, logged.data_subject) == ("Ben: seat 12A", "ben")
