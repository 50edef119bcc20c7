"""Reads of semantic memory: visibility, filters, and the two candidate generators of hybrid search."""

from __future__ import annotations

import functools
import math
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from datetime import datetime
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.functions import Cast
from pgvector.django import CosineDistance, VectorField

from agents.models import Agent
from agents.subjects import subject_asked, subject_filter_q, subject_visible_q
from core.db.prepared import execute_prepared
from core.db.rows import row_loader
from core.errors import NotFound
from core.fulltext import query_lexemes
from core.tenancy import current_schema, current_tenant
from memory.embeddings import vector_text
from tenants.models import ConsolidationPolicy, Tenant

from .models import ASKED_WEIGHT, MemoryScope, MemoryType, SemanticMemory

RANGE_OPERATORS = ("gt", "gte", "lt", "lte")
RANGED = ("created_at", "importance")  # the filters that map a range operator to a bound


@dataclass(frozen=True)
class MemoryFilters:
    """Search filters; ``None`` or empty means "no constraint".

    ``created_at`` and ``importance`` map an operator in ``RANGE_OPERATORS`` to a bound.
    ``data_subject``: only the memories of that end user (``agents.subjects.subject_asked`` checks
    it against a bound key first). Archived memories (the forgetting curve) are left out unless
    ``include_archived``; superseded ones (an update replaced them) unless ``include_superseded``
    (every version) or ``as_of`` (the versions current at that instant: created by then and not yet
    superseded).
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
    data_subject: str | None = None
    include_superseded: bool = False
    as_of: datetime | None = None

    def narrows(self) -> bool:
        """Whether any filter but the ``include_*`` ones is given (a constraint with values)."""
        return self != MemoryFilters(
            include_archived=self.include_archived, include_superseded=self.include_superseded
        )


def visibility_q(agent: Agent) -> Q:
    """The one visibility rule of semantic memory: live (not forgotten) memories that are ``agent``'s
    own, shared with the tenant, or hierarchical and naming ``agent`` or its role; for an agent acting
    for one end user (a bound key), only those of that subject or of none (``agents.subjects``).
    Every read path (recall, listing, one memory, context, forget) is built on this ``Q``; the
    one-statement search compiles it to SQL (``visible_filter_sql``). Rules that narrow what an
    agent may see (retention, holds) are added here and nowhere else."""
    seen = Q(agent_id=agent.pk) | Q(scope=MemoryScope.SHARED)
    seen |= Q(scope=MemoryScope.HIERARCHICAL, visible_to_agents__contains=[agent.pk])
    if agent.role:
        seen |= Q(scope=MemoryScope.HIERARCHICAL, visible_to_roles__contains=[agent.role])
    # the store's linked rows (``memory.store``) are searched through the store only
    return Q(forgotten_at__isnull=True) & ~Q(memory_type=MemoryType.STORE) & seen & subject_visible_q(agent)


def filters_q(filters: MemoryFilters) -> Q:
    """The ``Q`` of search ``filters`` (every given one must hold)."""
    q = Q() if filters.include_archived else Q(archived_at__isnull=True)
    if filters.as_of is not None:
        q &= Q(created_at__lte=filters.as_of) & (
            Q(superseded_at__isnull=True) | Q(superseded_at__gt=filters.as_of)
        )
    elif not filters.include_superseded:
        q &= Q(superseded_at__isnull=True)
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
    q &= subject_filter_q(filters.data_subject)
    for column, bounds in (("created_at", filters.created_at), ("importance", filters.importance)):
        for op, bound in bounds.items():
            if op not in RANGE_OPERATORS:
                raise ValueError(f"unknown range operator {op!r}")
            q &= Q(**{f"{column}__{op}": bound})
    return q


def visible_q(agent: Agent, filters: MemoryFilters) -> Q:
    """``visibility_q(agent)`` narrowed by ``filters``: the rows of ``memories_visible_to`` and of
    ``visible_filter_sql``. Raises ``SubjectRefused`` (403, field ``data_subject``) when ``agent``
    acts for one end user and the filter names another."""
    subject_asked(agent, filters.data_subject)
    return visibility_q(agent) & filters_q(filters)


def memories_visible_to(agent: Agent, filters: MemoryFilters | None = None) -> QuerySet[SemanticMemory]:
    """Memories ``agent`` may recall (``visibility_q``), narrowed by ``filters`` (``visible_q``)."""
    return SemanticMemory.objects.filter(
        visibility_q(agent) if filters is None else visible_q(agent, filters)
    )


def memory_list(*, agent: Agent, filters: MemoryFilters) -> QuerySet[SemanticMemory]:
    """The memories ``agent`` may see matching ``filters``, newest first, with their agent and
    access rows (a cursor page of it is ``GET /api/v1/memories``)."""
    return (
        memories_visible_to(agent, filters)
        .select_related("agent", "access")
        .defer("search", "embedding", "lexical")
        .order_by("-created_at", "-id")
    )


def pending_exists() -> bool:
    """Whether the tenant has memories written asynchronously and not embedded yet."""
    return SemanticMemory.objects.filter(embedding_dimensions=0, forgotten_at__isnull=True).exists()


def consolidation_policy() -> ConsolidationPolicy:
    """The current tenant's consolidation policy (the defaults outside a tenant)."""
    tenant = current_tenant()
    policy = getattr(tenant, "consolidation_policy", None)
    return policy if isinstance(policy, ConsolidationPolicy) else Tenant().consolidation_policy


