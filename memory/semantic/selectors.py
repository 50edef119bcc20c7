"""Reads of semantic memory: visibility, filters, and the two candidate generators of hybrid search."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations

from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.functions import Cast
from pgvector.django import CosineDistance, VectorField

from agents.models import Agent

from .models import MemoryScope, SemanticMemory

RANGE_OPERATORS = ("gt", "gte", "lt", "lte")
_WORD = re.compile(r"\w+", re.UNICODE)

# Bounds on the lexical candidate generation (see ``hybrid_candidates``): ``ts_rank_cd`` costs 5-10 µs
# a row, and ranking every memory that shares one common word with the query (thousands of rows at
# 100k memories) took 15-90 ms a search.
QUORUM_MAX_LEXEMES = 12  # the quorum tsquery has n(n-1)/2 pairs: beyond this, any-word matches only
TEXT_RANK_BOUND = 200  # at most this many rows (or the pool size, if larger) get ts_rank_cd per step


@dataclass(frozen=True)
class MemoryFilters:
    """Search filters; ``None`` or empty means "no constraint".

    ``created_at`` and ``importance`` map an operator in ``RANGE_OPERATORS`` to a bound.
    """

    agent_name: str | None = None
    scope: str | None = None
    memory_type: str | None = None
    session_id: str | None = None
    tags_any: Sequence[str] = ()
    tags_all: Sequence[str] = ()
    min_confidence: float | None = None
    created_at: dict[str, datetime] = field(default_factory=dict)
    importance: dict[str, float] = field(default_factory=dict)


def memories_visible_to(agent: Agent) -> QuerySet[SemanticMemory]:
    """Live memories ``agent`` may recall: every shared memory of the tenant and its own private ones."""
    return SemanticMemory.objects.filter(forgotten_at__isnull=True).filter(
        Q(scope=MemoryScope.SHARED) | Q(agent=agent)
    )


def cosine_distance(vector: Sequence[float], dimensions: int) -> CosineDistance:
    """``embedding::vector(d) <=> query``: the expression the per-dimension HNSW index is built on."""
    return CosineDistance(Cast("embedding", VectorField(dimensions=dimensions)), list(vector))


def or_query_text(text: str) -> str | None:
    """``'w1' | 'w2' | ...`` of the words of ``text`` in ``to_tsquery`` syntax, or None without words
    (``\\w+`` words hold no quote or operator, so quoting them is enough)."""
    words = {w.lower() for w in _WORD.findall(text)}
    return " | ".join(f"'{w}'" for w in sorted(words)) if words else None


def search_prepare(text: str, ef_search: int) -> list[str]:
    """Set this transaction's HNSW options and return the distinct lexemes of the words of ``text``
    under the ``english`` configuration (stemmed, stop words dropped: the terms ``or_query_text(text)``
    can match), in one round trip. Call inside ``transaction.atomic()``.

    pgvector 0.8 iterative index scans: keep scanning the HNSW graph until enough rows pass the
    filters, instead of returning fewer than asked for.
    """
    words = " ".join(sorted({w.lower() for w in _WORD.findall(text)}))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('hnsw.ef_search', %s, true), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
            "tsvector_to_array(to_tsvector('english', %s))",
            [str(ef_search), words],
        )
        return list(cursor.fetchone()[2])


def _quoted(lexeme: str) -> str:
    """A normalised lexeme as a tsquery operand (quoted; kept as it is by a ``::tsquery`` cast)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


# --- hybrid candidates in one statement -------------------------------------------------------------

_RANGE_SQL = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def visible_filter_sql(
    agent: Agent, filters: MemoryFilters, *, model: str, dimensions: int
) -> tuple[str, list]:
    """The WHERE clause (table alias ``m``) and parameters of ``memories_visible_to(agent)`` with ``filters``
    restricted to vectors of ``model`` / ``dimensions``: the same rows, as SQL for the one-statement
    candidate query. ``dimensions`` is an int placed in the text so the planner can match the
    per-dimension partial HNSW index."""
    where = [
        "m.forgotten_at IS NULL",
        "(m.scope = 'shared' OR m.agent_id = %s)",
        "m.embedding_model = %s",
        f"m.embedding_dimensions = {int(dimensions)}",
    ]
    params: list = [agent.pk, model]
    if filters.agent_name is not None:
        where.append("m.agent_id IN (SELECT a.id FROM agents_agent a WHERE a.name = %s)")
        params.append(filters.agent_name)
    for column in ("scope", "memory_type", "session_id"):
        value = getattr(filters, column)
        if value is not None:
            where.append(f"m.{column} = %s")
            params.append(value)
    if filters.tags_any:
        where.append("m.tags && %s::varchar(64)[]")
        params.append(list(filters.tags_any))
    if filters.tags_all:
        where.append("m.tags @> %s::varchar(64)[]")
        params.append(list(filters.tags_all))
    if filters.min_confidence is not None:
        where.append("m.confidence >= %s")
        params.append(filters.min_confidence)
    for column, bounds in (("created_at", filters.created_at), ("importance", filters.importance)):
        for op, bound in bounds.items():
            where.append(f"m.{column} {_RANGE_SQL[op]} %s")
            params.append(bound)
    return " AND ".join(where), params


