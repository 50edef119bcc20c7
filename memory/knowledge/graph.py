"""Graph queries over entity-to-entity facts, in Neo4j or, without ``NEO4J_URI``, in PostgreSQL.

The graph is the set of *projected* facts: live (``active`` or ``disputed``) facts whose object is an
entity, taken as undirected edges. Both backends answer the same questions with the same rules, so
their answers agree (tests run the same cases against both):

- ``neighbourhood(root, depth)``: every entity within ``depth`` hops with its hop distance, and the
  facts between two of those entities of which at least one end is closer than ``depth``.
- ``shortest_path(a, b, max_depth)``: one path with the fewest hops (ties broken arbitrarily), or None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import neo4j
from django.db import connection

from core.tenancy import current_schema

MAX_DEPTH = 3
MAX_PATH_DEPTH = 6
_LIVE = "('active', 'disputed')"
T = TypeVar("T")


@dataclass(frozen=True)
class Neighbourhood:
    """``distances``: entity id → hops from ``root`` (root: 0); ``facts``: fact ids of the edges."""

    root: int
    depth: int
    distances: dict[int, int]
    facts: frozenset[int]


@dataclass(frozen=True)
class GraphPath:
    """``entities``: ids from source to target; ``facts``: the fact id of each hop (one fewer)."""

    entities: list[int]
    facts: list[int]

    @property
    def hops(self) -> int:
        return len(self.facts)


class GraphBackend(Protocol):
    name: str

    def neighbourhood(self, root: int, depth: int) -> Neighbourhood: ...

    def shortest_path(
        self, source: int, target: int, max_depth: int = MAX_PATH_DEPTH
    ) -> GraphPath | None: ...


def _edges_within(distances: dict[int, int], depth: int, edges: list[tuple[int, int, int]]) -> frozenset[int]:
    """The neighbourhood's edge rule, shared by both backends."""
    return frozenset(
        fact
        for fact, a, b in edges
        if a in distances and b in distances and min(distances[a], distances[b]) < depth
    )


def _check_depth(depth: int, limit: int) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= limit:
        raise ValueError(f"depth must be an integer from 1 to {limit}")
    return depth


