"""The knowledge layer: asserting, contradictions and their four resolutions, recall, graph queries."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from django_tenants.utils import tenant_context

from agents.models import Scope
from memory.episodic.models import Event, EventKind
from memory.knowledge import services
from memory.knowledge.graph import PostgresGraph
from memory.knowledge.models import Cardinality, Contradiction, Entity, Fact, Predicate
from tests.factories import Caller, assert_fact, fact, make_caller


def test_same_fact_again_reinforces(alice: Caller, bob: Caller) -> None:
    first = assert_fact(alice, fact("Alice", "works_at", {"entity": "Acme"}, confidence=0.6, session_id="s1"))
    again = assert_fact(bob, fact("alice", "works_at", {"entity": "ACME"}, confidence=0.9, session_id="s2"))
    assert first["outcome"] == "created" and again["outcome"] == "reinforced"
    assert again["fact"]["id"] == first["fact"]["id"]
    assert again["fact"]["confidence"] == 0.9 and again["fact"]["assertions"] == 2
    lower = assert_fact(bob, fact("Alice", "works_at", {"entity": "Acme"}, confidence=0.1))
    assert lower["fact"]["confidence"] == 0.9
    with tenant_context(alice.tenant):
        assert Fact.objects.count() == 1


def test_conflict_on_a_one_predicate_opens_one_contradiction(alice: Caller, bob: Caller) -> None:
    old = assert_fact(alice, fact("Alice", "works_at", {"entity": "Acme"}))
    new = assert_fact(bob, fact("Alice", "works_at", {"entity": "Globex"}))
    assert new["outcome"] == "disputed" and new["fact"]["disputed"] is True
    again = assert_fact(bob, fact("Alice", "works_at", {"entity": "Globex"}))
    assert again["outcome"] == "reinforced"  # the same disputed fact: no second contradiction
    listed = bob.get("/api/v1/contradictions", {"status": "open"}).json()
    assert len(listed["results"]) == 1
    item = listed["results"][0]
    assert item["existing_fact"]["id"] == old["fact"]["id"] and item["existing_fact"]["status"] == "active"
    assert item["new_fact"]["id"] == new["fact"]["id"] and item["new_fact"]["status"] == "disputed"
    recalled = alice.get("/api/v1/entities/Alice/facts").json()["facts"]
    assert [(f["object"]["entity"], f["disputed"]) for f in recalled] == [
        ("Acme", False),
        ("Globex", True),
    ]


def test_only_same_subject_and_predicate_conflict(alice: Caller) -> None:
    assert_fact(alice, fact("Alice", "works_at", {"entity": "Acme"}))
    assert assert_fact(alice, fact("Bob", "works_at", {"entity": "Globex"}))["outcome"] == "created"
    assert assert_fact(alice, fact("Alice", "lives_in", {"entity": "Lisbon"}))["outcome"] == "created"
    assert assert_fact(alice, fact("Alice", "age", {"number": 34}))["outcome"] == "created"
    assert alice.get("/api/v1/contradictions", {"status": "open"}).json()["results"] == []


def test_no_contradiction_on_a_many_predicate(alice: Caller) -> None:
    with tenant_context(alice.tenant):
        Predicate.objects.create(name="speaks", cardinality=Cardinality.MANY)
    assert_fact(alice, fact("Alice", "speaks", {"string": "Portuguese"}))
    second = assert_fact(alice, fact("Alice", "speaks", {"string": "Japanese"}))
    assert second["outcome"] == "created" and second["fact"]["status"] == "active"
    assert alice.get("/api/v1/contradictions").json()["results"] == []


def test_new_predicates_take_the_tenant_default(alice: Caller) -> None:
    alice.tenant.default_predicate_cardinality = "many"
    alice.tenant.save()
    assert_fact(alice, fact("Alice", "likes", {"string": "tea"}))
    assert assert_fact(alice, fact("Alice", "likes", {"string": "coffee"}))["outcome"] == "created"
    with tenant_context(alice.tenant):
        assert Predicate.objects.get(name="likes").cardinality == "many"


def _open_contradiction(caller: Caller, valid_from_days_ago: int = 10) -> tuple[int, int, int]:
    old = assert_fact(
        caller,
        fact(
            "Alice",
            "works_at",
            {"entity": "Acme"},
            session_id="s-old",
            valid_from=(timezone.now() - timedelta(days=valid_from_days_ago)).isoformat(),
        ),
    )
    new = assert_fact(caller, fact("Alice", "works_at", {"entity": "Globex"}, session_id="s-new"))
    return old["fact"]["id"], new["fact"]["id"], new["contradiction_id"]


def _resolve(caller: Caller, contradiction_id: int, resolution: str) -> Contradiction:
    with tenant_context(caller.tenant):
        return services.contradiction_resolve(
            contradiction_id=contradiction_id,
            resolution=resolution,
            reviewer="olivia",
            note=f"checked: {resolution}",
        )


def _statuses(caller: Caller, *ids: int) -> list[str]:
    with tenant_context(caller.tenant):
        return [Fact.objects.get(pk=i).status for i in ids]


def _decision(caller: Caller, contradiction_id: int) -> Event:
    with tenant_context(caller.tenant):
        return Event.objects.get(kind=EventKind.DECISION, payload_index__contradiction_id=contradiction_id)


def test_accept_new_supersedes_the_existing_fact(alice: Caller) -> None:
    old, new, cid = _open_contradiction(alice)
    resolved = _resolve(alice, cid, "accept_new")
    assert resolved.status == "resolved" and resolved.reviewer == "olivia" and resolved.resolved_at
    assert _statuses(alice, old, new) == ["superseded", "active"]
    with tenant_context(alice.tenant):
        assert Fact.objects.get(pk=old).valid_to == Fact.objects.get(pk=new).valid_from
    event = _decision(alice, cid)
    assert event.payload["resolution"] == "accept_new" and event.payload["reviewer"] == "olivia"
    assert event.session_id == "s-new" and "checked: accept_new" in event.content
    assert [f["object"]["entity"] for f in alice.get("/api/v1/entities/Alice/facts").json()["facts"]] == [
        "Globex"
    ]


def test_keep_existing_retracts_the_new_fact(alice: Caller) -> None:
    old, new, cid = _open_contradiction(alice)
    _resolve(alice, cid, "keep_existing")
    assert _statuses(alice, old, new) == ["active", "retracted"]
    assert _decision(alice, cid).payload["resolution"] == "keep_existing"


def test_both_valid_makes_the_predicate_many_and_dismisses_the_rest(alice: Caller) -> None:
    old, new, cid = _open_contradiction(alice)
    third = assert_fact(alice, fact("Alice", "works_at", {"entity": "Initech"}))
    other_subject_old = assert_fact(alice, fact("Bob", "works_at", {"entity": "Acme"}))
    other_subject_new = assert_fact(alice, fact("Bob", "works_at", {"entity": "Hooli"}))
    _resolve(alice, cid, "both_valid")
    assert _statuses(alice, old, new, third["fact"]["id"]) == ["active", "active", "active"]
    assert _statuses(alice, other_subject_old["fact"]["id"], other_subject_new["fact"]["id"]) == [
        "active",
        "active",
    ]
    with tenant_context(alice.tenant):
        assert Predicate.objects.get(name="works_at").cardinality == "many"
        assert Contradiction.objects.filter(status="open").count() == 0
        assert Contradiction.objects.filter(status="dismissed").count() == 2
    assert _decision(alice, cid).payload["also_dismissed"]


def test_dismiss_keeps_both_facts_and_ends_the_dispute(alice: Caller) -> None:
    old, new, cid = _open_contradiction(alice)
    resolved = _resolve(alice, cid, "dismiss")
    assert resolved.status == "dismissed"
    # not a contradiction: the new fact stands beside the existing one, disputed by nothing
    assert _statuses(alice, old, new) == ["active", "active"]
    with pytest.raises(Exception, match="already dismissed"):
        _resolve(alice, cid, "accept_new")


def test_accept_new_moves_other_open_contradictions_onto_the_winner(alice: Caller) -> None:
    _old, new, cid = _open_contradiction(alice)
    third = assert_fact(alice, fact("Alice", "works_at", {"entity": "Initech"}))
    _resolve(alice, cid, "accept_new")
    open_now = alice.get("/api/v1/contradictions", {"status": "open"}).json()["results"]
    assert [(c["existing_fact"]["id"], c["new_fact"]["id"]) for c in open_now] == [(new, third["fact"]["id"])]


def test_retract_via_api(alice: Caller, bob: Caller) -> None:
    _old, new, _cid = _open_contradiction(alice)
    # another agent may not withdraw alice's fact; a key with the curate scope may
    refused = bob.post(f"/api/v1/facts/{new}/retract", {"reason": "typo"})
    assert refused.status_code == 403 and "id" in refused.json()["errors"]
    curator = make_caller(alice.tenant, "curator", scopes=(Scope.READ, Scope.WRITE, Scope.CURATE))
    response = curator.post(f"/api/v1/facts/{new}/retract", {"reason": "typo"})
    assert response.status_code == 200 and response.json()["status"] == "retracted"
    assert curator.post(f"/api/v1/facts/{new}/retract", {}).status_code == 409
    assert curator.post("/api/v1/facts/999999/retract", {}).status_code == 404
    assert alice.get("/api/v1/contradictions", {"status": "open"}).json()["results"] == []
    with tenant_context(alice.tenant):
        assert Event.objects.filter(kind="decision", payload_index__fact_id=new, agent=curator.agent).exists()


def test_as_of_recall(alice: Caller) -> None:
    t0 = timezone.now() - timedelta(days=30)
    assert_fact(alice, fact("Alice", "lives_in", {"entity": "Porto"}, valid_from=t0.isoformat()))
    move = assert_fact(
        alice,
        fact("Alice", "lives_in", {"entity": "Lisbon"}, valid_from=(t0 + timedelta(days=10)).isoformat()),
    )
    _resolve(alice, move["contradiction_id"], "accept_new")

    def cities(**params: object) -> list[str]:
        response = alice.get("/api/v1/entities/Alice/facts", params)
        assert response.status_code == 200, response.content
        return [f["object"]["entity"] for f in response.json()["facts"]]

    assert cities() == ["Lisbon"]
    assert cities(as_of=(t0 + timedelta(days=5)).isoformat()) == ["Porto"]
    assert cities(as_of=(t0 + timedelta(days=15)).isoformat()) == ["Lisbon"]
    assert cities(as_of=(t0 - timedelta(days=1)).isoformat()) == []


def test_recall_filters_by_agent_and_last_sessions(alice: Caller, bob: Caller) -> None:
    assert_fact(alice, fact("Acme", "located_in", {"entity": "Lisbon"}, session_id="s1"))
    assert_fact(bob, fact("Acme", "founded", {"date": "1999-05-01"}, session_id="s2"))
    assert_fact(alice, fact("Acme", "employees", {"number": 250}, session_id="s3"))

    def predicates(**params: object) -> list[str]:
        return [f["predicate"] for f in alice.get("/api/v1/entities/acme/facts", params).json()["facts"]]

    assert sorted(predicates()) == ["employees", "founded", "located_in"]
    assert predicates(agent="bob") == ["founded"]
    assert sorted(predicates(sessions=2)) == ["employees", "founded"]
    # Lisbon sees the fact from the object side
    assert [f["predicate"] for f in alice.get("/api/v1/entities/LISBON/facts").json()["facts"]] == [
        "located_in"
    ]


def test_names_normalise_and_round_trip(alice: Caller) -> None:
    assert_fact(alice, fact("Zürich Café ☕", "serves", {"entity": "東京ラーメン 🍜"}))
    # NFKC folds the full-width letters, case folding the capitals, whitespace collapses
    response = alice.get("/api/v1/entities/\uff3a\u00dcRICH   café ☕/facts")  # full-width Z
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["entity"]["name"] == "Zürich Café ☕"
    assert body["facts"][0]["object"]["entity"] == "東京ラーメン 🍜"
    with tenant_context(alice.tenant):
        assert Entity.objects.count() == 2
    right_to_left = assert_fact(alice, fact("שלום", "means", {"string": "peace — مرحبا"}))
    assert right_to_left["fact"]["subject"] == "שלום"
    assert right_to_left["fact"]["object"] == {"string": "peace — مرحبا"}  # returned in the form it was sent


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (fact("Alice", "Works-At", {"entity": "Acme"}), "predicate"),
        (fact("Alice", "works at", {"entity": "Acme"}), "predicate"),
        (fact("Alice", "age", {"number": "34"}), "object"),
        (fact("Alice", "age", {"number": True}), "object"),
        (fact("Alice", "born", {"date": "03/01/1990"}), "object"),
        (fact("Alice", "born", {"date": "1990-02-30"}), "object"),
        (fact("Alice", "vegan", {"boolean": "yes"}), "object"),
        (fact("Alice", "x", {"entity": "A", "number": 1}), "object"),
        (fact("Alice", "x", {"colour": "blue"}), "object"),
        (fact("Alice", "x", "Acme"), "object"),
        (fact("Alice", "x", {"entity": "Acme"}, valid_from="2026-01-01T00:00:00"), "valid_from"),
        (fact("Alice", "x", {"entity": "Acme"}, confidence=1.5), "confidence"),
        (fact("", "x", {"entity": "Acme"}), "subject"),
        (fact("Alice", "x", {"entity": "Acme"}, colour="blue"), "colour"),
    ],
)
def test_bad_facts_are_400_naming_the_field(alice: Caller, body: object, field: str) -> None:
    response = alice.post("/api/v1/facts", body)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]
    with tenant_context(alice.tenant):
        assert Fact.objects.count() == 0


def test_a_source_event_that_does_not_exist_is_404_naming_the_field(alice: Caller) -> None:
    response = alice.post("/api/v1/facts", fact("Alice", "x", {"entity": "Acme"}, source_event_id=999999))
    assert response.status_code == 404, response.content
    assert "source_event_id" in response.json()["errors"]
    with tenant_context(alice.tenant):
        assert Fact.objects.count() == 0


def test_batch_is_all_or_nothing(alice: Caller) -> None:
    response = alice.post(
        "/api/v1/facts", [fact("A", "knows", {"entity": "B"}), fact("B", "age", {"number": "x"})]
    )
    assert response.status_code == 400
    assert "facts[1].object" in response.json()["errors"]
    with tenant_context(alice.tenant):
        assert Fact.objects.count() == 0 and Entity.objects.count() == 0
    ok = alice.post(
        "/api/v1/facts", [fact("A", "knows", {"entity": "B"}), fact("B", "knows", {"entity": "C"})]
    )
    assert ok.status_code == 201 and ok.json()["count"] == 2


def test_bad_recall_parameters_are_400(alice: Caller) -> None:
    assert_fact(alice, fact("Alice", "knows", {"entity": "Bob"}))
    for params, field in [
        ({"as_of": "2026-01-01T00:00:00"}, "as_of"),
        ({"depth": 4}, "depth"),
        ({"colour": "x"}, "colour"),
    ]:
        response = alice.get("/api/v1/entities/Alice/facts", params)
        assert response.status_code == 400 and field in response.json()["errors"]
    assert alice.get("/api/v1/entities/Nobody/facts").status_code == 404
    assert alice.get("/api/v1/contradictions", {"status": "pending"}).status_code == 400


def test_other_tenant_sees_no_knowledge(alice: Caller, mallory: Caller) -> None:
    _open_contradiction(alice)
    assert_fact(alice, fact("Alice", "knows", {"entity": "Bob"}))
    assert mallory.get("/api/v1/entities/Alice/facts").status_code == 404
    assert mallory.get("/api/v1/contradictions").json()["results"] == []
    assert mallory.get("/api/v1/graph/path", {"source": "Alice", "target": "Bob"}).status_code == 404
    with tenant_context(alice.tenant):
        alice_fact_id = Fact.objects.first().pk
    assert mallory.post(f"/api/v1/facts/{alice_fact_id}/retract", {}).status_code == 404
    # the same names in tenant beta are new entities; no contradiction with alpha's facts
    assert assert_fact(mallory, fact("Alice", "works_at", {"entity": "Umbrella"}))["outcome"] == "created"


def test_graph_endpoints_on_postgresql(alice: Caller, settings) -> None:  # type: ignore[no-untyped-def]
    settings.NEO4J_URI = ""  # without Neo4j the graph queries run in PostgreSQL
    assert_fact(
        alice,
        [
            fact("A", "knows", {"entity": "B"}),
            fact("B", "knows", {"entity": "C"}),
            fact("C", "knows", {"entity": "D"}),
            fact("A", "age", {"number": 3}),
        ],
    )
    hood = alice.get("/api/v1/entities/A/facts", {"depth": 2}).json()["graph"]
    assert hood["backend"] == "postgresql"
    assert [(e["name"], e["distance"]) for e in hood["entities"]] == [("A", 0), ("B", 1), ("C", 2)]
    assert len(hood["facts"]) == 2
    path = alice.get("/api/v1/graph/path", {"source": "A", "target": "D"}).json()
    assert path["hops"] == 3 and [e["name"] for e in path["entities"]] == ["A", "B", "C", "D"]
    assert alice.get("/api/v1/graph/path", {"source": "A", "target": "D", "max_depth": 2}).status_code == 404


def test_concurrent_conflicting_asserts_make_one_contradiction(scratch_tenant) -> None:  # type: ignore[no-untyped-def]
    callers = [make_caller(scratch_tenant, f"agent-{i}") for i in range(4)]
    barrier = threading.Barrier(len(callers))
    outcomes: list[str] = []

    def claim(caller: Caller, company: str) -> None:
        try:
            barrier.wait()
            response = caller.post("/api/v1/facts", fact("Dana", "works_at", {"entity": company}))
            outcomes.append(response.json()["outcome"])
        finally:
            connection.close()

    threads = [
        threading.Thread(target=claim, args=(c, name))
        for c, name in zip(callers, ["Acme", "Globex", "Acme", "Globex"], strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with tenant_context(scratch_tenant):
        assert Fact.objects.count() == 2
        assert Contradiction.objects.count() == 1
        assert sorted(Fact.objects.values_list("status", flat=True)) == ["active", "disputed"]
    assert sorted(outcomes).count("reinforced") == 2


def test_postgres_graph_rules(alice: Caller) -> None:
    assert_fact(
        alice,
        [
            fact("A", "knows", {"entity": "B"}),
            fact("B", "knows", {"entity": "C"}),
            fact("C", "knows", {"entity": "A"}),
            fact("X", "knows", {"entity": "Y"}),
        ],
    )
    with tenant_context(alice.tenant):
        ids = dict(Entity.objects.values_list("name", "pk"))
        g = PostgresGraph()
        hood = g.neighbourhood(ids["A"], 1)
        assert hood.distances == {ids["A"]: 0, ids["B"]: 1, ids["C"]: 1}
        assert len(hood.facts) == 2  # B-C joins two depth-1 entities: not within depth 1 of A
        assert len(g.neighbourhood(ids["A"], 2).facts) == 3
        assert g.shortest_path(ids["A"], ids["Y"]) is None
        assert g.shortest_path(ids["A"], ids["C"]).hops == 1


def raw_post(caller: Caller, path: str, body: bytes, method: str = "post"):  # type: ignore[no-untyped-def]
    return getattr(caller.client, method)(path, data=body, content_type="application/json")


def test_fact_names_and_literals_at_the_limits(alice: Caller) -> None:
    expands = "\ufdfa" * 100  # one ligature normalises (NFKC) to 18 letters
    for body, field in [
        ({"subject": expands, "predicate": "p", "object": {"string": "x"}}, "subject"),
        ({"subject": "A", "predicate": "p", "object": {"entity": "B", "type": "t" * 65}}, "object"),
        ({"subject": "A", "predicate": "p", "object": {"entity": "\u200b\u200d"}}, "object"),
    ]:
        response = alice.post("/api/v1/facts", body)
        assert response.status_code == 400 and field in response.json()["errors"], response.content
    huge = b'{"subject":"A","predicate":"p","object":{"number":1' + b"0" * 400 + b"}}"
    response = raw_post(alice, "/api/v1/facts", huge)
    assert response.status_code == 400 and "object" in response.json()["errors"]
    assert alice.get("/api/v1/entities/a%00b/facts").status_code == 400


def test_a_string_literal_of_the_documented_length_is_stored(alice: Caller) -> None:
    # four-byte characters: the unique index (with the end user) must hold the longest literal and
    # the longest data subject in any script
    longest = "\U0001f600" * services.MAX_LITERAL_CHARS
    who = "\U0001f600" * Fact._meta.get_field("data_subject").max_length
    response = alice.post(
        "/api/v1/facts",
        {"subject": "A", "predicate": "p", "object": {"string": longest}, "data_subject": who},
    )
    assert response.status_code == 201, response.content
    with tenant_context(alice.tenant):
        assert Fact.objects.get(pk=response.json()["fact"]["id"]).literal_value == longest
    response = alice.post(
        "/api/v1/facts", {"subject": "A", "predicate": "p", "object": {"string": longest + "x"}}
    )
    assert response.status_code == 400 and "object" in response.json()["errors"], response.content
