"""Reads of procedural memory: tools and their contracts, skills and versions, and the hybrid match
of a request's intent against the published skills."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations
from typing import Any

from django.db import connection
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery

from core.errors import InvalidInput, NotFound
from core.fulltext import query_lexemes
from memory.embeddings import embed_query, get_embedder

from .models import Skill, SkillRunStats, SkillVersion, Tool, ToolVersion, VersionStatus

# Hybrid match (the pattern of semantic recall): the nearest ``pool`` skills by cosine (HNSW) and
# the ``pool`` best full-text matches, fused. The lexical side reads at most TEXT_RANK_BOUND rows
# holding two of the request's words and, when those are fewer than the pool, as many holding one
# (at 10,000 skills a common word such as "account" is in hundreds). Ranked by ts_rank, which on
# these short texts weighs title and intents (A) over the description (B); decision record 0020.
TEXT_WEIGHT = 0.3
TEXT_RANK_BOUND = 200
QUORUM_MAX_LEXEMES = 12
DEFAULT_SUCCESS_WEIGHT = 0.2
MAX_K = 50


# --- tools --------------------------------------------------------------------------------------------


def tool_latest(name: str) -> ToolVersion:
    """The newest version of tool ``name``. Raises ``NotFound`` (field ``name``)."""
    found = ToolVersion.objects.select_related("tool").filter(tool__name=name).order_by("-version").first()
    if found is None:
        raise NotFound(f"No tool {name!r}.", field="name")
    return found


def tool_version_get(name: str, version: int) -> ToolVersion:
    """Version ``version`` of tool ``name``. Raises ``NotFound`` (field ``version``)."""
    found = ToolVersion.objects.select_related("tool").filter(tool__name=name, version=version).first()
    if found is None:
        raise NotFound(f"Tool {name!r} has no version {version}.", field="version")
    return found


def tool_list() -> list[ToolVersion]:
    """The newest version of every tool, by name (one query)."""
    return list(
        ToolVersion.objects.select_related("tool").order_by("tool__name", "-version").distinct("tool__name")
    )


def tool_versions(name: str) -> list[ToolVersion]:
    """Every version of tool ``name``, newest first (empty for an unknown tool)."""
    return list(ToolVersion.objects.select_related("tool").filter(tool__name=name).order_by("-version"))


def tool_versions_latest(names: Iterable[str]) -> dict[str, ToolVersion]:
    """``{name: version}``: the newest version of each of ``names`` that exists (one query)."""
    wanted = sorted({n for n in names if isinstance(n, str)})
    rows = (
        ToolVersion.objects.select_related("tool")
        .filter(tool__name__in=wanted)
        .order_by("tool__name", "-version")
        .distinct("tool__name")
    )
    return {row.tool.name: row for row in rows}


def tool_versions_pinned(pins: Mapping[str, int]) -> dict[str, ToolVersion]:
    """``{name: version}`` of exactly the versions ``pins`` names (a published skill's)."""
    q = Q(pk__in=[])
    for name, version in pins.items():
        q |= Q(tool__name=name, version=version)
    return {row.tool.name: row for row in ToolVersion.objects.select_related("tool").filter(q)}


def step_tool_names(steps: Any) -> list[str]:
    """The tool names a step list mentions (whatever its shape)."""
    if not isinstance(steps, list):
        return []
    return [s["tool"] for s in steps if isinstance(s, dict) and isinstance(s.get("tool"), str)]


# --- skills -------------------------------------------------------------------------------------------


def skill_get(name: str) -> Skill:
    """The skill ``name``. Raises ``NotFound`` (field ``name``)."""
    found = Skill.objects.defer("embedding", "search").filter(name=name).first()
    if found is None:
        raise NotFound(f"No skill {name!r}.", field="name")
    return found


def _versions() -> QuerySet[SkillVersion]:
    return SkillVersion.objects.select_related("skill", "proposed_by", "stats").defer(
        "skill__embedding", "skill__search"
    )


def skill_published(name: str) -> SkillVersion:
    """The published version of skill ``name`` (with its skill and run counters). Raises
    ``NotFound``: no such skill (field ``name``), or none of its versions is published."""
    found = _versions().filter(skill__name=name, status=VersionStatus.PUBLISHED).first()
    if found is None:
        skill_get(name)
        raise NotFound(f"Skill {name!r} has no published version.", field="name")
    return found


def skill_version_get(name: str, number: int) -> SkillVersion:
    """Version ``number`` of skill ``name`` in any status. Raises ``NotFound``."""
    found = _versions().filter(skill__name=name, number=number).first()
    if found is None:
        skill_get(name)
        raise NotFound(f"Skill {name!r} has no version {number}.", field="number")
    return found


def skill_version_by_id(skill_id: int, number: int) -> SkillVersion:
    """Version ``number`` of the skill with primary key ``skill_id`` (the admin's URLs)."""
    found = _versions().filter(skill_id=skill_id, number=number).first()
    if found is None:
        raise NotFound(f"No version {number} of skill #{skill_id}.", field="number")
    return found


def skill_versions(skill: Skill) -> list[SkillVersion]:
    """Every version of ``skill``, newest first, with run counters and proposing agents."""
    return list(_versions().filter(skill=skill).order_by("-number"))


def run_stats(version: SkillVersion) -> tuple[int, int]:
    """``(runs, successes)`` of ``version`` (zeros before its first report)."""
    stats = SkillRunStats.objects.filter(pk=version.pk).first()
    return (stats.runs, stats.successes) if stats else (0, 0)


def skills_for_admin() -> QuerySet[Skill]:
    """Skills with ``published_number``, ``published_runs``/``published_successes`` and the counts
    of open drafts (``open_drafts``) and agents' proposals among them (``open_proposals``)."""
    published = SkillVersion.objects.filter(skill=OuterRef("pk"), status=VersionStatus.PUBLISHED)
    stats = SkillRunStats.objects.filter(
        version__skill=OuterRef("pk"), version__status=VersionStatus.PUBLISHED
    )
    return Skill.objects.defer("embedding", "search").annotate(
        published_number=Subquery(published.values("number")[:1]),
        published_runs=Subquery(stats.values("runs")[:1]),
        published_successes=Subquery(stats.values("successes")[:1]),
        open_drafts=Count("versions", filter=Q(versions__status=VersionStatus.DRAFT), distinct=True),
        open_proposals=Count(
            "versions",
            filter=Q(versions__status=VersionStatus.DRAFT, versions__proposed_by__isnull=False),
            distinct=True,
        ),
    )


def proposals_open() -> list[SkillVersion]:
    """Drafts proposed by agents and not yet decided, oldest first."""
    return list(
        _versions().filter(status=VersionStatus.DRAFT, proposed_by__isnull=False).order_by("created_at", "pk")
    )


# --- matching -----------------------------------------------------------------------------------------


def success_prior(runs: int, successes: int) -> float:
    """``(successes + 1) / (runs + 2)``: the posterior mean of the success probability under a
    uniform prior (Laplace's rule of succession), 0.5 before any run, in (0, 1)."""
    return (successes + 1) / (runs + 2)


@dataclass(frozen=True)
class SkillMatch:
    """One matched skill: its published ``version`` and the parts of its score, each in [0, 1].

    ``relevance = TEXT_WEIGHT * text_relevance + (1 - TEXT_WEIGHT) * similarity``;
    ``score = (1 - w) * relevance + w * success_prior(runs, successes)`` with ``w`` the request's
    success weight.
    """

    version: SkillVersion
    score: float
    relevance: float
    similarity: float
    text_relevance: float
    runs: int
    successes: int

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.runs if self.runs else None


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


@dataclass(frozen=True)
class _Candidate:
    skill_id: int
    version_id: int
    similarity: float
    text_rank: float
    runs: int
    successes: int


def _candidates(
    *, vector: Sequence[float], model: str, dimensions: int, lexemes: Sequence[str], pool: int
) -> list[_Candidate]:
    """The union of the ``pool`` nearest skills with a published version (HNSW, cosine) and the
    ``pool`` best full-text matches of ``lexemes`` (the intent's, ``query_lexemes``), with their
    published version and counters: one round trip, the HNSW options and the statement sent
    together (Django's psycopg cursors bind parameters client-side, so PostgreSQL runs both in one
    implicit transaction, to which the options are local; inside a caller's transaction they last
    until its end, as a ``SET LOCAL`` does)."""
    d = int(dimensions)
    qvec = "[" + ",".join(repr(float(x)) for x in vector) + "]"
    published = (
        "EXISTS (SELECT 1 FROM memory_skillversion pv WHERE pv.skill_id = s.id AND pv.status = 'published')"
    )
    text_sql, text_params = "SELECT NULL::bigint AS id WHERE false", []
    rank_sql, rank_params = "0.0::real", []
    if lexemes:
        any_word = " | ".join(_quoted(w) for w in lexemes)
        any_sql = f"SELECT s.id, s.search FROM memory_skill s WHERE s.search @@ %s::tsquery AND {published}"
        if 2 <= len(lexemes) <= QUORUM_MAX_LEXEMES:
            pairs = " | ".join(f"({_quoted(a)} & {_quoted(b)})" for a, b in combinations(lexemes, 2))
            text_from = (
                f"(WITH q AS MATERIALIZED (SELECT s.id, s.search FROM memory_skill s "
                f"WHERE s.search @@ %s::tsquery AND {published} LIMIT %s) "
                f"SELECT * FROM q UNION (SELECT * FROM ({any_sql} LIMIT %s) w "
                "WHERE (SELECT count(*) FROM q) < %s))"
            )
            from_params: list[Any] = [pairs, TEXT_RANK_BOUND, any_word, TEXT_RANK_BOUND, pool]
        else:
            text_from = f"({any_sql} LIMIT %s)"
            from_params = [any_word, TEXT_RANK_BOUND]
        text_sql = f"SELECT t.id FROM {text_from} t ORDER BY ts_rank(t.search, %s::tsquery) DESC LIMIT %s"
        text_params = [*from_params, any_word, pool]
        rank_sql, rank_params = "ts_rank(s.search, %s::tsquery)", [any_word]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('hnsw.ef_search', %s, true), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', true);\n"
            f"""
            WITH vec AS (
                SELECT s.id FROM memory_skill s
                WHERE s.embedding_model = %s AND s.embedding_dimensions = {d} AND {published}
                ORDER BY (s.embedding::vector({d})) <=> %s::vector({d}) LIMIT %s
            ), txt AS ({text_sql}), cand AS (SELECT id FROM vec UNION SELECT id FROM txt)
            SELECT s.id, v.id,
                   CASE WHEN s.embedding_model = %s AND s.embedding_dimensions = {d}
                        THEN 1 - ((s.embedding::vector({d})) <=> %s::vector({d})) ELSE 0 END,
                   {rank_sql}, coalesce(st.runs, 0), coalesce(st.successes, 0)
            FROM cand JOIN memory_skill s ON s.id = cand.id
            JOIN memory_skillversion v ON v.skill_id = s.id AND v.status = 'published'
            LEFT JOIN memory_skillrunstats st ON st.version_id = v.id
            """,
            [str(max(pool, 40)), model, qvec, pool, *text_params, model, qvec, *rank_params],
        )
        cursor.cursor.nextset()  # past the options' row
        return [
            _Candidate(r[0], r[1], float(r[2] or 0.0), float(r[3] or 0.0), int(r[4]), int(r[5]))
            for r in cursor.fetchall()
        ]