def live_content_ids(
    *, agent: Agent, scopes: Iterable[str], subjects: Iterable[str], digests: Iterable[str]
) -> dict[tuple[str, str, str], Any]:
    """``{(scope, data_subject, content_hash): id}`` of ``agent``'s live (not forgotten), current
    (not superseded) memories in ``scopes`` about ``subjects`` with one of ``digests``: the stored
    side of the exact-duplicate rule (one query)."""
    # the live-content unique index's predicate word for word (fixed SQL: the ORM's compile cost more)
    with connection.cursor() as cursor:
        execute_prepared(cursor, _LIVE_CONTENT_SQL, [agent.pk, list(scopes), list(subjects), list(digests)])
        return {(scope, subject, digest): pk for pk, scope, subject, digest in cursor.fetchall()}


_LIVE_CONTENT_SQL = (
    f"SELECT id, scope, data_subject, content_hash FROM {SemanticMemory._meta.db_table} "
    "WHERE agent_id = %s AND forgotten_at IS NULL AND superseded_at IS NULL AND scope = ANY(%s::text[]) "
    "AND data_subject = ANY(%s::text[]) AND content_hash = ANY(%s::text[])"
)


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


def search_prepare(text: str, ef_search: int) -> list[str]:
    """Set this transaction's HNSW options (see ``HNSW_OPTIONS_SQL``) and return ``query_lexemes(text)``.
    Call inside ``transaction.atomic()``; ``hybrid_search`` sends the options in its own round trip
    instead."""
    with connection.cursor() as cursor:
        cursor.execute(HNSW_OPTIONS_SQL, [str(ef_search)])
    return query_lexemes(text)


# pgvector 0.8 iterative index scans (``relaxed_order``): under a filter the HNSW scan goes on past
# ``ef_search`` until enough rows pass it, instead of returning fewer than asked for
# (``tests/memory/semantic/test_recall.py`` holds it to exact nearest neighbours under a filter). Local
# to the transaction: the implicit one of a multi-statement query, or the caller's.
HNSW_OPTIONS_SQL = (
    "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)"
)

# appended to ``HNSW_OPTIONS_SQL`` by ``hybrid_search``: the plan cache mode of its statement, said
# every time (inside a caller's transaction the previous search's setting would still be in force)
_PLAN_MODE_SQL = ", set_config('plan_cache_mode', %s, true)"

