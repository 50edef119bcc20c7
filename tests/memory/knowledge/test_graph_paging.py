"""Bounded graph reads: a neighbourhood comes in pages (``limit``, a cursor), each walk follows at
most ``FANOUT`` facts per entity, the caps are stated, both backends give the same pages, and the
pages together are the whole neighbourhood (exact distances at depth 2)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django_tenants.utils import tenant_context

from agents.models import Agent
from memory.knowledge import graph, services
from memory.knowledge.graph import Neo4jGraph, PostgresGraph
from memory.knowledge.models import Entity, Fact, Predicate
from memory.knowledge.projection import outbox_drain
from tests.factories import Caller

F, E = services.FactData, services.FactObject


def star(agent: Agent) -> dict[str, int]:
    """Root R with 7 direct neighbours a0..a6, each with 3 of its own (b<i>_<j>), a0-a1 joined, and
    a1 also next to b0_0 (reached through a0 first); a hub H with FANOUT + 5 leaves next to a2."""
    facts = [F("R", "links", E(entity=f"a{i}")) for i in range(7)]
    facts += [F(f"a{i}", "links", E(entity=f"b{i}_{j}")) for i in range(7) for j in range(3)]
    facts += [F("a0", "links", E(entity="a1")), F("a1", "links", E(entity="b0_0"))]
    facts += [F("a2", "links", E(entity="H"))]
    facts += [F("H", "links", E(entity=f"h{k}")) for k in range(graph.FANOUT + 5)]
    Predicate.objects.get_or_create(name="links", defaults={"cardinality": "many"})
    services.facts_assert_batch(agent=agent, facts=facts)
    return dict(Entity.objects.values_list("name", "pk"))


def pages(backend: graph.GraphBackend, root: int, depth: int, limit: int) -> list[graph.Neighbourhood]:
    found, after = [], None
    while True:
        page = backend.neighbourhood(root, depth, limit, after)
        found.append(page)
        if page.next_after is None:
            return found
        after = page.next_after


def test_pages_together_are_the_neighbourhood_with_exact_distances(alice: Caller) -> None:
    with tenant_context(alice.tenant):
        ids = star(alice.agent)
        name = {v: k for k, v in ids.items()}
        whole = PostgresGraph().neighbourhood(ids["R"], 2, graph.MAX_LIMIT)
        assert whole.next_after is None and not whole.truncated
        assert {name[n]: d for n, d in whole.distances.items() if d == 1} == {f"a{i}": 1 for i in range(7)}
        assert sum(1 for d in whole.distances.values() if d == 2) == 21 + 1  # the b's and H
        assert whole.limit == graph.MAX_LIMIT and whole.fanout == graph.FANOUT
        # at depth 3 the walk reaches the hub, whose leaves beyond FANOUT are left out, and says so
        assert PostgresGraph().neighbourhood(ids["R"], 3, graph.MAX_LIMIT).truncated
        ends = dict(
            (f.pk, (f.subject_id, f.object_entity_id)) for f in Fact.objects.filter(pk__in=whole.facts)
        )
        for limit in (5, 9):  # a direct neighbour owns at most 4 entities here: no page is cut
            got = pages(PostgresGraph(), ids["R"], 2, limit)
            assert len(got) > 1 and all(len(p.distances) - 1 <= limit and not p.truncated for p in got)
            union: dict[int, int] = {}
            for p in got:
                for node, d in p.distances.items():
                    assert union.setdefault(node, d) == d  # a distance never changes across pages
                # a page's facts: those of the whole neighbourhood between two of its entities
                assert p.facts == {f for f, (a, b) in ends.items() if a in p.distances and b in p.distances}
            assert union == whole.distances
            # every direct neighbour is on exactly one page
            flat = [n for p in got for n, d in p.distances.items() if d == 1]
            assert sorted(flat) == sorted(set(flat)) == sorted(ids[f"a{i}"] for i in range(7))


def test_a_hub_costs_a_page_and_says_what_it_left_out(alice: Caller) -> None:
    with tenant_context(alice.tenant):
        ids = star(alice.agent)
        hub = PostgresGraph().neighbourhood(ids["H"], 2, 10)
        assert len(hub.distances) - 1 <= 10 and hub.next_after is not None
        leaves = pages(PostgresGraph(), ids["H"], 1, 10)
        assert sum(len(p.distances) - 1 for p in leaves) == graph.FANOUT + 5 + 1  # the leaves and a2
        # a direct neighbour owning more than a page holds is cut to the page, and says so
        cut = PostgresGraph().neighbourhood(ids["R"], 2, 3)
        assert len(cut.distances) - 1 == 3 and cut.truncated and cut.next_after == ids["a0"]
        deep = PostgresGraph().neighbourhood(ids["R"], 3, 20)
        assert len(deep.distances) - 1 <= 20
        with pytest.raises(ValueError):
            PostgresGraph().neighbourhood(ids["R"], 2, 0)
        with pytest.raises(ValueError):
            PostgresGraph().neighbourhood(ids["R"], 2, graph.MAX_LIMIT + 1)


@pytest.fixture
def neo4j(neo4j_driver, tenant_a) -> Iterator[object]:  # type: ignore[no-untyped-def]
    def wipe() -> None:
        neo4j_driver.execute_query("MATCH (n:Entity) WHERE n.tenant = 'alpha' DETACH DELETE n")

    wipe()
    yield neo4j_driver
    wipe()


def test_both_backends_give_the_same_pages(alice: Caller, neo4j) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(alice.tenant):
        ids = star(alice.agent)
        outbox_drain()
        nj = Neo4jGraph(neo4j, alice.tenant.schema_name)
        for root in ("R", "H", "a0"):
            for depth, limit in ((2, 1), (2, 5), (2, 100), (3, 7), (3, 500)):
                pg_pages = pages(PostgresGraph(), ids[root], depth, limit)
                nj_pages = pages(nj, ids[root], depth, limit)
                assert pg_pages == nj_pages, (root, depth, limit)


def test_the_api_pages_with_next_links_and_states_the_caps(alice: Caller, mallory: Caller) -> None:
    with tenant_context(alice.tenant):
        star(alice.agent)
    first = alice.get("/api/v1/entities/R/facts", {"depth": "2", "limit": "5"})
    assert first.status_code == 200, first.content
    page = first.json()["graph"]
    assert page["limit"] == 5 and page["fanout"] == graph.FANOUT and page["truncated"] is False
    assert len(page["entities"]) - 1 <= 5 and page["next"] is not None
    seen = {e["name"] for e in page["entities"]}
    link = page["next"]
    while link:
        nxt = alice.client.get(link)
        assert nxt.status_code == 200, nxt.content
        seen |= {e["name"] for e in nxt.json()["graph"]["entities"]}
        link = nxt.json()["graph"]["next"]
    assert {f"a{i}" for i in range(7)} | {f"b{i}_{j}" for i in range(7) for j in range(3)} | {
        "H",
        "R",
    } == seen
    assert alice.get("/api/v1/entities/R/facts", {"depth": "1"}).json()["graph"] is None
    bad = alice.get("/api/v1/entities/R/facts", {"depth": "2", "cursor": "bm90LWEtY3Vyc29y"})
    assert bad.status_code == 404 and list(bad.json()["errors"]) == ["cursor"]
    assert list(alice.get("/api/v1/entities/R/facts", {"depth": "2", "limit": "501"}).json()["errors"]) == [
        "limit"
    ]
    # another tenant sees none of it, cursor or not
    assert mallory.get("/api/v1/entities/R/facts", {"depth": "2"}).status_code == 404
    assert mallory.client.get(first.json()["graph"]["next"]).status_code == 404


def test_neo4j_heads_follow_retractions_and_erasures(alice: Caller, neo4j) -> None:  # type: ignore[no-untyped-def]
    """The projection keeps each node's first facts (its head) in step: retracting a fact in a hub's
    head lets the next fact in, erasing one does too, and both backends still give the same pages;
    a projection without heads (made before them) is walked instead, with the same pages."""
    with tenant_context(alice.tenant):
        ids = star(alice.agent)
        outbox_drain()
        nj = Neo4jGraph(neo4j, alice.tenant.schema_name)

        def same() -> None:
            for root in ("H", "a2", "R"):
                for depth, limit in ((2, 5), (2, 100), (3, 500)):
                    assert pages(PostgresGraph(), ids[root], depth, limit) == pages(
                        nj, ids[root], depth, limit
                    )

        same()
        hub_facts = sorted(Fact.objects.filter(subject_id=ids["H"]).values_list("pk", flat=True))
        records, _, _ = neo4j.execute_query(
            "MATCH (n:Entity {tenant: $t, id: $id}) RETURN n.head_facts AS h", t="alpha", id=ids["H"]
        )
        head = records[0]["h"]
        assert len(head) == graph.FANOUT + 1 and head == sorted(head)  # the hub's first facts by id
        services.fact_retract(agent=alice.agent, fact_id=str(hub_facts[0]), reason="test", may_curate=True)
        outbox_drain()
        records, _, _ = neo4j.execute_query(
            "MATCH (n:Entity {tenant: $t, id: $id}) RETURN n.head_facts AS h, n.head_lock AS lock",
            t="alpha",
            id=ids["H"],
        )
        assert hub_facts[0] not in records[0]["h"] and len(records[0]["h"]) == graph.FANOUT + 1
        assert records[0]["lock"] is None
        same()
        services.facts_erase(fact_ids=[hub_facts[1]])
        same()
        # a projection made before heads existed: walked, the same pages
        neo4j.execute_query(
            "MATCH (n:Entity {tenant: $t}) REMOVE n.head_facts, n.head_others", t=alice.tenant.schema_name
        )
        same()


def test_a_hubs_direct_facts_come_in_pages_that_state_the_cap(alice: Caller, mallory: Caller) -> None:
    with tenant_context(alice.tenant):
        star(alice.agent)
        hub_facts = Fact.objects.filter(subject__name="H").count() + 1  # its leaves and a2's fact
    whole = alice.get("/api/v1/entities/H/facts", {"facts_limit": "500"}).json()
    assert len(whole["facts"]) == hub_facts and whole["facts_limit"] == 500 and whole["facts_next"] is None
    first = alice.get("/api/v1/entities/H/facts", {"depth": "2", "facts_limit": "10"})
    assert first.status_code == 200, first.content
    body = first.json()
    assert body["facts_limit"] == 10 and len(body["facts"]) == 10 and body["facts_next"] is not None
    assert body["graph"] is not None  # the neighbourhood page is there too
    got, link = [f["id"] for f in body["facts"]], body["facts_next"]
    while link:
        nxt = alice.client.get(link)
        assert nxt.status_code == 200, nxt.content
        assert len(nxt.json()["facts"]) <= 10
        got += [f["id"] for f in nxt.json()["facts"]]
        link = nxt.json()["facts_next"]
    assert got == [f["id"] for f in whole["facts"]]  # the pages together, in order, once each
    # without facts_limit: the default cap, stated
    default = alice.get("/api/v1/entities/H/facts").json()
    assert default["facts_limit"] == 100 and default["facts_next"] is None
    bad = alice.get("/api/v1/entities/H/facts", {"facts_cursor": "bm90LWEtY3Vyc29y"})
    assert bad.status_code == 404 and list(bad.json()["errors"]) == ["facts_cursor"]
    too_many = alice.get("/api/v1/entities/H/facts", {"facts_limit": "501"})
    assert too_many.status_code == 400 and list(too_many.json()["errors"]) == ["facts_limit"]
    assert mallory.client.get(body["facts_next"]).status_code == 404
