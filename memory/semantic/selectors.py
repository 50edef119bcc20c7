"""Reads of semantic memory: visibility, filters, and the two candidate generators of hybrid search."""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.functions import Cast
from pgvector.django import CosineDistance, VectorField

from agents.models import Agent
from core.errors import NotFound

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
    Archived memories (the forgetting curve) are left out unless ``include_archived``.
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
    include_archived: bool = False


def visibility_q(agent: Agent) -> Q:
    """The one visibility rule of semantic memory: live (not forgotten) memories that are ``agent``'s
    own, shared with the tenant, or hierarchical and naming ``agent`` or its role. Every read path
    (recall, listing, one memory, forget) is built on this ``Q``; the one-statement search compiles
    it to SQL (``visible_filter_sql``). Rules that narrow what an agent may see (retention, holds)
    are added here and nowhere else."""
    seen = Q(agent_id=agent.pk) | Q(scope=MemoryScope.SHARED)
    seen |= Q(scope=MemoryScope.HIERARCHICAL, visible_to_agents__contains=[agent.pk])
    if agent.role:
        seen |= Q(scope=MemoryScope.HIERARCHICAL, visible_to_roles__contains=[agent.role])
    return Q(forgotten_at__isnull=True) & seen


def filters_q(filters: MemoryFilters) -> Q:
    """The ``Q`` of search ``filters`` (every given one must hold)."""
    q = Q() if filters.include_archived else Q(archived_at__isnull=True)
    if filters.agent_name is not None:
        q &= Q(agent_id__in=Agent.objects.filter(name=filters.agent_name).values("pk"))
    for column in ("scope", "memory_type", "session_id"):
        value = getattr(filters, column)
        if value is not None:
            q &= Q(**{column: value})
    if filters.tags_any:
        q &= Q(tags__overlap=list(filters.tags_any))
    if filters.tags_all:
        q &= Q(tags__contains=list(filters.tags_all))
    if filters.min_confidence is not None:
        q &= Q(confidence__gte=filters.min_confidence)
    for column, bounds in (("created_at", filters.created_at), ("importance", filters.importance)):
        for op, bound in bounds.items():
            if op not in RANGE_OPERATORS:
                raise ValueError(f"unknown range operator {op!r}")
            q &= Q(**{f"{column}__{op}": bound})
    return q


def memories_visible_to(agent: Agent, filters: MemoryFilters | None = None) -> QuerySet[SemanticMemory]:
    """Memories ``agent`` may recall (``visibility_q``), narrowed by ``filters``."""
    qs = SemanticMemory.objects.filter(visibility_q(agent))
    return qs.filter(filters_q(filters)) if filters is not None else qs


def memory_list(*, agent: Agent, filters: MemoryFilters) -> QuerySet[SemanticMemory]:
    """The memories ``agent`` may see matching ``filters``, newest first, with their agent and
    access rows (a cursor page of it is ``GET /api/v1/memories``)."""
    return (
        memories_visible_to(agent, filters)
        .select_related("agent", "access")
        .defer("search", "embedding")
        .order_by("-created_at", "-id")
    )


def pending_exists() -> bool:
    """Whether the tenant has memories written asynchronously and not embedded yet."""
    return SemanticMemory.objects.filter(embedding_dimensions=0, forgotten_at__isnull=True).exists()


def agent_names(ids: Iterable[int]) -> dict[int, str]:
    """``{agent id: name}`` for the agents a hierarchical memory names (one query; none for no ids)."""
    wanted = set(ids)
    return dict(Agent.objects.filter(pk__in=wanted).values_list("pk", "name")) if wanted else {}


def memory_uuid(memory_id: Any) -> uuid.UUID:
    """``memory_id`` as a UUID; a malformed one is ``NotFound`` (field ``id``), like an unknown one."""
    try:
        return memory_id if isinstance(memory_id, uuid.UUID) else uuid.UUID(str(memory_id))
    except ValueError:
        raise NotFound("No such memory.", field="id") from None


def memory_get(*, agent: Agent, memory_id: Any) -> SemanticMemory:
    """One memory ``agent`` may see (archived ones too), with its agent and access row; the id of an
    async write that was merged into a near duplicate answers with the memory it became. Raises
    ``NotFound`` (field ``id``) otherwise: another agent's private memory is as absent as one that
    never existed."""
    pk = memory_uuid(memory_id)
    memory = memories_visible_to(agent).select_related("agent", "access").filter(pk=pk).first()
    if memory is None:
        merged = SemanticMemory.objects.filter(pk=pk, agent=agent, merged_into__isnull=False).first()
        if merged is not None and merged.merged_into_id is not None:
            memory = (
                memories_visible_to(agent)
                .select_related("agent", "access")
                .filter(pk=merged.merged_into_id)
                .first()
            )
    if memory is None:
        raise NotFound("No such memory.", field="id")
    return memory


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

_TABLE = f'"{SemanticMemory._meta.db_table}".'


def _filters_key(filters: MemoryFilters) -> tuple[Any, ...]:
    return (
        filters.agent_name,
        filters.scope,
        filters.memory_type,
        filters.session_id,
        tuple(filters.tags_any),
        tuple(filters.tags_all),
        filters.min_confidence,
        tuple(sorted(filters.created_at.items())),
        tuple(sorted(filters.importance.items())),
        filters.include_archived,
    )


@functools.lru_cache(maxsize=4096)
def _compiled_filter(
    agent_id: int, role: str, key: tuple[Any, ...], model: str, dimensions: int
) -> tuple[str, tuple[Any, ...]]:
    (
        agent_name,
        scope,
        memory_type,
        session_id,
        tags_any,
        tags_all,
        min_confidence,
        created,
        importance,
        include_archived,
    ) = key
    filters = MemoryFilters(
        agent_name,
        scope,
        memory_type,
        session_id,
        tags_any,
        tags_all,
        min_confidence,
        dict(created),
        dict(importance),
        include_archived,
    )
    qs = memories_visible_to(Agent(pk=agent_id, role=role), filters).filter(embedding_model=model)
    compiler = qs.query.get_compiler(connection=connection)
    where, params = compiler.compile(qs.query.where)
    # the compiled clause names the table; the candidate query reads it under the alias m
    return f"{where.replace(_TABLE, 'm.')} AND m.embedding_dimensions = {int(dimensions)}", tuple(params)


def visible_filter_sql(
    agent: Agent, filters: MemoryFilters, *, model: str, dimensions: int
) -> tuple[str, list[Any]]:
    """The WHERE clause (table alias ``m``) and parameters of ``memories_visible_to(agent, filters)``
    restricted to vectors of ``model`` / ``dimensions``: the same rows, compiled by Django from the
    same ``Q`` for the one-statement candidate query. ``dimensions`` is an int placed in the text so
    the planner can match the per-dimension partial HNSW index even with a generic plan.

    Compiled once per (agent and role, filters, model, dimensions) and cached (4,096 entries): it costs
    0.35 ms without filters and 1.3 ms with all of them, against a search of about 15 ms. Nothing
    in the clause depends on the tenant (ids are per schema; the search path picks the tables)."""
    where, params = _compiled_filter(agent.pk, agent.role, _filters_key(filters), model, int(dimensions))
    return where, list(params)


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
