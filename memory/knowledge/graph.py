"""Graph queries over entity-to-entity facts, in Neo4j or, without ``NEO4J_URI``, in PostgreSQL.

The graph is the set of *projected* facts: live (``active`` or ``disputed``) facts whose object is an
entity, taken as undirected edges. Both backends answer the same questions with the same rules, so
their answers agree (tests run the same cases against both):

- ``neighbourhood(root, depth, limit, after)``: one page of the entities within ``depth`` hops, with
  their hop distance, and the facts between two of them of which at least one end is closer than
  ``depth``. A page is bounded, so a read near a hub costs what a page costs, not what the hub's
  whole neighbourhood costs: it takes the root's direct neighbours in id order after ``after``
  (the cursor), walks from each to at most ``FANOUT`` facts (the lowest fact ids) per entity and
  hop, and stops before ``limit`` entities are exceeded (at least one direct neighbour per page).
  ``next_after`` resumes after the last direct neighbour taken; ``truncated`` says a fan-out cap or
  the page's ``limit`` left entities out that no later page returns. Distances are exact up to
  depth 2 (every direct neighbour is known on every page); at depth 3 an entity's distance is the
  hop at which this page's walk reached it.
- ``shortest_path(a, b, max_depth)``: one path with the fewest hops (ties broken arbitrarily), or None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import neo4j
from django.db import connection

from core.tenancy import current_schema

from .models import GRAPH_FANOUT

MAX_DEPTH = 3
MAX_PATH_DEPTH = 6
#: the most facts a page's walk follows from one entity per hop (the lowest fact ids)
FANOUT = GRAPH_FANOUT
#: the facts of an entity a Neo4j node's head holds: ``FANOUT`` + 1, to tell a capped entity
HEAD = GRAPH_FANOUT + 1
#: entities of a neighbourhood page besides the root: default and bound of ``limit``
DEFAULT_LIMIT = 100
MAX_LIMIT = 500
_LIVE = "('active', 'disputed')"
T = TypeVar("T")


@dataclass(frozen=True)
class Neighbourhood:
    """One page of a neighbourhood (see the module docstring). ``distances``: entity id → hops from
    ``root`` (root: 0); ``facts``: fact ids of the edges; ``limit``: the page's bound on entities
    besides the root; ``next_after``: the cursor of the next page (a direct neighbour's id), None on
    the last; ``truncated``: entities were left out by ``FANOUT`` or ``limit``; ``fanout``: ``FANOUT``."""

    root: int
    depth: int
    distances: dict[int, int]
    facts: frozenset[int]
    limit: int = DEFAULT_LIMIT
    next_after: int | None = None
    truncated: bool = False
    fanout: int = FANOUT


@dataclass(frozen=True)
class GraphPath:
    """``entities``: ids from source to target; ``facts``: the fact id of each hop (one fewer)."""

    entities: list[int]
    facts: list[int]

    @property
    def hops(self) -> int:
        return len(self.facts)


class GraphBackend(Protocol):
    @property
    def name(self) -> str: ...

    def neighbourhood(
        self, root: int, depth: int, limit: int = DEFAULT_LIMIT, after: int | None = None
    ) -> Neighbourhood: ...

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


def _page(
    root: int,
    depth: int,
    limit: int,
    after: int | None,
    adjacent: Callable[[int], list[tuple[int, int]]],
    expand: Callable[[list[int], int], dict[int, list[tuple[int, int]]]],
) -> Neighbourhood:
    """A neighbourhood page from a backend's two reads, the same rules for both backends:
    ``adjacent(root)``: every ``(fact, neighbour)`` of the root; ``expand(nodes, k)``: per node, its
    first ``k`` ``(fact, neighbour)`` by fact id."""
    depth = _check_depth(depth, MAX_DEPTH)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {MAX_LIMIT}")
    rooted = adjacent(root)
    direct = sorted({n for _, n in rooted if n != root})
    start = 0 if after is None else next((i for i, n in enumerate(direct) if n > after), len(direct))
    # the walk of a page never needs more direct neighbours than it may return entities
    chunk = direct[start : start + limit]
    known = {root, *direct}
    # per direct neighbour of the chunk: the entities first reached through it, and its edges
    owned: dict[int, list[tuple[int, int]]] = {n: [] for n in chunk}  # (entity, hop)
    edges: dict[int, list[tuple[int, int, int]]] = {n: [] for n in chunk}
    for fact, n in rooted:
        if n in owned:
            edges[n].append((fact, root, n))
    truncated = False
    frontier = [(n, n) for n in chunk]  # (entity, the direct neighbour it was reached through)
    for hop in range(2, depth + 1):
        found = expand([node for node, _ in frontier], FANOUT + 1)
        reached: list[tuple[int, int]] = []
        for node, via in frontier:
            rows = found.get(node, [])
            if len(rows) > FANOUT:
                truncated, rows = True, rows[:FANOUT]
            for fact, neighbour in rows:
                edges[via].append((fact, node, neighbour))
                if neighbour not in known:
                    known.add(neighbour)
                    owned[via].append((neighbour, hop))
                    reached.append((neighbour, via))
        # the page keeps whole direct neighbours while it holds at most ``limit`` entities, and the
        # walk lists entities in that order: beyond the first ``limit`` none could be kept
        frontier = reached[:limit]
    distances = {root: 0}
    taken: list[tuple[int, int, int]] = []
    last = None
    for n in chunk:  # whole direct neighbours only, so the next page starts where this one ends
        if last is not None and len(distances) + len(owned[n]) > limit:  # 1 for n, -1 for the root
            break
        distances[n] = 1
        distances.update(owned[n])
        taken.extend(edges[n])
        last = n
    if len(distances) - 1 > limit:  # a single direct neighbour owning more than the page holds
        keep = sorted(distances.items(), key=lambda item: (item[1], item[0]))[: limit + 1]
        distances, truncated = dict(keep), True
    more = last is not None and direct.index(last) + 1 < len(direct)
    return Neighbourhood(
        root,
        depth,
        distances,
        _edges_within(distances, depth, taken),
        limit=limit,
        next_after=last if more else None,
        truncated=truncated,
    )


def _check_depth(depth: int, limit: int) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= limit:
        raise ValueError(f"depth must be an integer from 1 to {limit}")
    return depth


class PostgresGraph:
    """Over ``memory_fact`` in the current tenant's schema: a recursive CTE for the neighbourhood,
    a bidirectional breadth-first search (one query per level) for the shortest path."""

    name = "postgresql"

    def neighbourhood(
        self, root: int, depth: int, limit: int = DEFAULT_LIMIT, after: int | None = None
    ) -> Neighbourhood:
        """One page of ``root``'s neighbourhood (the module docstring); raises ``ValueError`` for a
        bad ``depth`` or ``limit``. Two statements at depth 2, three at depth 3, each bounded by the
        page: the root's edges (one index range), then per entity of the walk its first facts by id."""
        return _page(root, depth, limit, after, self._adjacent, self._expand)

    def _adjacent(self, root: int) -> list[tuple[int, int]]:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, object_entity_id FROM memory_fact WHERE subject_id = %s "
                f"AND object_entity_id IS NOT NULL AND status IN {_LIVE} "
                f"UNION ALL SELECT id, subject_id FROM memory_fact WHERE object_entity_id = %s AND status IN {_LIVE}",
                [root, root],
            )
            return [(int(f), int(n)) for f, n in cursor.fetchall()]

    def _expand(self, nodes: list[int], k: int) -> dict[int, list[tuple[int, int]]]:
        if not nodes:
            return {}
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                SELECT p.node, e.id, e.other FROM unnest(%s::bigint[]) AS p(node) CROSS JOIN LATERAL (
                    SELECT * FROM (
                        SELECT f.id, f.object_entity_id AS other FROM memory_fact f
                        WHERE f.subject_id = p.node AND f.object_entity_id IS NOT NULL AND f.status IN {_LIVE}
                        UNION ALL
                        SELECT f.id, f.subject_id FROM memory_fact f
                        WHERE f.object_entity_id = p.node AND f.status IN {_LIVE}
                    ) both_ways ORDER BY id LIMIT %s
                ) e
                ORDER BY p.node, e.id
                """,
                [nodes, k],
            )
            found: dict[int, list[tuple[int, int]]] = {}
            for node, fact, other in cursor.fetchall():
                found.setdefault(int(node), []).append((int(fact), int(other)))
        return found

    def shortest_path(self, source: int, target: int, max_depth: int = MAX_PATH_DEPTH) -> GraphPath | None:
        max_depth = _check_depth(max_depth, MAX_PATH_DEPTH)
        if source == target:
            return GraphPath([source], [])
        # Bidirectional breadth-first search, one query per level, expanding the smaller frontier:
        # the work grows with the entities reached, not with the paths
        # (docs/decisions/0017-knowledge-graph-reads-bounded-by-the-page.md).
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

    def neighbourhood(
        self, root: int, depth: int, limit: int = DEFAULT_LIMIT, after: int | None = None
    ) -> Neighbourhood:
        """One page of ``root``'s neighbourhood, by the rules of :meth:`PostgresGraph.neighbourhood`
        (the same answer); raises ``ValueError`` for a bad ``depth`` or ``limit``."""
        return _page(root, depth, limit, after, self._adjacent, self._expand)

    # Results come back as one list, not a record per entity or edge: the driver decodes each record
    # on its own, and a hub has thousands of entities and edges.
    def _adjacent(self, root: int) -> list[tuple[int, int]]:
        rows = self._run(
            """
            MATCH (a:Entity {tenant: $tenant, id: $root})-[r:FACT {tenant: $tenant}]-(b:Entity {tenant: $tenant})
            RETURN collect([r.fact_id, b.id]) AS edges
            """,
            root=root,
        )
        return [(int(f), int(n)) for f, n in rows[0]["edges"]] if rows else []

    def _expand(self, nodes: list[int], k: int) -> dict[int, list[tuple[int, int]]]:
        # Each node's first facts are its ``head`` (kept by the projection, ``projection.HEAD``
        # entries, ``HEAD``): one property read per node instead of sorting all of a hub's
        # relationships. A node without ``head_facts`` has its relationships sorted.
        if not nodes:
            return {}
        if k > HEAD:
            raise ValueError(f"a node's head holds {HEAD} facts, not {k}")
        rows = self._run(
            """
            UNWIND $nodes AS node
            MATCH (a:Entity {tenant: $tenant, id: node})
            CALL (a) {
                WITH a WHERE a.head_facts IS NULL
                MATCH (a)-[r:FACT]-(b:Entity)
                WHERE r.tenant = $tenant AND b.tenant = $tenant
                WITH r, b ORDER BY r.fact_id LIMIT $k
                RETURN collect(r.fact_id) AS facts, collect(b.id) AS others
            }
            RETURN collect([node, coalesce(a.head_facts, facts)[..$k], coalesce(a.head_others, others)[..$k]])
                AS heads
            """,
            nodes=nodes,
            k=k,
        )
        found: dict[int, list[tuple[int, int]]] = {}
        for node, facts, others in rows[0]["heads"] if rows else []:
            if facts:
                found[int(node)] = [(int(f), int(o)) for f, o in zip(facts, others, strict=True)]
        return found

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

    def neighbourhood(
        self, root: int, depth: int, limit: int = DEFAULT_LIMIT, after: int | None = None
    ) -> Neighbourhood:
        """See :meth:`PostgresGraph.neighbourhood`; raises ``ValueError`` for a bad ``depth`` or ``limit``."""
        return self._ask(lambda backend: backend.neighbourhood(root, depth, limit, after))

    def shortest_path(self, source: int, target: int, max_depth: int = MAX_PATH_DEPTH) -> GraphPath | None:
        """See :meth:`PostgresGraph.shortest_path`; raises ``ValueError`` for a bad ``max_depth``."""
        return self._ask(lambda backend: backend.shortest_path(source, target, max_depth))


def get_graph() -> GraphReader:
    """The graph of the current tenant, answered by the backend that can answer correctly now
    (see :class:`GraphReader`)."""
    return GraphReader()
