"""Reads for the near-duplicate rule: the lookup of each vector's nearest live memories of its owner
(agent, scope and data subject: ``near_duplicates``), and the SQL it is built from (``near_sql``), which the single
write's one-statement insert (``services.writes``) also runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection

from memory.embeddings import Embedder, vector_text
from tenants.models import RetrievalPolicy

Owner = tuple[int, str, str]
"""Whose memories a write is compared with for duplicates: (agent id, scope, data subject). The
memories of one end user never reinforce, update, nor are reinforced by, another's (decision 0078)."""

# no update nor duplicate is looked for below this cosine (``updates.relation`` decides above it:
# a changed name or negation moves a sentence this far, decision 0072)
UPDATE_FLOOR = 0.60


# The near-duplicate lookup, the SQL half of the rule (it proposes, ``dedup_plan`` decides): for each
# vector ``i`` (text, parsed once each in a materialised CTE, not once per row compared), the
# ``limit`` nearest embedded live, current (not superseded) memories of its owner (agent, scope, data subject), kept when the cosine is at least
# the threshold: CTE ``near(i, id, similarity, content)``. Each lookup walks the HNSW index
# (iteratively, past rows of other agents and scopes), which the planner's estimate would pass over
# for a sort of every row of the agent by distance; the options hold for the statement only
# (``NEAR_OPTIONS``, then ``NEAR_RESET``). Options, lookup and reset travel as one multi-statement
# query (Django's psycopg cursors bind client-side), one round trip: local to the caller's
# transaction, or to the implicit one of the query outside any. Figures: decision 0041.
NEAR_OPTIONS = (
    "SELECT set_config('enable_sort', 'off', true), set_config('hnsw.iterative_scan', 'relaxed_order', true)"
)
NEAR_RESET = "SET LOCAL enable_sort TO DEFAULT; SET LOCAL hnsw.iterative_scan TO DEFAULT"
# appended to ``NEAR_OPTIONS`` before the single write's prepared statement: its plan does not depend on
# the values (the owners and the vector travel as arrays the planner cannot see into), so it is planned
# once per connection
GENERIC_PLAN = ", set_config('plan_cache_mode', 'force_generic_plan', true)"


def near_sql(dims: int, limit: int = 1) -> str:
    """``WITH q AS (...), near AS (...)`` for ``near_params`` (a statement goes on after it)."""
    return f"""
        WITH q AS MATERIALIZED (
            SELECT i, agent_id, scope, data_subject, v::vector({dims}) AS v
            FROM unnest(%s::int[], %s::bigint[], %s::text[], %s::text[], %s::text[])
                AS u(i, agent_id, scope, data_subject, v)
        ), near AS (
            SELECT q.i, n.id, 1 - n.distance AS similarity, n.content, n.data_subject
            FROM q
            CROSS JOIN LATERAL (
                SELECT m.id, m.content, m.data_subject, m.embedding::vector({dims}) <=> q.v AS distance
                FROM memory_semanticmemory m
                WHERE m.agent_id = q.agent_id AND m.scope = q.scope AND m.data_subject = q.data_subject
                  AND m.forgotten_at IS NULL AND m.superseded_at IS NULL
                  AND m.memory_type <> 'store'
                  AND m.embedding_model = %s AND m.embedding_dimensions = {dims}
                ORDER BY m.embedding::vector({dims}) <=> q.v
                LIMIT {int(limit)}
            ) n
            WHERE 1 - n.distance >= %s
        )
    """


def near_params(
    owners: Sequence[Owner], texts: Sequence[str], embedder: Embedder, policy: RetrievalPolicy
) -> list[Any]:
    """The parameters of ``near_sql``: item positions, ``owners`` (agent id, scope, data subject),
    the vectors' ``vector_text`` forms, the embedder's model and the lowest cosine the rule reads
    (``UPDATE_FLOOR``, or ``policy.near_duplicate_threshold`` when that is lower)."""
    return [
        list(range(len(texts))),
        [o[0] for o in owners],
        [o[1] for o in owners],
        [o[2] for o in owners],
        list(texts),
        embedder.name,
        min(UPDATE_FLOOR, policy.near_duplicate_threshold),
    ]


@dataclass(frozen=True)
class NearCandidate:
    """A live, current memory whose vector is near a write's (cosine >= ``near_params``' floor): its
    id, the cosine, its text (what ``same_statement`` compares) and its data subject (an update
    never crosses end users)."""

    memory_id: Any
    similarity: float
    content: str
    data_subject: str = ""


def near_duplicates(
    *,
    owners: Sequence[Owner],
    vectors: Sequence[np.ndarray],
    embedder: Embedder,
    policy: RetrievalPolicy,
    texts: Sequence[str] | None = None,
    limit: int = 1,
) -> list[list[NearCandidate]]:
    """For each ``(agent id, scope, data subject)`` of ``owners`` and its vector, the ``limit``
    embedded live, current (not superseded) memories of that agent in that scope about that subject
    nearest to the vector whose cosine is at least the floor of ``near_params``, nearest first (an
    empty list: none). One statement for all
    (a lateral nearest-neighbour lookup per vector, on the dimension's HNSW expression index), sent
    with its planner options in one round trip. ``texts``: the vectors' ``vector_text`` when the
    caller has them already. Candidates only: whether one is a duplicate is ``dedup_plan``'s
    decision (``same_statement``); pending memories (not embedded) are never candidates."""
    if not vectors:
        return []
    dims = int(embedder.dimensions)
    sql = f"{NEAR_OPTIONS}; {near_sql(dims, limit)} SELECT i, id, similarity, content, data_subject FROM near; {NEAR_RESET}"
    params = near_params(
        owners, texts if texts is not None else [vector_text(v) for v in vectors], embedder, policy
    )
    out: list[list[NearCandidate]] = [[] for _ in vectors]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        cursor.cursor.nextset()  # past the options' row
        rows = cursor.fetchall()
    for i, memory_id, similarity, content, subject in rows:
        out[i].append(NearCandidate(memory_id, float(similarity), content, subject))
    for found in out:
        found.sort(key=lambda c: -c.similarity)
    return out