class PostgresGraph:
    """Over ``memory_fact`` in the current tenant's schema: a recursive CTE for the neighbourhood,
    a bidirectional breadth-first search (one query per level) for the shortest path."""

    name = "postgresql"

    def neighbourhood(self, root: int, depth: int) -> Neighbourhood:
        depth = _check_depth(depth, MAX_DEPTH)
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                WITH RECURSIVE walk(node, depth) AS (
                    SELECT %s::bigint, 0
                    UNION
                    SELECT nb.node, w.depth + 1
                    FROM walk w CROSS JOIN LATERAL (
                        SELECT f.object_entity_id AS node FROM memory_fact f
                        WHERE f.subject_id = w.node AND f.object_entity_id IS NOT NULL AND f.status IN {_LIVE}
                        UNION ALL
                        SELECT f.subject_id FROM memory_fact f
                        WHERE f.object_entity_id = w.node AND f.status IN {_LIVE}
                    ) nb
                    WHERE w.depth < %s
                )
                SELECT node, min(depth) FROM walk GROUP BY node
                """,
                [root, depth],
            )
            distances = {int(node): int(d) for node, d in cursor.fetchall()}
            # The edges that count (``_edges_within``) have an end closer than ``depth``, whose
            # neighbours are all within ``depth``: fetch the edges of those ends. (Both ends among
            # all the entities reached walked the index once per entity: 1.6 s instead of 40 ms at
            # depth 3, 14k entities; benchmarks/knowledge_graph.py.)
            inner = [node for node, d in distances.items() if d < depth]
            cursor.execute(
                f"SELECT id, subject_id, object_entity_id FROM memory_fact WHERE status IN {_LIVE} "
                "AND object_entity_id IS NOT NULL AND (subject_id = ANY(%s) OR object_entity_id = ANY(%s))",
                [inner, inner],
            )
            edges = [(int(f), int(a), int(b)) for f, a, b in cursor.fetchall()]
        return Neighbourhood(root, depth, distances, _edges_within(distances, depth, edges))

    def shortest_path(self, source: int, target: int, max_depth: int = MAX_PATH_DEPTH) -> GraphPath | None:
        max_depth = _check_depth(max_depth, MAX_PATH_DEPTH)
        if source == target:
            return GraphPath([source], [])
        # Bidirectional breadth-first search, one query per level, expanding the smaller frontier:
        # the work grows with the entities reached, not with the paths. (A recursive CTE carrying
        # each path enumerated every simple path shorter than the answer: seconds through hubs at
        # 100k facts, and no end within 6 hops when there is no path; benchmarks/knowledge_graph.py.)
        # ``reached[side][node]`` is (previous node, fact) towards that side's end, None at the end.
        reached: tuple[dict[int, tuple[int, int] | None], ...] = ({source: None}, {target: None})
        frontiers = [[source], [target]]
        hops = 0
        with connection.cursor() as cursor:
            while hops < max_depth and frontiers[0] and frontiers[1]:
                side = 0 if len(frontiers[0]) <= len(frontiers[1]) else 1
                here, there = reached[side], reached[1 - side]
                cursor.execute(
                    f"SELECT id, subject_id, object_entity_id FROM memory_fact WHERE status IN {_LIVE} "
                    "AND object_entity_id IS NOT NULL AND (subject_id = ANY(%s) OR object_entity_id = ANY(%s)) "
                    "ORDER BY id",
                    [frontiers[side], frontiers[side]],
                )
                level = set(frontiers[side])
                found: list[int] = []
                meet = None
                for fact, a, b in cursor.fetchall():
                    for node, neighbour in ((a, b), (b, a)):
                        if node in level and neighbour not in here:
                            here[neighbour] = (node, fact)
                            found.append(neighbour)
                            if meet is None and neighbour in there:
                                meet = neighbour
                hops += 1
                frontiers[side] = found
                if meet is not None:
                    # the first level that meets the other side: every meeting is at the same total
                    # distance, the shortest one
                    return _join(reached[0], reached[1], meet)
        return None


def _join(
    from_source: dict[int, tuple[int, int] | None], from_target: dict[int, tuple[int, int] | None], meet: int
) -> GraphPath:
    """The path source → ``meet`` → target from the two searches' back-pointers."""

    def walk(back: dict[int, tuple[int, int] | None]) -> tuple[list[int], list[int]]:
        node, nodes, facts = meet, [meet], []
        while (step := back[node]) is not None:
            node, fact = step
            nodes.append(node)
            facts.append(fact)
        return nodes, facts

    left_nodes, left_facts = walk(from_source)
    right_nodes, right_facts = walk(from_target)
    return GraphPath(left_nodes[::-1] + right_nodes[1:], left_facts[::-1] + right_facts)


class Neo4jGraph:
    """Cypher over the projection; every match is filtered on the tenant, values are parameters."""

    name = "neo4j"

    def __init__(self, driver: neo4j.Driver, tenant: str) -> None:
        self.driver = driver
        self.tenant = tenant

    def _run(self, query: str, **params: Any) -> list[dict[str, Any]]:
        from core.neo4j import read_timeout

        records, _, _ = self.driver.execute_query(
            neo4j.Query(query, timeout=read_timeout()),
            routing_=neo4j.RoutingControl.READ,
            tenant=self.tenant,
            **params,
        )
        return [record.data() for record in records]

    def neighbourhood(self, root: int, depth: int) -> Neighbourhood:
        depth = _check_depth(depth, MAX_DEPTH)  # an int from 1 to 3: safe to place in the pattern
        # Results come back as one list, not a record per entity or edge: the driver's per-record
        # decoding cost several times the query itself for the thousands of entities and edges
        # around a hub at depth 2 (benchmarks/knowledge_graph.py).
        rows = self._run(
            f"""
            MATCH (root:Entity {{tenant: $tenant, id: $root}})
            MATCH p = (root)-[:FACT*0..{depth}]-(n:Entity)
            WHERE n.tenant = $tenant AND all(r IN relationships(p) WHERE r.tenant = $tenant)
            WITH n.id AS id, min(length(p)) AS hops
            RETURN collect([id, hops]) AS found
            """,
            root=root,
        )
        distances = {int(node): int(hops) for node, hops in rows[0]["found"]}
        if not distances:
            distances = {root: 0}
        # The edges that count (``_edges_within``) have an end closer than ``depth``, whose
        # neighbours are all within ``depth``: expand from those ends only (an edge between two of
        # them comes back twice). Matching every edge among all the entities reached, most of them
        # at ``depth``, read and sent several times more relationships (benchmarks/knowledge_graph.py).
        edges = self._run(
            """
            MATCH (a:Entity {tenant: $tenant})-[r:FACT {tenant: $tenant}]-(b:Entity {tenant: $tenant})
            WHERE a.id IN $inner
            RETURN collect([r.fact_id, a.id, b.id]) AS edges
            """,
            inner=[node for node, hops in distances.items() if hops < depth],
        )
        triples = [(int(f), int(a), int(b)) for f, a, b in edges[0]["edges"]]
        return Neighbourhood(root, depth, distances, _edges_within(distances, depth, triples))

    def shortest_path(self, source: int, target: int, max_depth: int = MAX_PATH_DEPTH) -> GraphPath | None:
        max_depth = _check_depth(max_depth, MAX_PATH_DEPTH)
        if source == target:
            return GraphPath([source], [])
        rows = self._run(
            f"""
            MATCH (a:Entity {{tenant: $tenant, id: $source}}), (b:Entity {{tenant: $tenant, id: $target}})
            MATCH p = shortestPath((a)-[:FACT*..{max_depth}]-(b))
            WHERE all(r IN relationships(p) WHERE r.tenant = $tenant)
            RETURN [n IN nodes(p) | n.id] AS nodes, [r IN relationships(p) | r.fact_id] AS facts
            """,
            source=source,
            target=target,
        )
        if not rows:
            return None
        return GraphPath([int(n) for n in rows[0]["nodes"]], [int(f) for f in rows[0]["facts"]])


