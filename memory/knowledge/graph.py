"""Graph queries over entity-to-entity facts, in Neo4j or, without ``NEO4J_URI``, in PostgreSQL.

The graph is the set of *projected* facts: live (``active`` or ``disputed``) facts whose object is an
entity, taken as undirected edges. Both backends answer the same questions with the same rules, so
their answers agree (tests run the same cases against both):

- ``neighbourhood(root, depth)``: every entity within ``depth`` hops with its hop distance, and the
  facts between two of those entities of which at least one end is closer than ``depth``.
- ``shortest_path(a, b, max_depth)``: one path with the fewest hops (ties broken arbitrarily), or None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from django.db import connection

MAX_DEPTH = 3
MAX_PATH_DEPTH = 6
_LIVE = "('active', 'disputed')"


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
    """Recursive CTEs over ``memory_fact`` in the current tenant's schema."""

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
            cursor.execute(
                f"SELECT id, subject_id, object_entity_id FROM memory_fact WHERE status IN {_LIVE} "
                "AND subject_id = ANY(%s) AND object_entity_id = ANY(%s)",
                [list(distances), list(distances)],
            )
            edges = [(int(f), int(a), int(b)) for f, a, b in cursor.fetchall()]
        return Neighbourhood(root, depth, distances, _edges_within(distances, depth, edges))

    def shortest_path(self, source: int, target: int, max_depth: int = MAX_PATH_DEPTH) -> GraphPath | None:
        max_depth = _check_depth(max_depth, MAX_PATH_DEPTH)
        if source == target:
            return GraphPath([source], [])
        # Breadth-first: the recursive CTE grows one hop per iteration and LIMIT 1 stops it at the
        # first path that reaches the target, which therefore has the fewest hops.
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                WITH RECURSIVE walk(node, depth, nodes, facts) AS (
                    SELECT %s::bigint, 0, ARRAY[%s::bigint], ARRAY[]::bigint[]
                    UNION ALL
                    SELECT nb.node, w.depth + 1, w.nodes || nb.node, w.facts || nb.fact
                    FROM walk w CROSS JOIN LATERAL (
                        SELECT f.object_entity_id AS node, f.id AS fact FROM memory_fact f
                        WHERE f.subject_id = w.node AND f.object_entity_id IS NOT NULL AND f.status IN {_LIVE}
                        UNION ALL
                        SELECT f.subject_id, f.id FROM memory_fact f
                        WHERE f.object_entity_id = w.node AND f.status IN {_LIVE}
                    ) nb
                    WHERE w.depth < %s AND w.node <> %s AND NOT nb.node = ANY(w.nodes)
                )
                SELECT nodes, facts FROM walk WHERE node = %s LIMIT 1
                """,
                [source, source, max_depth, target, target],
            )
            row = cursor.fetchone()
        if row is None:
            return None
        return GraphPath([int(n) for n in row[0]], [int(f) for f in row[1]])


class Neo4jGraph:
    """Cypher over the projection; every match is filtered on the tenant, values are parameters."""

    name = "neo4j"

    def __init__(self, driver: object, tenant: str) -> None:
        self.driver = driver
        self.tenant = tenant

    def _run(self, query: str, **params: object) -> list[dict[str, object]]:
        records, _, _ = self.driver.execute_query(query, tenant=self.tenant, **params)  # type: ignore[attr-defined]
        return [record.data() for record in records]

    def neighbourhood(self, root: int, depth: int) -> Neighbourhood:
        depth = _check_depth(depth, MAX_DEPTH)  # an int from 1 to 3: safe to place in the pattern
        rows = self._run(
            f"""
            MATCH (root:Entity {{tenant: $tenant, id: $root}})
            MATCH p = (root)-[:FACT*0..{depth}]-(n:Entity)
            WHERE n.tenant = $tenant AND all(r IN relationships(p) WHERE r.tenant = $tenant)
            RETURN n.id AS id, min(length(p)) AS depth
            """,
            root=root,
        )
        distances = {int(r["id"]): int(r["depth"]) for r in rows}
        if not distances:
            distances = {root: 0}
        edges = self._run(
            """
            MATCH (a:Entity {tenant: $tenant})-[r:FACT {tenant: $tenant}]->(b:Entity {tenant: $tenant})
            WHERE a.id IN $ids AND b.id IN $ids
            RETURN r.fact_id AS fact, a.id AS a, b.id AS b
            """,
            ids=list(distances),
        )
        triples = [(int(e["fact"]), int(e["a"]), int(e["b"])) for e in edges]
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


def get_graph() -> GraphBackend:
    """Neo4j when ``NEO4J_URI`` is configured, else PostgreSQL; scoped to the current tenant."""
    from config.neo4j import get_driver

    driver = get_driver()
    if driver is None:
        return PostgresGraph()
    return Neo4jGraph(driver, connection.schema_name)