def skill_match(
    *, intent: str, k: int = 5, success_weight: float = DEFAULT_SUCCESS_WEIGHT
) -> list[SkillMatch]:
    """The ``k`` published skills that best match ``intent`` (a request in words), best first.

    Candidates and fusion as in semantic recall: the cosine similarity of the intent's embedding
    (the tenant's embedder) to the skill's (title, intents, description), clipped to [0, 1], and
    ``ts_rank`` over the same text divided by the best among candidates; then each skill's
    published version's success prior weighted by ``success_weight`` (see ``SkillMatch``).
    Raises ``InvalidInput`` for a blank intent or out-of-range ``k``/``success_weight`` and
    ``EmbedderUnavailable`` (503) when the embedder is down.
    """
    if not isinstance(intent, str) or not intent.strip():
        raise InvalidInput("Describe the request to match (intent).", field="intent")
    if not 1 <= k <= MAX_K:
        raise InvalidInput(f"k is from 1 to {MAX_K}.", field="k")
    if not 0.0 <= success_weight <= 1.0 or math.isnan(success_weight):
        raise InvalidInput("success_weight is from 0 to 1.", field="success_weight")
    embedder = get_embedder()
    vector = embed_query(intent)
    pool = max(4 * k, 40)
    candidates = _candidates(
        vector=vector,
        model=embedder.name,
        dimensions=embedder.dimensions,
        lexemes=query_lexemes(intent),
        pool=pool,
    )
    if not candidates:
        return []
    best_rank = max(c.text_rank for c in candidates) or 1.0
    scored = []
    for c in candidates:
        similarity = min(1.0, max(0.0, c.similarity))
        text_relevance = c.text_rank / best_rank
        relevance = TEXT_WEIGHT * text_relevance + (1 - TEXT_WEIGHT) * similarity
        score = (1 - success_weight) * relevance + success_weight * success_prior(c.runs, c.successes)
        scored.append((score, relevance, similarity, text_relevance, c))
    scored.sort(key=lambda item: (-item[0], item[4].skill_id))
    top = scored[:k]
    versions = _versions().in_bulk([item[4].version_id for item in top])
    return [
        SkillMatch(versions[c.version_id], score, relevance, similarity, text_relevance, c.runs, c.successes)
        for score, relevance, similarity, text_relevance, c in top
        if c.version_id in versions
    ]


def latest_published_at(skill: Skill) -> datetime | None:
    """When the skill's current version was published (None: nothing published)."""
    return (
        SkillVersion.objects.filter(skill=skill, status=VersionStatus.PUBLISHED)
        .values_list("status_changed_at", flat=True)
        .first()
    )


def tools_for_editor() -> list[Tool]:
    """Every tool by name, for the editor's tool choice."""
    return list(Tool.objects.order_by("name"))