STALE = "graph-projection-stale"
UNAVAILABLE = "neo4j-unavailable"


class GraphReader:
    """Answers graph queries from the backend that can answer correctly right now; the one place
    that decides it (``get_graph()`` returns one per request).

    - No ``NEO4J_URI``: PostgreSQL (the configured mode, not degraded).
    - Neo4j configured but failed within ``NEO4J_UNAVAILABLE_FOR`` seconds, or failing to answer
      now (within the driver's timeouts, see ``core.neo4j``): PostgreSQL, ``degraded`` =
      ``"neo4j-unavailable"``.
    - The tenant's outbox has pending rows, so the projection lags behind PostgreSQL and could answer
      "no path" for a path that exists: PostgreSQL, ``degraded`` = ``"graph-projection-stale"``.
    - Otherwise Neo4j.

    ``name`` is the backend that answered the last query (before any: the one that will be asked);
    ``degraded`` says why PostgreSQL answered although Neo4j is configured, else None.
    """

    def __init__(self) -> None:
        from core.neo4j import get_driver, neo4j_available

        from .selectors import outbox_pending

        driver = get_driver()
        self.degraded: str | None = None
        self._backend: GraphBackend
        if driver is None:
            self._backend = PostgresGraph()
        elif not neo4j_available():
            self._backend, self.degraded = PostgresGraph(), UNAVAILABLE
        elif outbox_pending():
            self._backend, self.degraded = PostgresGraph(), STALE
        else:
            self._backend = Neo4jGraph(driver, current_schema())

    @property
    def name(self) -> str:
        return self._backend.name

    def _ask(self, question: Callable[[GraphBackend], T]) -> T:
        from core.neo4j import Neo4jUnavailable, neo4j_guard

        if isinstance(self._backend, Neo4jGraph):
            try:
                with neo4j_guard():
                    return question(self._backend)
            except Neo4jUnavailable:
                self._backend, self.degraded = PostgresGraph(), UNAVAILABLE
        return question(self._backend)

    def neighbourhood(self, root: int, depth: int) -> Neighbourhood:
        """See :meth:`PostgresGraph.neighbourhood`; raises ``ValueError`` for a bad ``depth``."""
        return self._ask(lambda backend: backend.neighbourhood(root, depth))

    def shortest_path(self, source: int, target: int, max_depth: int = MAX_PATH_DEPTH) -> GraphPath | None:
        """See :meth:`PostgresGraph.shortest_path`; raises ``ValueError`` for a bad ``max_depth``."""
        return self._ask(lambda backend: backend.shortest_path(source, target, max_depth))


def get_graph() -> GraphReader:
    """The graph of the current tenant, answered by the backend that can answer correctly now
    (see :class:`GraphReader`)."""
    return GraphReader()