# --- inverse document frequencies ---------------------------------------------------------------------

IDF_CACHE_SECONDS = 300.0  # autovacuum refreshes the statistics far less often than this


@dataclass(frozen=True)
class _LexiconStats:
    memories: float  # N: live rows of the memory table, per pg_class
    common: dict[str, float]  # lexeme -> document frequency, for the most common lexemes
    rare_df: float  # the document frequency of any other lexeme (the planner's own estimate)
    read_at: float


_lexicon: dict[str, _LexiconStats] = {}


def _lexicon_stats() -> _LexiconStats:
    """The current schema's lexicon statistics (one query at most every ``IDF_CACHE_SECONDS``)."""
    schema = current_schema()
    now = time.monotonic()
    cached = _lexicon.get(schema)
    if cached is not None and now - cached.read_at < IDF_CACHE_SECONDS:
        return cached
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT (SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'memory_semanticmemory'::regclass),
                   (SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'memory_lexicalposting'::regclass),
                   s.most_common_vals::text::text[], s.most_common_freqs, s.n_distinct
            FROM (SELECT 1) one LEFT JOIN pg_stats s
              ON s.schemaname = current_schema() AND s.tablename = 'memory_lexicalposting'
             AND s.attname = 'lexeme'
            """
        )
        memories, postings, values, freqs, n_distinct = cursor.fetchone()
    values, freqs = values or [], freqs or []
    common = {v: f * postings for v, f in zip(values, freqs, strict=True)}
    distinct = -n_distinct * postings if n_distinct is not None and n_distinct < 0 else (n_distinct or 0)
    rest = max(1.0, distinct - len(values))
    rare_df = max(1.0, (1.0 - sum(freqs)) * postings / rest) if postings else 1.0
    stats = _LexiconStats(float(memories or 0), common, rare_df, now)
    _lexicon[schema] = stats
    return stats


def lexeme_idf(lexemes: Sequence[str]) -> dict[str, float]:
    """``{lexeme: idf}`` for the current tenant, ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` (the
    BM25 IDF that stays positive, as in Lucene), N the number of memories and df a lexeme's
    document frequency from PostgreSQL's statistics of the lexical index (the 1,000 most common
    lexemes exactly as sampled; any other gets the planner's estimate for a rare value). Before the
    first ANALYZE every lexeme gets the same IDF."""
    stats = _lexicon_stats()
    n = max(stats.memories, 1.0)
    out = {}
    for lexeme in lexemes:
        df = min(stats.common.get(lexeme, stats.rare_df), n)
        out[lexeme] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    return out


# --- hybrid candidates in one statement -------------------------------------------------------------

_TABLE = f'"{SemanticMemory._meta.db_table}".'


def _filters_key(filters: MemoryFilters) -> tuple[Any, ...]:
    """``filters``' values in field order, hashable (lists as tuples, range dicts as sorted pairs)."""
    return tuple(
        tuple(sorted(v.items())) if isinstance(v, dict) else tuple(v) if isinstance(v, list | tuple) else v
        for v in (getattr(filters, f.name) for f in dataclass_fields(MemoryFilters))
    )


@functools.lru_cache(maxsize=4096)
def _compiled_filter(
    agent_id: int, role: str, acting_for: str, key: tuple[Any, ...], model: str, dimensions: int
) -> tuple[str, tuple[Any, ...]]:
    values: dict[str, Any] = {
        f.name: dict(v) if f.name in RANGED else v
        for f, v in zip(dataclass_fields(MemoryFilters), key, strict=True)
    }
    reader = Agent(pk=agent_id, role=role)
    reader.acting_for = acting_for
    where, params = rows_filter_sql(
        visible_q(reader, MemoryFilters(**values)), model=model, dimensions=dimensions
    )
    return where, tuple(params)


def rows_filter_sql(q: Q, *, model: str, dimensions: int) -> tuple[str, list[Any]]:
    """The WHERE clause (table alias ``m``) and parameters of the semantic memories ``q`` selects
    with vectors of ``model`` / ``dimensions``, compiled by Django for the candidate statements of
    ``hybrid_candidates`` / ``hybrid_search``: their one way to say which rows they rank (the
    memories an agent may recall, ``visible_filter_sql``; an item store's rows, ``memory.store``).
    ``q`` may hold subqueries of other tables (they are compiled under their own aliases)."""
    qs = SemanticMemory.objects.filter(q).filter(embedding_model=model)
    compiler = qs.query.get_compiler(connection=connection)
    where, params = compiler.compile(qs.query.where)
    # the compiled clause names the table; the candidate query reads it under the alias m
    return f"{where.replace(_TABLE, 'm.')} AND m.embedding_dimensions = {int(dimensions)}", list(params)


def visible_filter_sql(
    agent: Agent, filters: MemoryFilters, *, model: str, dimensions: int
) -> tuple[str, list[Any]]:
    """The WHERE clause (table alias ``m``) and parameters of ``memories_visible_to(agent, filters)``
    restricted to vectors of ``model`` / ``dimensions``: the same rows, compiled by Django from the
    same ``Q`` for the one-statement candidate query. ``dimensions`` is an int placed in the text so
    the planner can match the per-dimension partial HNSW index even with a generic plan.

    Compiled once per (agent, role and subject, filters, model, dimensions) and cached (4,096 entries): it costs
    0.35 ms without filters and 1.3 ms with all of them, against a search of about 15 ms. Nothing
    in the clause depends on the tenant (ids are per schema; the search path picks the tables)."""
    where, params = _compiled_filter(
        agent.pk, agent.role, agent.acting_for, _filters_key(filters), model, int(dimensions)
    )
    return where, list(params)


@dataclass(frozen=True)
class Candidate:
    """One candidate of hybrid search: cosine similarity, BM25 score, and what the score needs."""

    id: object
    similarity: float
    text_rank: float
    importance: float
    last_accessed_at: datetime
    embedding: object = None


# Words of the query that generate lexical candidates, rarest first (all of them score): each costs
# ``pool`` index entries and as many visibility checks (figures: docs/decisions/0026).
LEXICAL_MAX_TERMS = 8


# The columns of a candidate's memory row that scoring needs, read by the arm that found it, where its
# row already is (no second lookup of the row by primary key).
# ``embedding`` travels as it is stored (a TOAST pointer): it is read only for the candidates whose
# distance the vector arm did not compute (the vector arm's distance is carried, not recomputed).
# A conversation turn's speaker (its memory's metadata ``name``, which ``messages_add`` writes with the
# turn's ``role``; NULL for every other memory): the turn's speaker field of ``hybrid_search``.
_SPEAKER_SQL = "CASE WHEN m.metadata ? 'role' THEN m.metadata ->> 'name' END"
_CARRIED = f"m.embedding, m.lexical, m.importance, m.created_at, {_SPEAKER_SQL} AS speaker, m.asked_share"


# The query's IDF vector ``v``: the body of ``memory_lexical_query(lexemes, weights)`` (migration 0014)
# written out, so it is planned once with the prepared statement (under a generic plan, the
# SQL-function executor parses and plans a function's body on every call). ``tests/memory/semantic``
# hold the two equal.
# The query's lexemes and their IDFs as rows (``ql``): the source of ``_QUERY_VECTOR_SQL`` and of the
# speaker fields' scores (``_SPEAKERS_SQL``).
_QUERY_LEXEMES_SQL = "SELECT * FROM unnest(%s::text[], %s::float8[]) AS q(lexeme, weight)"
_QUERY_VECTOR_SQL = (
    "SELECT (coalesce('{' || string_agg(t.i || ':' || t.w, ',' ORDER BY t.i) || '}', '{}') "
    "|| '/1000000000')::sparsevec AS v "
    "FROM (SELECT memory_lexeme_index(q.lexeme) AS i, sum(q.weight) AS w FROM ql q GROUP BY 1) t"
)


def _candidates_sql(where: str, d: int, pool: int) -> str:
    """The candidate CTEs (``vec``, ``txt``, their union ``cand``, the query's lexemes and IDFs ``ql``
    and its IDF vector ``qv``) of the hybrid statement; parameters, in order: the query vector,
    ``where``'s, the generator lexemes, ``where``'s again, the query lexemes and their IDFs. ``pool`` (an int) is in the text: a
    prepared statement's generic plan then still knows each arm stops after ``pool`` rows, so it
    keeps the HNSW and posting index scans (a limit it cannot see lets it rank every row exactly)."""
    pool = int(pool)
    return f"""
        WITH vec AS (
            SELECT m.id, (m.embedding::vector({d})) <=> %s::vector({d}) AS distance,
                   {_CARRIED}
            FROM memory_semanticmemory m WHERE {where}
            ORDER BY distance LIMIT {pool}
        ), txt AS (
            SELECT p.* FROM unnest(%s::text[]) AS qt(lexeme)
            CROSS JOIN LATERAL (
                SELECT m.id, NULL::float8 AS distance, {_CARRIED}
                FROM memory_lexicalposting p
                JOIN memory_semanticmemory m ON m.id = p.memory_id
                WHERE p.lexeme = qt.lexeme AND {where}
                ORDER BY p.impact DESC, p.memory_id LIMIT {pool}
            ) p
        ), cand AS (
            SELECT DISTINCT ON (u.id) u.* FROM (SELECT * FROM vec UNION ALL SELECT * FROM txt) u
            ORDER BY u.id, u.distance NULLS LAST
        ),
        ql AS ({_QUERY_LEXEMES_SQL}),
        qv AS ({_QUERY_VECTOR_SQL})
    """


def _candidates_params(params: list[Any], qvec: str, idf: dict[str, float]) -> list[Any]:
    """``_candidates_sql``'s parameters: ``params`` are ``where``'s, ``idf`` the query's lexemes."""
    lexemes = list(idf)
    weights = [float(idf[t]) for t in lexemes]
    generators = sorted(lexemes, key=lambda t: (-idf[t], t))[:LEXICAL_MAX_TERMS]
    return [qvec, *params, generators, *params, lexemes, weights]


def _vector_literal(vector: Sequence[float]) -> str:
    """``vector`` rounded to float4 (as pgvector stores it) in ``vector_text``'s exact text."""
    return vector_text(np.asarray(vector, dtype=np.float32))


def hybrid_candidates(
    *,
    where: str,
    params: list[Any],
    vector: Sequence[float],
    dimensions: int,
    idf: dict[str, float],
    pool: int,
    with_embeddings: bool = False,
) -> list[Candidate]:
    """The union of the ``pool`` nearest memories (HNSW) and, for each of the ``LEXICAL_MAX_TERMS``
    rarest query lexemes, the ``pool`` memories where it weighs most (the lexical index, in BM25
    impact order), every one with its parts, unranked: the candidate generator of
    ``hybrid_search`` on its own (tests hold its recall to exact nearest neighbours). Both arms read
    only rows that pass ``where`` (``visible_filter_sql``).

    ``idf`` maps the query's lexemes (``query_lexemes``) to their IDF (``lexeme_idf``); a
    candidate's ``text_rank`` is its BM25 score, ``sum(idf(t) * saturation(tf, dl))`` over the query
    lexemes it holds: the dot product of its ``lexical`` vector with the query's IDF vector, the
    same saturations as the postings (migration 0014). Each lexical arm stops after
    ``pool`` rows of its index range, so its cost does not grow with the corpus; the result no
    longer depends on which rows an unordered ``LIMIT`` happened to keep. Call inside
    ``transaction.atomic()`` after ``search_prepare``.
    """
    d = int(dimensions)
    qvec = _vector_literal(vector)
    cand_params = _candidates_params(params, qvec, idf)
    sql = (
        _candidates_sql(where, d, pool)
        + f"""
        SELECT c.id, 1 - coalesce(c.distance, (c.embedding::vector({d})) <=> %s::vector({d})),
               coalesce(-(c.lexical <#> (SELECT v FROM qv)), 0),
               c.importance,
               coalesce((SELECT a.last_accessed_at FROM memory_memoryaccess a WHERE a.memory_id = c.id),
                        c.created_at){", c.embedding" if with_embeddings else ""}
        FROM cand c
    """
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*cand_params, qvec])
        return [
            Candidate(
                r[0], float(r[1]), float(r[2] or 0.0), float(r[3]), r[4], r[5] if with_embeddings else None
            )
            for r in cursor.fetchall()
        ]


# --- the one-statement search: candidates, scores and the rows of the best ------------------------------

# Share of the lexical side in the fused relevance: an equal share of the two arms. How much the
# lexical side may say for one query is its own ``text_relevance`` (scaled by the query's IDF mass,
# see ``hybrid_search``), not this constant; docs/explanation/retrieval.md lists each constant.
TEXT_WEIGHT = 0.5
# Weight of a memory's context (its neighbours' words, ``MemoryContext``) against its own words in
# the lexical side, ``text_rank + CONTEXT_WEIGHT * context_rank``: a neighbour's word counts half.
CONTEXT_WEIGHT = 0.5


# A candidate's access clock: one primary-key lookup per candidate (as a join, the generic plan may
# hash the whole access table, a cost that grows with the tenant).
_ACCESS_SQL = "(SELECT a.last_accessed_at FROM memory_memoryaccess a WHERE a.memory_id = c.id)"


# The speaker fields of the candidates (``_SPEAKER_SQL``, carried as ``speaker``), each scored as BM25
# scores a field holding each of its lexemes once: the IDF of each query lexeme (``ql``) it holds. Per
# distinct speaker (a handful among the candidates), so a name is parsed once, not once per turn.
_SPEAKERS_SQL = (
    "SELECT s.speaker, sum(q.weight) AS rank "
    "FROM (SELECT DISTINCT speaker FROM cand WHERE speaker IS NOT NULL) s "
    "JOIN ql q ON q.lexeme = ANY(tsvector_to_array(to_tsvector('english'::regconfig, s.speaker))) "
    "GROUP BY s.speaker"
)


def _context_rank_sql() -> str:
    """The per-candidate BM25 score of a memory's context (``MemoryContext.lexical``, 0 without
    one) against the query's IDF vector ``qv``, for the ``parts`` CTE of ``hybrid_search`` (the
    candidate's alias ``c``): one primary-key lookup and one sparse dot product per candidate."""
    return (
        "coalesce((SELECT -(x.lexical <#> (SELECT v FROM qv)) FROM memory_memorycontext x "
        "WHERE x.memory_id = c.id), 0)"
    )


@dataclass(frozen=True)
class ScoreWeights:
    """The weights of ``score`` (Park et al. 2023), each >= 0 with a positive sum, and the recency
    decay per hour (``ln 2 / half-life``)."""

    similarity: float
    recency: float
    importance: float
    decay_per_hour: float


@dataclass(frozen=True)
class ScoredMemory:
    """One ranked memory of ``hybrid_search``: its row (with ``agent`` and ``access`` loaded), score
    parts in [0, 1] and, when asked for, its embedding (pgvector's text form)."""

    memory: SemanticMemory
    score: float
    relevance: float
    similarity: float
    text_relevance: float
    recency: float
    importance: float
    embedding: object = None


@functools.cache
def _loaders() -> tuple[tuple[str, Any, int], tuple[str, Any, int], tuple[str, Any, int]]:
    from .models import MemoryAccess

    return (
        row_loader(SemanticMemory, ("search", "embedding", "lexical"), "m"),
        row_loader(Agent, (), "ag"),
        row_loader(MemoryAccess, (), "a"),
    )


def hybrid_search(
    *,
    where: str,
    params: list[Any],
    vector: Sequence[float],
    dimensions: int,
    idf: dict[str, float],
    pool: int,
    weights: ScoreWeights,
    now: datetime,
    limit: int | None,
    ef_search: int,
    with_embeddings: bool = False,
    generic_plan: bool = False,
) -> list[ScoredMemory]:
    """Hybrid recall in one round trip: the HNSW options (``HNSW_OPTIONS_SQL``), the candidates of
    ``hybrid_candidates``, their scores and the rows of the ``limit`` best (all of them with
    ``limit`` None), best first (ties by id), sent as one multi-statement query (Django's psycopg
    cursors bind parameters client-side, so the statements travel together; PostgreSQL runs them in
    one implicit transaction, to which the options are local). The statement itself is a prepared
    one (``execute_prepared``): it is parsed once per connection, and with ``generic_plan`` planned
    once too (``plan_cache_mode`` forced to the generic plan for this transaction). Ask for it only
    when the values of ``params`` cannot change the best plan, as with the visibility rule alone
    (an agent's id and role); with filters, PostgreSQL plans each call for its values until its
    plan cache finds the generic plan as good (at 100k memories the plan costs ~2 ms of a ~5 ms
    statement).

    Per candidate, all terms in [0, 1]: ``similarity = clamp(cos)``, ``text_relevance`` = its
    lexical score ``BM25(own words) + speaker + CONTEXT_WEIGHT * BM25(its context)`` (``speaker``: for
    a conversation turn, the IDFs of the query lexemes its speaker's name holds, as BM25 scores a
    field holding each once; the context: the words of its session neighbours, ``MemoryContext``;
    each 0 without one) divided by the
    larger of the best among the candidates and the query's IDF mass (the sum of ``idf``, what a
    memory holding every query lexeme once would score; 1 when both are 0): a short question whose
    rare words a memory holds keeps the whole lexical share, a long dialogue whose words the best
    memory meets only in part gives it that part, so the dense side decides,
    ``relevance = TEXT_WEIGHT * text_relevance + (1 - TEXT_WEIGHT) * similarity * stated`` with
    ``stated = 1 - (1 - ASKED_WEIGHT) * asked_share`` (what a memory asks counts half, as its asked
    words do in its lexical vector: decision 0121; ``similarity`` itself stays the cosine),
    ``recency = exp(-decay * hours since last access)`` (``now`` minus the access clock, else the
    creation time; never negative) and
    ``score = (w_sim * relevance + w_rec * recency + w_imp * importance) / (w_sim + w_rec + w_imp)``
    (Park et al. 2023, "Generative Agents", section 4.1).
    """
    qvec = _vector_literal(vector)
    cand_params = _candidates_params(params, qvec, idf)
    w_sum = weights.similarity + weights.recency + weights.importance
    all_params = [
        *cand_params,
        qvec,
        1.0 - ASKED_WEIGHT,
        weights.decay_per_hour,
        now,
        CONTEXT_WEIGHT,
        CONTEXT_WEIGHT,
        float(sum(idf.values())),
        TEXT_WEIGHT,
        TEXT_WEIGHT,
        weights.similarity,
        weights.recency,
        weights.importance,
        w_sum,
        limit,
    ]
    with connection.cursor() as cursor:
        execute_prepared(
            cursor,
            _search_sql(where, int(dimensions), pool, with_embeddings=with_embeddings),
            all_params,
            before=HNSW_OPTIONS_SQL + _PLAN_MODE_SQL,
            before_params=[str(int(ef_search)), "force_generic_plan" if generic_plan else "auto"],
        )
        return [_scored(r, with_embeddings=with_embeddings) for r in cursor.fetchall()]


def _search_sql(where: str, d: int, pool: int, *, with_embeddings: bool) -> str:
    """The statement of ``hybrid_search``: the candidates (``_candidates_sql``), their score parts,
    the fused relevance and score, and the rows of the best (memory, agent, access clock: the
    select lists of ``_loaders``, in that order, after the six score columns). Parameters, in
    order: the candidates' (their query lexemes and IDFs, ``ql``, also serve the speaker fields),
    the query vector, ``1 - ASKED_WEIGHT``, the decay per hour, now, ``CONTEXT_WEIGHT`` twice,
    the query's IDF mass, ``TEXT_WEIGHT`` twice, the three weights, their sum and the limit."""
    (mem_select, _, _), (agent_select, _, _), (access_select, _, _) = _loaders()
    return (
        _candidates_sql(where, d, pool)
        + f""",
        spk AS ({_SPEAKERS_SQL}),
        parts AS MATERIALIZED (  -- inlined, max() OVER () would run the context subquery a second time
            SELECT c.id,
                   greatest(0, least(1, 1 - coalesce(c.distance, (c.embedding::vector({d})) <=> %s::vector({d}))))
                       AS similarity,
                   coalesce(-(c.lexical <#> (SELECT v FROM qv)), 0) AS text_rank,
                   {_context_rank_sql()} AS context_rank,
                   coalesce(sk.rank, 0) AS speaker_rank,
                   1 - %s * c.asked_share AS stated,
                   c.importance,
                   exp(-%s * greatest(0, extract(epoch FROM (%s - coalesce({_ACCESS_SQL}, c.created_at)))
                       / 3600.0)) AS recency
            FROM cand c LEFT JOIN spk sk ON sk.speaker = c.speaker
        ), fused AS (
            SELECT p.*, (p.text_rank + p.speaker_rank + %s * p.context_rank)
                   / coalesce(nullif(greatest(max(p.text_rank + p.speaker_rank + %s * p.context_rank) OVER (),
                                              %s), 0), 1)
                   AS text_relevance
            FROM parts p
        ), scored AS (
            SELECT f.*, %s * f.text_relevance + (1 - %s) * f.similarity * f.stated AS relevance FROM fused f
        ), best AS (
            SELECT s.*, (%s * s.relevance + %s * s.recency + %s * s.importance) / %s AS score
            FROM scored s ORDER BY score DESC, s.id::text LIMIT %s
        )
        SELECT b.score, b.relevance, b.similarity, b.text_relevance, b.recency, b.importance,
               {mem_select}, {agent_select}, {access_select}{", m.embedding" if with_embeddings else ""}
        FROM best b JOIN memory_semanticmemory m ON m.id = b.id
        JOIN {Agent._meta.db_table} ag ON ag.id = m.agent_id
        LEFT JOIN memory_memoryaccess a ON a.memory_id = m.id
        ORDER BY b.score DESC, b.id::text
        """
    )


def _scored(r: Sequence[Any], *, with_embeddings: bool) -> ScoredMemory:
    """A row of ``_search_sql`` as a ``ScoredMemory`` (its memory with ``agent`` and ``access``)."""
    (_, load_memory, n_mem), (_, load_agent, n_agent), (_, load_access, n_access) = _loaders()
    i = 6
    memory = load_memory(r[i : i + n_mem])
    i += n_mem
    memory.agent = load_agent(r[i : i + n_agent])
    i += n_agent
    if r[i] is not None:
        memory.access = load_access(r[i : i + n_access])
    i += n_access
    return ScoredMemory(
        memory,
        float(r[0]),
        float(r[1]),
        float(r[2]),
        float(r[3]),
        float(r[4]),
        float(r[5]),
        r[i] if with_embeddings else None,
    )
