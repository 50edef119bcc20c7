"""The Neo4j projection against a real Neo4j: agreement with PostgreSQL, resolutions, isolation."""

from __future__ import annotations

import io
import itertools
import time
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django_tenants.utils import tenant_context

from memory.knowledge import services
from memory.knowledge.graph import Neo4jGraph, PostgresGraph
from memory.knowledge.models import Entity, Fact, Predicate
from memory.knowledge.projection import outbox_drain
from tests.factories import Caller, assert_fact, fact, make_caller

GRAPH = [  # a small world: a chain, a triangle, a hub and an island
    ("Ana", "knows", "Ben"),
    ("Ben", "knows", "Cai"),
    ("Cai", "knows", "Dee"),
    ("Dee", "knows", "Eli"),
    ("Ana", "works_at", "Acme"),
    ("Ben", "works_at", "Acme"),
    ("Acme", "located_in", "Lisbon"),
    ("Lisbon", "located_in", "Portugal"),
    ("Cai", "lives_in", "Lisbon"),
    ("Fay", "knows", "Gus"),
    ("Eli", "knows", "Ana"),
    ("Hub", "links", "Ana"),
    ("Hub", "links", "Dee"),
    ("Hub", "links", "Gus"),
]


def tenant_nodes(driver, tenant: str) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    records, _, _ = driver.execute_query(
        "MATCH (n:Entity {tenant: $t}) OPTIONAL MATCH (n)-[r:FACT {tenant: $t}]->() RETURN count(DISTINCT n) AS n, "
        "count(r) AS r",
        t=tenant,
    )
    return records[0]["n"], records[0]["r"]


@pytest.fixture
def neo4j(neo4j_driver, tenant_a, tenant_b) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """The driver, with alpha's and beta's projections wiped before and after (PostgreSQL rolls back,
    Neo4j does not)."""

    def wipe() -> None:
        neo4j_driver.execute_query("MATCH (n:Entity) WHERE n.tenant IN ['alpha', 'beta'] DETACH DELETE n")

    wipe()
    yield neo4j_driver
    wipe()


def project(caller: Caller) -> None:
    with tenant_context(caller.tenant):
        outbox_drain()


def build(caller: Caller) -> dict[str, int]:
    assert_fact(caller, [fact(s, p, {"entity": o}) for s, p, o in GRAPH])
    with tenant_context(caller.tenant):
        Predicate.objects.update(cardinality="many")  # later asserts add edges, never contradictions
        return dict(Entity.objects.values_list("name", "pk"))


def test_neighbourhoods_and_shortest_paths_agree(alice: Caller, neo4j) -> None:  # type: ignore[no-untyped-def]
    ids = build(alice)
    project(alice)
    assert tenant_nodes(neo4j, "alpha") == (len(ids), len(GRAPH))
    with tenant_context(alice.tenant):
        pg, nj = PostgresGraph(), Neo4jGraph(neo4j, "alpha")
        for name, depth in itertools.product(ids, (1, 2, 3)):
            a, b = pg.neighbourhood(ids[name], depth), nj.neighbourhood(ids[name], depth)
            assert a.distances == b.distances, (name, depth)
            assert a.facts == b.facts, (name, depth)
        edges = {f.pk: {f.subject_id, f.object_entity_id} for f in Fact.objects.all()}
        for source, target in itertools.permutations(["Ana", "Eli", "Portugal", "Gus", "Fay", "Cai"], 2):
            a = pg.shortest_path(ids[source], ids[target])
            b = nj.shortest_path(ids[source], ids[target])
            assert (a is None) == (b is None), (source, target)
            if a is None:
                continue
            assert a.hops == b.hops, (source, target)
            for path in (a, b):  # each is a real chain of facts from source to target
                assert path.entities[0] == ids[source] and path.entities[-1] == ids[target]
                for hop, fact_id in enumerate(path.facts):
                    assert edges[fact_id] == {path.entities[hop], path.entities[hop + 1]}
    depth2 = alice.get("/api/v1/entities/Ana/facts", {"depth": 2}).json()["graph"]
    assert depth2["backend"] == "neo4j"
    assert {e["name"] for e in depth2["entities"] if e["distance"] == 1} == {"Ben", "Acme", "Eli", "Hub"}