@dataclass(frozen=True)
class Candidate:
    """One candidate of hybrid search: cosine similarity, ``ts_rank_cd``, and what the score needs."""

    id: object
    similarity: float
    text_rank: float
    importance: float
    last_accessed_at: datetime
    embedding: object = None


def hybrid_candidates(
    *,
    where: str,
    params: list,
    vector: Sequence[float],
    dimensions: int,
    text: str | None,
    lexemes: Sequence[str],
    pool: int,
    with_embeddings: bool = False,
) -> list[Candidate]:
    """The union of the ``pool`` nearest memories (HNSW) and the ``pool`` best full-text matches,
    scored, in one statement (one round trip, no ORM compilation on the hot path).

    Full-text candidates are bounded: at most ``TEXT_RANK_BOUND`` rows
    holding two or more query words (``quorum``) and as many holding any, of which the ``pool``
    best by ``ts_rank_cd`` are kept. ``text`` is ``or_query_text(query)``, in ``to_tsquery``
    syntax (None: vector candidates only). Call inside ``transaction.atomic()`` after
    ``search_prepare``.
    """
    d = int(dimensions)
    qvec = "[" + ",".join(repr(float(x)) for x in vector) + "]"
    text_sql, text_params = "SELECT NULL::uuid AS id WHERE false", []
    rank_sql, rank_params = "0.0::real", []
    if text is not None and lexemes:
        any_word = (
            f"SELECT m.id, m.search FROM memory_semanticmemory m WHERE {where} "
            "AND m.search @@ to_tsquery('english', %s)"
        )
        if 2 <= len(lexemes) <= QUORUM_MAX_LEXEMES:
            pairs = " | ".join(f"({_quoted(a)} & {_quoted(b)})" for a, b in combinations(sorted(lexemes), 2))
            # one-word matches are read only when the quorum gives fewer than ``pool`` rows: the
            # uncorrelated count is a one-time filter, so otherwise that scan never starts
            text_from = (
                f"(WITH q AS MATERIALIZED (SELECT m.id, m.search FROM memory_semanticmemory m WHERE {where} "
                "AND m.search @@ %s::tsquery LIMIT %s) "
                f"SELECT * FROM q UNION (SELECT * FROM ({any_word} LIMIT %s) w "
                "WHERE (SELECT count(*) FROM q) < %s))"
            )
            from_params: list = [*params, pairs, TEXT_RANK_BOUND, *params, text, TEXT_RANK_BOUND, pool]
        else:
            text_from = f"({any_word} LIMIT %s)"
            from_params = [*params, text, TEXT_RANK_BOUND]
        text_sql = (
            f"SELECT s.id FROM {text_from} s "
            "ORDER BY ts_rank_cd(s.search, to_tsquery('english', %s)) DESC LIMIT %s"
        )
        text_params = [*from_params, text, pool]
        rank_sql, rank_params = "ts_rank_cd(m.search, to_tsquery('english', %s))", [text]
    sql = f"""
        WITH vec AS (
            SELECT m.id FROM memory_semanticmemory m WHERE {where}
            ORDER BY (m.embedding::vector({d})) <=> %s::vector({d}) LIMIT %s
        ), txt AS ({text_sql}), cand AS (SELECT id FROM vec UNION SELECT id FROM txt)
        SELECT m.id, 1 - ((m.embedding::vector({d})) <=> %s::vector({d})), {rank_sql}, m.importance,
               a.last_accessed_at{", m.embedding" if with_embeddings else ""}
        FROM cand JOIN memory_semanticmemory m ON m.id = cand.id
        JOIN memory_memoryaccess a ON a.memory_id = m.id
    """
    all_params = [*params, qvec, pool, *text_params, qvec, *rank_params]
    with connection.cursor() as cursor:
        cursor.execute(sql, all_params)
        return [
            Candidate(
                r[0], float(r[1]), float(r[2] or 0.0), float(r[3]), r[4], r[5] if with_embeddings else None
            )
            for r in cursor.fetchall()
        ]