def test_resolutions_and_retraction_update_the_projection(alice: Caller, neo4j) -> None:  # type: ignore[no-untyped-def]
    assert_fact(alice, fact("Zoe", "works_at", {"entity": "Acme"}))
    disputed = assert_fact(alice, fact("Zoe", "works_at", {"entity": "Globex"}))
    project(alice)
    assert tenant_nodes(neo4j, "alpha") == (3, 2)  # disputed facts are projected, flagged by status

    with tenant_context(alice.tenant):
        services.contradiction_resolve(
            contradiction_id=disputed["contradiction_id"], resolution="keep_existing", reviewer="olivia"
        )
    project(alice)
    assert tenant_nodes(neo4j, "alpha") == (2, 1)  # the Globex edge and the orphaned Globex node are gone

    newer = assert_fact(alice, fact("Zoe", "works_at", {"entity": "Initech"}))
    with tenant_context(alice.tenant):
        services.contradiction_resolve(
            contradiction_id=newer["contradiction_id"], resolution="accept_new", reviewer="olivia"
        )
    project(alice)
    records, _, _ = neo4j.execute_query(
        "MATCH (:Entity {tenant: 'alpha'})-[r:FACT {tenant: 'alpha'}]->(o:Entity) RETURN o.name AS o, r.status AS s"
    )
    assert [(r["o"], r["s"]) for r in records] == [("Initech", "active")]

    both = assert_fact(alice, fact("Zoe", "works_at", {"entity": "Hooli"}))
    with tenant_context(alice.tenant):
        services.contradiction_resolve(
            contradiction_id=both["contradiction_id"], resolution="both_valid", reviewer="olivia"
        )
    project(alice)
    assert tenant_nodes(neo4j, "alpha") == (3, 2)
    assert alice.post(f"/api/v1/facts/{both['fact']['id']}/retract", {}).status_code == 200
    project(alice)
    assert tenant_nodes(neo4j, "alpha") == (2, 1)


def test_other_tenant_never_sees_the_graph(alice: Caller, mallory: Caller, neo4j) -> None:  # type: ignore[no-untyped-def]
    ids = build(alice)
    project(alice)
    assert_fact(mallory, fact("Ana", "knows", {"entity": "Zed"}))
    project(mallory)
    beta = Neo4jGraph(neo4j, "beta")
    for entity_id in ids.values():  # alpha's ids, asked in beta's graph
        hood = beta.neighbourhood(entity_id, 3)
        assert hood.facts == frozenset() and set(hood.distances) <= {entity_id}
    assert beta.shortest_path(ids["Ana"], ids["Portugal"]) is None
    assert mallory.get("/api/v1/graph/path", {"source": "Ana", "target": "Portugal"}).status_code == 404
    hood = mallory.get("/api/v1/entities/Ana/facts", {"depth": 3}).json()["graph"]
    assert {e["name"] for e in hood["entities"]} == {"Ana", "Zed"}
    # every node and relationship carries its tenant
    records, _, _ = neo4j.execute_query(
        "MATCH (n:Entity) WHERE n.tenant IS NULL RETURN count(n) AS n UNION ALL "
        "MATCH ()-[r:FACT]->() WHERE r.tenant IS NULL RETURN count(r) AS n"
    )
    assert [r["n"] for r in records] == [0, 0]


def test_graph_rebuild_restores_a_damaged_projection(alice: Caller, neo4j) -> None:  # type: ignore[no-untyped-def]
    ids = build(alice)
    project(alice)
    neo4j.execute_query(
        "MATCH (n:Entity {tenant: 'alpha'}) WHERE n.name IN ['Ana', 'Lisbon'] DETACH DELETE n"
    )
    neo4j.execute_query("CREATE (:Entity {tenant: 'alpha', id: -1, name: 'stale'})")
    out = io.StringIO()
    call_command("graph_rebuild", tenant="alpha", stdout=out)
    assert f"projected {len(GRAPH)} facts for alpha" in out.getvalue()
    assert tenant_nodes(neo4j, "alpha") == (len(ids), len(GRAPH))


def test_a_real_worker_projects_committed_facts(celery_worker, scratch_tenant, neo4j_driver) -> None:  # type: ignore[no-untyped-def]
    caller = make_caller(scratch_tenant, "projector")
    tenant = scratch_tenant.schema_name
    try:
        assert caller.post("/api/v1/facts", fact("Ivy", "knows", {"entity": "Jon"})).status_code == 201
        deadline = time.monotonic() + 60
        while tenant_nodes(neo4j_driver, tenant) != (2, 1) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert tenant_nodes(neo4j_driver, tenant) == (2, 1)
    finally:
        neo4j_driver.execute_query("MATCH (n:Entity {tenant: $t}) DETACH DELETE n", t=tenant)
