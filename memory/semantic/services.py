"""Writes to semantic memory, and hybrid recall (which writes: reads restart the recency clock)."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import re
import time
import unicodedata
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np
import redis
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agents.models import Agent
from agents.services import system_agent_get
from core.errors import DomainError, InvalidInput, NotFound, PermissionDenied
from core.locks import advisory_xact_lock
from core.redis import get_redis, tenant_key
from core.tasks import queue_later
from core.tenancy import current_schema, current_tenant
from memory.embeddings import Embedder, check_vector, embed_query, get_embedder
from memory.episodic.models import Event
from memory.episodic.services import agent_session, decision_record, person_session
from tenants.models import ConsolidationPolicy, RetrievalPolicy, Tenant

from . import selectors, touches
from .differences import differences
from .forgetting import STABILITY_SQL, batch_stability_sql, stability_after_recall
from .models import MemoryAccess, MemoryScope, MemoryType, SemanticMemory
from .selectors import MemoryFilters

logger = logging.getLogger(__name__)
# single writes' embeddings, run while their exact-duplicate lookup waits (one per core)
_EMBEDDING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memory-embedding")
_SPACES = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """Unicode NFKC, case-folded, whitespace collapsed and trimmed: the form exact duplicates share."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def content_hash(text: str) -> str:
    """Hex SHA-256 of ``normalise_text(text)``."""
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class MemoryData:
    """A memory to store. ``importance`` and ``confidence`` are in [0, 1]. A ``hierarchical`` memory
    names who else may recall it: agents by name (``visible_to_agents``) and agent roles
    (``visible_to_roles``), at least one of them; other scopes name nobody."""

    content: str
    memory_type: str = MemoryType.FACT
    scope: str = MemoryScope.PRIVATE
    session_id: str | None = None
    tags: Sequence[str] = ()
    importance: float = 0.5
    confidence: float = 1.0
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding: Sequence[float] | None = None
    embedding_model: str | None = None
    visible_to_agents: Sequence[str] = ()
    visible_to_roles: Sequence[str] = ()
    fact_hint: dict[str, Any] | None = None
    source_event_id: int | None = None
    data_subject: str = ""


@dataclass(frozen=True)
class WriteResult:
    """What ``memory_create`` did: ``created``, ``accepted`` (an async write, stored and queued for
    embedding), or matched an ``exact`` / ``near`` duplicate."""

    memory: SemanticMemory
    outcome: Literal["created", "accepted", "exact", "near"]
    similarity: float | None = None

    @property
    def deduplicated(self) -> bool:
        return self.outcome in ("exact", "near")


def consolidation_policy() -> ConsolidationPolicy:
    """The current tenant's consolidation policy (the defaults outside a tenant)."""
    tenant = current_tenant()
    policy = getattr(tenant, "consolidation_policy", None)
    return policy if isinstance(policy, ConsolidationPolicy) else Tenant().consolidation_policy


def accesses_touch(
    ids: Sequence[Any], *, now: datetime, agent: Agent | None = None
) -> dict[Any, tuple[datetime, int, float]]:
    """Count one access (a recall or a reinforcement) of each memory of ``ids`` at ``now``: the clock
    restarts, ``access_count`` + 1 and the stability grows by the spacing rule of
    ``memory.semantic.forgetting`` (the tenant's ``stability_growth``), in one statement. Archived
    memories among them are restored (``memories_restore``, recorded). Returns ``{id:
    (last_accessed_at, access_count, stability_hours)}`` as now stored."""
    if not ids:
        return {}
    growth = consolidation_policy().stability_growth
    with connection.cursor() as cursor:
        # the memory's archived flag read by the same statement: no second query on recall's path
        cursor.execute(
            f"UPDATE memory_memoryaccess a SET stability_hours = {STABILITY_SQL}, last_accessed_at = %s, "
            "access_count = access_count + 1 FROM memory_semanticmemory m "
            "WHERE m.id = a.memory_id AND a.memory_id = ANY(%s) "
            "RETURNING a.memory_id, a.last_accessed_at, a.access_count, a.stability_hours, m.archived_at IS NOT NULL",
            [growth, now, now, list(ids)],
        )
        rows = cursor.fetchall()
    touched = {row[0]: (row[1], int(row[2]), float(row[3])) for row in rows}
    archived = [row[0] for row in rows if row[4]]
    if archived:
        memories_restore(ids=archived, reason="access", agent=agent)
    return touched


def memories_restore(
    *, ids: Sequence[Any], reason: str, username: str | None = None, agent: Agent | None = None
) -> list[Any]:
    """Bring archived memories back into default recall (``archived_at`` cleared); forgotten ones stay
    forgotten. ``reason`` ``access`` (``agent``'s recall or write reached them) or ``operator``
    (the person ``username`` restored them in the admin). One ``decision`` event records it, in
    session ``consolidation``: ``agent``'s, or the tenant's system agent's with ``actor``
    ``user:<username>``. Returns the ids restored (those archived and not forgotten)."""
    with transaction.atomic():
        restored = list(
            SemanticMemory.objects.select_for_update()
            .filter(pk__in=list(ids), archived_at__isnull=False, forgotten_at__isnull=True)
            .values_list("pk", flat=True)
        )
        if not restored:
            return []
        SemanticMemory.objects.filter(pk__in=restored).update(archived_at=None)
        decision_record(
            agent=agent or system_agent_get(),
            session_id="consolidation",
            actor=f"user:{username}" if username else "",
            content=f"Restored {len(restored)} archived memories ({reason}).",
            payload={
                "action": "memories_restore",
                "reason": reason,
                "memory_ids": sorted(str(i) for i in restored),
            },
        )
    return restored


def _audiences(items: Sequence[MemoryData], prefixes: Sequence[str]) -> list[tuple[list[int], list[str]]]:
    """The agent ids and roles each hierarchical memory names, the agents looked up in one query.
    Raises ``InvalidInput`` (field ``<prefix>visible_to``, or ``<prefix>visible_to.agents`` for
    names that are no agent of the tenant)."""
    wanted: set[str] = set()
    for data, prefix in zip(items, prefixes, strict=True):
        names = [n for n in data.visible_to_agents]
        roles = [r for r in data.visible_to_roles if r]
        if data.scope != MemoryScope.HIERARCHICAL:
            if names or roles:
                raise InvalidInput(
                    "Only a hierarchical memory names agents or roles.", field=f"{prefix}visible_to"
                )
        elif not names and not roles:
            raise InvalidInput(
                "A hierarchical memory names at least one agent or role that may recall it.",
                field=f"{prefix}visible_to",
            )
        wanted.update(names)
    found = dict(Agent.objects.filter(name__in=wanted).values_list("name", "pk")) if wanted else {}
    out: list[tuple[list[int], list[str]]] = []
    for data, prefix in zip(items, prefixes, strict=True):
        names = list(dict.fromkeys(data.visible_to_agents))
        unknown = [n for n in names if n not in found]
        if unknown:
            raise InvalidInput(
                f"No agent named {', '.join(map(repr, unknown))}.", field=f"{prefix}visible_to.agents"
            )
        out.append(([found[n] for n in names], list(dict.fromkeys(r for r in data.visible_to_roles if r))))
    return out


def _validate(data: MemoryData, prefix: str = "") -> None:
    """The checks that need no database (``_validate_all`` checks the source events)."""
    if not data.content or not data.content.strip():
        raise InvalidInput("Content may not be blank.", field=f"{prefix}content")
    for name in ("importance", "confidence"):
        value = getattr(data, name)
        if not (0.0 <= value <= 1.0) or math.isnan(value):
            raise InvalidInput(f"{name} must be between 0 and 1.", field=f"{prefix}{name}")
    if data.scope not in MemoryScope.values:
        raise InvalidInput(f"Unknown scope {data.scope!r}.", field=f"{prefix}scope")
    if data.memory_type not in MemoryType.values:
        raise InvalidInput(f"Unknown memory_type {data.memory_type!r}.", field=f"{prefix}memory_type")
    hint = data.fact_hint
    if hint is not None and (
        not isinstance(hint, dict)
        or not {"subject", "predicate", "object"}
        <= set(hint)
        <= {"subject", "subject_type", "predicate", "object"}
        or not isinstance(hint["object"], dict)
    ):
        raise InvalidInput('A fact hint is {"subject", "predicate", "object"}.', field=f"{prefix}fact")


def _validate_all(items: Sequence[MemoryData], prefixes: Sequence[str]) -> None:
    """Every item's checks, then their source events in one query."""
    for data, prefix in zip(items, prefixes, strict=True):
        _validate(data, prefix)
    wanted = {d.source_event_id for d in items if d.source_event_id is not None}
    known = set(Event.objects.filter(pk__in=wanted).values_list("pk", flat=True)) if wanted else set()
    for data, prefix in zip(items, prefixes, strict=True):
        if data.source_event_id is not None and data.source_event_id not in known:
            raise InvalidInput(
                f"No event {data.source_event_id} in this tenant.", field=f"{prefix}source_event_id"
            )


@functools.cache
def _vector_format(dimensions: int) -> str:
    return "[" + ",".join(["%.9g"] * dimensions) + "]"


def _vector_text(vector: np.ndarray) -> str:
    """pgvector's text form of ``vector``. Nine significant digits give back every float32 exactly
    (pgvector stores float4), in one C formatting call: a third of the time of ``repr`` per element
    (120 against 390 µs for 384 dimensions), which was 0.2 s of a batch of 500."""
    return _vector_format(len(vector)) % tuple(vector.tolist())


# The near-duplicate lookup, the SQL half of the rule (it proposes, ``_dedup_plan`` decides): for each
# vector ``i`` (text, parsed once each in a materialised CTE: inlined, the cast ran once per row
# compared, 700 ms against 2,600 rows instead of 1 ms), the ``limit`` nearest embedded live memories
# of its agent and scope, kept when the cosine is at least the threshold: CTE ``near(i, id,
# similarity, content)``. Each lookup walks the HNSW index (iteratively, past rows of other agents
# and scopes) for the statement only (``_NEAR_OPTIONS``, then ``_NEAR_RESET``): the planner's
# estimate preferred sorting every row of the agent by distance per vector, ~12-18 µs a row (30-46
# ms per write at 2,600 memories, seconds for a batch), against 7 ms by the index, at load 10.
# Options, lookup and reset travel as one multi-statement query (Django's psycopg cursors bind
# client-side): local to the caller's transaction, or to the implicit one of the query outside any.
# Sent one statement at a time (with a savepoint around them) they took six round trips of a single
# write's eleven.
_NEAR_OPTIONS = (
    "SELECT set_config('enable_sort', 'off', true), set_config('hnsw.iterative_scan', 'relaxed_order', true)"
)
_NEAR_RESET = "SET LOCAL enable_sort TO DEFAULT; SET LOCAL hnsw.iterative_scan TO DEFAULT"
# how many near memories a write whose nearest one says something else is compared with: the
# nearest is looked up alone first (an iterative index scan for more rows than the agent has walks
# on to ``hnsw.max_scan_tuples``), the others only for such a write
NEAR_CANDIDATES = 5


def _near_sql(dims: int, limit: int = 1) -> str:
    """``WITH q AS (...), near AS (...)`` for ``_near_params`` (a statement goes on after it)."""
    return f"""
        WITH q AS MATERIALIZED (
            SELECT i, agent_id, scope, v::vector({dims}) AS v
            FROM unnest(%s::int[], %s::bigint[], %s::text[], %s::text[]) AS u(i, agent_id, scope, v)
        ), near AS (
            SELECT q.i, n.id, 1 - n.distance AS similarity, n.content
            FROM q
            CROSS JOIN LATERAL (
                SELECT m.id, m.content, m.embedding::vector({dims}) <=> q.v AS distance
                FROM memory_semanticmemory m
                WHERE m.agent_id = q.agent_id AND m.scope = q.scope AND m.forgotten_at IS NULL
                  AND m.memory_type <> 'store'
                  AND m.embedding_model = %s AND m.embedding_dimensions = {dims}
                ORDER BY m.embedding::vector({dims}) <=> q.v
                LIMIT {int(limit)}
            ) n
            WHERE 1 - n.distance >= %s
        )
    """


def _near_params(
    owners: Sequence[tuple[int, str]], texts: Sequence[str], embedder: Embedder, policy: RetrievalPolicy
) -> list[Any]:
    return [
        list(range(len(texts))),
        [o[0] for o in owners],
        [o[1] for o in owners],
        list(texts),
        embedder.name,
        policy.near_duplicate_threshold,
    ]


@dataclass(frozen=True)
class NearCandidate:
    """A live memory whose vector is within ``near_duplicate_threshold`` of a write's: its id, the
    cosine and its text (what ``same_statement`` compares)."""

    memory_id: Any
    similarity: float
    content: str


def near_duplicates(
    *,
    owners: Sequence[tuple[int, str]],
    vectors: Sequence[np.ndarray],
    embedder: Embedder,
    policy: RetrievalPolicy,
    texts: Sequence[str] | None = None,
    limit: int = 1,
) -> list[list[NearCandidate]]:
    """For each ``(agent id, scope)`` of ``owners`` and its vector, the ``limit`` embedded live
    memories of that agent in that scope nearest to the vector whose cosine is at least
    ``policy.near_duplicate_threshold``, nearest first (an empty list: none). One statement for all
    (a lateral nearest-neighbour lookup per vector, on the dimension's HNSW expression index), sent
    with its planner options in one round trip. ``texts``: the vectors' ``_vector_text`` when the
    caller has them already. Candidates only: whether one is a duplicate is ``_dedup_plan``'s
    decision (``same_statement``); pending memories (not embedded) are never candidates."""
    if not vectors:
        return []
    dims = int(embedder.dimensions)
    sql = f"{_NEAR_OPTIONS}; {_near_sql(dims, limit)} SELECT i, id, similarity, content FROM near; {_NEAR_RESET}"
    params = _near_params(
        owners, texts if texts is not None else [_vector_text(v) for v in vectors], embedder, policy
    )
    out: list[list[NearCandidate]] = [[] for _ in vectors]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        cursor.cursor.nextset()  # past the options' row
        rows = cursor.fetchall()
    for i, memory_id, similarity, content in rows:
        out[i].append(NearCandidate(memory_id, float(similarity), content))
    for found in out:
        found.sort(key=lambda c: -c.similarity)
    return out


def same_statement(content: str, candidates: Sequence[NearCandidate]) -> NearCandidate | None:
    """The rule that makes a near duplicate a duplicate: the nearest of ``candidates`` (near
    memories, nearest first) whose text says what ``content`` says, i.e. differs from it in no
    negation, number, date, name, literal or opposite (``memory.semantic.differences``); None when
    each of them says something else (the write is an update: stored, never merged)."""
    for candidate in candidates:
        if not differences(content, candidate.content):
            return candidate
    return None


@dataclass(frozen=True)
class _Match:
    """Item ``index`` of a batch duplicates ``memory_id`` (stored) or ``item`` (an earlier item)."""

    outcome: Literal["exact", "near"]
    similarity: float
    memory_id: Any = None
    item: int | None = None


def _dedup_plan(
    *,
    owners: Sequence[tuple[int, str]],
    vectors: Sequence[np.ndarray | None],
    contents: Sequence[str],
    embedder: Embedder,
    policy: RetrievalPolicy,
    skip: Sequence[bool] = (),
    texts: Sequence[str | None] = (),
) -> list[_Match | None]:
    """The near-duplicate rule over a batch, as if its items were written one after another: item
    ``j`` (with a vector, not in ``skip``) duplicates the nearest of the stored memories of its
    agent and scope (``near_duplicates``) and of the batch's earlier items of the same owner that
    are themselves new, among those whose cosine is at least ``policy.near_duplicate_threshold``
    and whose text says the same (``same_statement``: a near memory that differs in a negation,
    number, date, name, literal or opposite is no duplicate). The one place a near duplicate is
    decided: single writes, batches and the async worker's drain all come here. One statement for
    the stored side (a second, for the few items whose nearest memory says something else, looks
    at ``NEAR_CANDIDATES`` of them); the batch's side is a dot product of unit vectors (NumPy).
    ``contents``: the items' texts; ``texts``: the vectors' ``_vector_text`` by position, when the
    caller has them."""
    n = len(vectors)
    todo = [j for j in range(n) if vectors[j] is not None and not (skip and skip[j])]

    def lookup(positions: Sequence[int], limit: int) -> list[list[NearCandidate]]:
        return near_duplicates(
            owners=[owners[j] for j in positions],
            vectors=[vectors[j] for j in positions],  # type: ignore[misc]
            embedder=embedder,
            policy=policy,
            texts=[texts[j] or _vector_text(vectors[j]) for j in positions] if texts else None,  # type: ignore[arg-type]
            limit=limit,
        )

    plan: list[_Match | None] = [None] * n
    unmatched = []
    for j, found in zip(todo, lookup(todo, 1), strict=True):
        same = same_statement(contents[j], found)
        if same is not None:
            plan[j] = _Match("near", same.similarity, memory_id=same.memory_id)
        elif found:  # its nearest says something else: a farther one may still say the same
            unmatched.append(j)
    if unmatched:
        for j, found in zip(unmatched, lookup(unmatched, NEAR_CANDIDATES), strict=True):
            same = same_statement(contents[j], found)
            if same is not None:
                plan[j] = _Match("near", same.similarity, memory_id=same.memory_id)
    if len(todo) > 1:
        matrix = np.stack([vectors[j] for j in todo])  # type: ignore[misc]
        cosines = matrix @ matrix.T
        # per item, the earlier items of its owner still new, compared as one row of the matrix (a
        # loop over every earlier pair took 60 ms for a batch of 500 of one owner)
        group_of = {o: k for k, o in enumerate(dict.fromkeys(owners[j] for j in todo))}
        groups = np.array([group_of[owners[j]] for j in todo])
        is_new = np.zeros(len(todo), dtype=bool)
        for pos, j in enumerate(todo):
            best = None
            earlier = np.flatnonzero(is_new[:pos] & (groups[:pos] == groups[pos]))
            if earlier.size:
                sims = cosines[pos, earlier]
                near = earlier[sims >= policy.near_duplicate_threshold]
                # nearest first, the first of equals first (as written one after another)
                ordered = near[np.argsort(-cosines[pos, near], kind="stable")]
                same = same_statement(
                    contents[j],
                    [NearCandidate(int(k), float(cosines[pos, k]), contents[todo[k]]) for k in ordered],
                )
                if same is not None:
                    best = int(same.memory_id)
            current = plan[j]
            if best is not None and (current is None or cosines[pos, best] > current.similarity):
                plan[j] = _Match("near", float(cosines[pos, best]), item=todo[best])
            if plan[j] is None:
                is_new[pos] = True
    return plan


def _reinforce_many(
    targets: Sequence[tuple[Any, MemoryData, tuple[list[int], list[str]]]], *, agent: Agent | None
) -> dict[Any, SemanticMemory]:
    """One more sighting of each ``(memory id, the duplicate's data, its audience)``, in order: an
    access each (``accesses_touch``: clock restarted, stability raised, restored if archived; a
    memory seen twice counts twice), confidence and importance = max (one statement), new tags and
    (hierarchical) new agents and roles added. Returns the memories as now stored, by id."""
    if not targets:
        return {}
    ids = [t[0] for t in targets]
    now = timezone.now()
    remaining = list(ids)
    while remaining:  # each round touches each id once: a memory met n times gets n accesses
        distinct = list(dict.fromkeys(remaining))
        accesses_touch(distinct, now=now, agent=agent)
        for memory_id in distinct:
            remaining.remove(memory_id)
    best: dict[Any, tuple[float, float]] = {}
    for memory_id, data, _ in targets:
        c, i = best.get(memory_id, (0.0, 0.0))
        best[memory_id] = (max(c, data.confidence), max(i, data.importance))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_semanticmemory m SET confidence = GREATEST(m.confidence, v.c), "
            "importance = GREATEST(m.importance, v.i) "
            "FROM unnest(%s::uuid[], %s::float8[], %s::float8[]) AS v(id, c, i) "
            "WHERE m.id = v.id AND (v.c > m.confidence OR v.i > m.importance)",
            [[str(k) for k in best], [v[0] for v in best.values()], [v[1] for v in best.values()]],
        )
    current = SemanticMemory.objects.select_related("agent", "access").in_bulk(list(best))
    for memory_id, data, (agent_ids, roles) in targets:
        memory = current[memory_id]
        new_tags = [t for t in dict.fromkeys(data.tags) if t not in memory.tags]
        new_ids = [i for i in agent_ids if i not in memory.visible_to_agents]
        new_roles = [r for r in roles if r not in memory.visible_to_roles]
        if new_tags or new_ids or new_roles:  # rare: a duplicate that widens tags or audience
            memory.tags = memory.tags + new_tags
            memory.visible_to_agents = memory.visible_to_agents + new_ids
            memory.visible_to_roles = memory.visible_to_roles + new_roles
            memory.save(update_fields=["tags", "visible_to_agents", "visible_to_roles"])
    return SemanticMemory.objects.select_related("agent", "access").in_bulk(list(best))


def memory_create(
    *,
    agent: Agent,
    data: MemoryData,
    policy: RetrievalPolicy,
    embedder: Embedder | None = None,
    write: Literal["sync", "async"] = "sync",
) -> WriteResult:
    """Store a memory for ``agent``, or reinforce the one it duplicates: ``memories_create`` with
    one item (the same pipeline, the same rules; errors name the plain field)."""
    return memories_create(agent=agent, items=[data], policy=policy, embedder=embedder, write=write)[0]


def memories_create(
    *,
    agent: Agent,
    items: Sequence[MemoryData],
    policy: RetrievalPolicy,
    embedder: Embedder | None = None,
    write: Literal["sync", "async"] = "sync",
    batch: bool = False,
) -> list[WriteResult]:
    """Store ``items`` for ``agent``, all or nothing (one transaction), or reinforce what each
    duplicates; returns one ``WriteResult`` per item, in order. The one write pipeline of semantic
    memory (single writes, batches and, for step 2, the async worker ``pending_embed``), applied as if
    the items were written one after another:

    1. Exact duplicate (same ``normalise_text``, agent and scope, not forgotten; archived or still
       pending included) of a stored memory or of an earlier item: reinforce it (one query for the
       batch).
    2. Near duplicate (``_dedup_plan``: cosine >= ``policy.near_duplicate_threshold`` with a stored
       memory of the same agent and scope, or an earlier new item, that says the same: no
       negation, number, date, name, literal or opposite differs): reinforce it. A near memory
       that says something else is no duplicate: the write is stored (step 3).
    3. Otherwise insert (one statement for the batch). Two concurrent identical inserts meet the
       partial unique constraint; the batch is then planned again once, and the loser's items come
       back as exact duplicates of the winner's rows.

    The texts that need it are embedded in one embedder call, before the transaction. With
    ``write="async"`` (write-back) only step 1 runs at once: the new memories are stored *pending*
    (no vector) and ``accepted``, and the worker (``memory.semantic.tasks.embed_pending``, queued on
    commit and swept by beat) embeds them in batches and runs step 2 (``pending_embed``). A single
    async write without a vector is tried first as one insert that the unique constraint of step 1
    stops (``_pending_accept``); when it does, the steps above reinforce the duplicate.

    With ``batch`` (the caller sent an array) a domain error names its item: ``memories[<i>].<field>``.
    Raises ``InvalidInput`` for blank content, out-of-range values, an unknown source event or agent,
    a malformed fact hint, and ``EmbeddingMismatch`` for a supplied vector of another model or
    dimension; ``EmbedderUnavailable`` when the embedder is down (nothing is stored).
    """
    embedder = embedder or get_embedder()
    prefixes = [f"memories[{i}]." if batch else "" for i in range(len(items))]
    _validate_all(items, prefixes)
    audiences = _audiences(items, prefixes)
    digests = [content_hash(d.content) for d in items]
    supplied: dict[int, np.ndarray] = {}
    for i, (data, prefix) in enumerate(zip(items, prefixes, strict=True)):
        try:
            if data.embedding is not None:
                supplied[i] = check_vector(data.embedding, model=data.embedding_model, embedder=embedder)
            elif data.embedding_model is not None and data.embedding_model != embedder.name:
                check_vector([], model=data.embedding_model, embedder=embedder)
        except DomainError as exc:
            if batch and exc.field:
                exc.field = f"{prefix}{exc.field}"
            raise
    vectors: dict[int, np.ndarray] = dict(supplied)
    if write == "async" and len(items) == 1 and not supplied:
        memory = _pending_accept(
            agent=agent, data=items[0], digest=digests[0], audience=audiences[0], embedder=embedder
        )
        if memory is not None:
            return [WriteResult(memory, "accepted")]
    # A single write's text is embedded on another core while the exact-duplicate lookup waits for
    # the database (the model and psycopg release the GIL): the lookup's round trip no longer adds
    # to the write. Only an exact duplicate wastes that embedding (its result, or its failure, is
    # never read); a batch is embedded after the lookup, without the duplicates.
    early: Future[np.ndarray] | None = None
    if write == "sync" and len(items) == 1 and 0 not in vectors:
        early = _EMBEDDING.submit(embedder.embed, [items[0].content])
    for attempt in (0, 1):
        exact = _exact_matches(agent, items, digests)
        if write == "sync":
            missing = [i for i in range(len(items)) if i not in vectors and exact[i] is None]
            if missing and early is not None:
                vectors[0] = early.result()[0]  # raises what the embedder raised
            elif missing:  # one model call for the batch, outside the transaction
                for i, vector in zip(
                    missing, embedder.embed([items[i].content for i in missing]), strict=True
                ):
                    vectors[i] = vector
        try:
            written = vectors if write == "sync" else supplied
            if len(items) == 1 and exact[0] is None and 0 in written and not connection.in_atomic_block:
                fast = _create_unless_near(
                    agent=agent,
                    data=items[0],
                    digest=digests[0],
                    audience=audiences[0],
                    vector=written[0],
                    embedder=embedder,
                    policy=policy,
                )
                if fast is not None:
                    return [fast]
            with transaction.atomic():
                return _write(
                    agent=agent,
                    items=items,
                    digests=digests,
                    audiences=audiences,
                    exact=exact,
                    vectors=vectors if write == "sync" else supplied,
                    embedder=embedder,
                    policy=policy,
                )
        except IntegrityError:
            if attempt:
                raise
    raise AssertionError("unreachable")


def _exact_matches(agent: Agent, items: Sequence[MemoryData], digests: Sequence[str]) -> list[_Match | None]:
    """Step 1 of ``memories_create``: each item's exact duplicate, stored (one query) or an earlier
    item of the batch."""
    # scope named too, so the lookup is the live-content unique index's (agent, scope, hash): without
    # it the planner read every memory of the agent and filtered the hashes (270 rows removed by
    # the filter for one write; a scan that grows with the agent's memories)
    stored = {
        (scope, digest): pk
        for pk, scope, digest in SemanticMemory.objects.filter(
            agent=agent,
            forgotten_at__isnull=True,
            scope__in={d.scope for d in items},
            content_hash__in=set(digests),
        ).values_list("pk", "scope", "content_hash")
    }
    first: dict[tuple[str, str], int] = {}
    out: list[_Match | None] = []
    for i, (data, digest) in enumerate(zip(items, digests, strict=True)):
        key = (data.scope, digest)
        if key in stored:
            out.append(_Match("exact", 1.0, memory_id=stored[key]))
        elif key in first:
            out.append(_Match("exact", 1.0, item=first[key]))
        else:
            first[key] = i
            out.append(None)
    return out


# The memories of a write and their access clocks in one statement: the rows travel as one JSON
# document (``jsonb_to_recordset``), the vectors as pgvector text. ``bulk_create`` twice took two
# round trips and, for a batch of 500, 0.2 s compiling 10,000 placeholders before psycopg spent
# another 0.18 s splitting them (client-side binding), against 1.4 ms of Python per memory in all.
_INSERT_ROWS = f"""
    INSERT INTO {SemanticMemory._meta.db_table} (id, agent_id, scope, memory_type, session_id,
        data_subject, tags, visible_to_agents, visible_to_roles, content, content_hash, metadata,
        importance, confidence, embedding, embedding_model, embedding_dimensions, created_at,
        fact_hint, source_event_id)
    SELECT r.id, %s, r.scope, r.memory_type, r.session_id, r.data_subject, r.tags,
        r.visible_to_agents, r.visible_to_roles, r.content, r.content_hash, r.metadata,
        r.importance, r.confidence, r.embedding::vector, %s, r.embedding_dimensions,
        %s::timestamptz + r.i * interval '1 microsecond', r.fact_hint, r.source_event_id
    FROM jsonb_to_recordset(%s::jsonb) AS r(id uuid, i int, scope text, memory_type text,
        session_id text, data_subject text, tags varchar(64)[], visible_to_agents bigint[],
        visible_to_roles varchar(100)[], content text, content_hash text, metadata jsonb,
        importance float8, confidence float8, embedding text, embedding_dimensions int,
        fact_hint jsonb, source_event_id bigint)
    {{where}}
    ORDER BY r.i
    {{conflict}}
    RETURNING id
"""
_INSERT_ACCESS = (
    f"INSERT INTO {MemoryAccess._meta.db_table} (memory_id, last_accessed_at, access_count, stability_hours) "
    "SELECT id, %s, 0, %s FROM ins"
)
_INSERT_SQL = f"WITH ins AS ({_INSERT_ROWS.format(where='', conflict='')}) {_INSERT_ACCESS}"


def _insert_params(
    created: dict[int, SemanticMemory], *, texts: dict[int, str], now: datetime, stability: float
) -> list[Any]:
    """The parameters of ``_INSERT_ROWS`` then ``_INSERT_ACCESS`` for the new memories ``created``
    (by item index: ``created_at`` is ``now`` plus that many µs; access clocks at ``now`` with
    ``stability`` hours)."""
    rows = [
        {
            "id": str(m.pk),
            "i": i,
            "scope": m.scope,
            "memory_type": m.memory_type,
            "session_id": m.session_id,
            "data_subject": m.data_subject,
            "tags": m.tags,
            "visible_to_agents": m.visible_to_agents,
            "visible_to_roles": m.visible_to_roles,
            "content": m.content,
            "content_hash": m.content_hash,
            "metadata": m.metadata,
            "importance": m.importance,
            "confidence": m.confidence,
            "embedding": texts.get(i) if m.embedding is not None else None,
            "embedding_dimensions": m.embedding_dimensions,
            "fact_hint": m.fact_hint,
            "source_event_id": m.source_event_id,
        }
        for i, m in created.items()
    ]
    first = next(iter(created.values()))
    return [first.agent_id, first.embedding_model, now, json.dumps(rows), now, stability]


def _mark_saved(created: dict[int, SemanticMemory], *, agent: Agent, now: datetime, stability: float) -> None:
    """The instances of ``created`` become the rows ``_INSERT_SQL`` stored, with their ``access``."""
    alias = connection.alias
    for memory in created.values():
        memory._state.adding = False
        memory._state.db = alias
        memory.agent = agent
        memory.access = MemoryAccess(memory=memory, last_accessed_at=now, stability_hours=stability)
        memory.access._state.adding = False
        memory.access._state.db = alias


def _new_memory(
    *,
    agent: Agent,
    data: MemoryData,
    index: int,
    digest: str,
    audience: tuple[list[int], list[str]],
    vector: np.ndarray | None,
    embedder: Embedder,
    now: datetime,
) -> SemanticMemory:
    """The unsaved row of item ``index`` of a write."""
    return SemanticMemory(
        agent=agent,
        scope=data.scope,
        memory_type=data.memory_type,
        session_id=data.session_id,
        data_subject=data.data_subject,
        tags=list(dict.fromkeys(data.tags)),
        visible_to_agents=audience[0],
        visible_to_roles=audience[1],
        content=data.content,
        content_hash=digest,
        metadata=data.metadata,
        importance=data.importance,
        confidence=data.confidence,
        embedding=vector,
        embedding_model=embedder.name,
        embedding_dimensions=embedder.dimensions if vector is not None else 0,
        fact_hint=data.fact_hint,
        source_event_id=data.source_event_id,
        # a microsecond apart: the batch keeps its order wherever memories are read oldest first
        # (the async worker's queue applies the near-duplicate rule in that order)
        created_at=now + timedelta(microseconds=index),
    )


def _create_unless_near(
    *,
    agent: Agent,
    data: MemoryData,
    digest: str,
    audience: tuple[list[int], list[str]],
    vector: np.ndarray,
    embedder: Embedder,
    policy: RetrievalPolicy,
) -> WriteResult | None:
    """A single write that is no exact duplicate, in one statement outside any transaction (its
    implicit one makes it all or nothing): the near-duplicate lookup (``_near_sql``) and, when it
    finds nothing, the row and its access clock. Returns the created memory, or None when the
    lookup found a near memory (nothing written): the caller's transaction then applies the rule
    (``_dedup_plan``), which reinforces it or, when it says something else, stores the write. A
    write that took a transaction (BEGIN, lookup, insert, COMMIT) waited for four round trips
    instead of one, each a few ms at load 8 (LangGraph's ``put``, pipelined, waits for one)."""
    now = timezone.now()
    stability = consolidation_policy().initial_stability_hours
    memory = _new_memory(
        agent=agent,
        data=data,
        index=0,
        digest=digest,
        audience=audience,
        vector=vector,
        embedder=embedder,
        now=now,
    )
    text = _vector_text(vector)
    created = {0: memory}
    sql = (
        f"{_NEAR_OPTIONS}; {_near_sql(int(embedder.dimensions))}, "
        f"ins AS ({_INSERT_ROWS.format(where='WHERE NOT EXISTS (SELECT FROM near)', conflict='')}), acc AS ({_INSERT_ACCESS}) "
        f"SELECT count(*) FROM near; {_NEAR_RESET}"
    )
    params = _near_params([(agent.pk, data.scope)], [text], embedder, policy)
    params += _insert_params(created, texts={0: text}, now=now, stability=stability)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        cursor.cursor.nextset()  # past the options' row
        (near,) = cursor.fetchone()
    if near:
        return None
    _mark_saved(created, agent=agent, now=now, stability=stability)
    return WriteResult(memory, "created")


def _pending_accept(
    *, agent: Agent, data: MemoryData, digest: str, audience: tuple[list[int], list[str]], embedder: Embedder
) -> SemanticMemory | None:
    """Store one async write as a pending memory with its access clock, in one statement (outside a
    transaction that is also its commit: one round trip where step 1's query, the two inserts and
    the commit took five, ~8 ms each at load 12), unless it is an exact duplicate: the insert does
    nothing when a live memory of the agent has the same scope and ``content_hash`` (the unique
    constraint ``semantic_live_content_uniq``, which is step 1's rule), and None is returned for
    the pipeline to reinforce that memory. Queues the worker's drain on commit."""
    now = timezone.now()
    memory = _new_memory(
        agent=agent,
        data=data,
        index=0,
        digest=digest,
        audience=audience,
        vector=None,
        embedder=embedder,
        now=now,
    )
    stability = consolidation_policy().initial_stability_hours
    created = {0: memory}
    # the live-content unique constraint stops an exact duplicate's row, and so its access row
    unless_duplicate = _INSERT_ROWS.format(where="", conflict="ON CONFLICT DO NOTHING")
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH ins AS ({unless_duplicate}) {_INSERT_ACCESS} RETURNING memory_id",
            _insert_params(created, texts={}, now=now, stability=stability),
        )
        if cursor.fetchone() is None:
            return None
    _mark_saved(created, agent=agent, now=now, stability=stability)
    transaction.on_commit(_embed_schedule, robust=True)
    return memory


def _write(
    *,
    agent: Agent,
    items: Sequence[MemoryData],
    digests: Sequence[str],
    audiences: Sequence[tuple[list[int], list[str]]],
    exact: Sequence[_Match | None],
    vectors: dict[int, np.ndarray],
    embedder: Embedder,
    policy: RetrievalPolicy,
) -> list[WriteResult]:
    """Steps 2 and 3 of ``memories_create`` inside its transaction."""
    n = len(items)
    owners = [(agent.pk, d.scope) for d in items]
    texts = {i: _vector_text(v) for i, v in vectors.items()}  # formatted once: lookup and insert
    near = _dedup_plan(
        owners=owners,
        vectors=[vectors.get(i) for i in range(n)],
        contents=[d.content for d in items],
        embedder=embedder,
        policy=policy,
        skip=[m is not None for m in exact],
        texts=[texts.get(i) for i in range(n)],
    )
    plan = [exact[i] or near[i] for i in range(n)]
    now = timezone.now()
    stability = consolidation_policy().initial_stability_hours
    created: dict[int, SemanticMemory] = {}
    for i, data in enumerate(items):
        if plan[i] is not None:
            continue
        created[i] = _new_memory(
            agent=agent,
            data=data,
            index=i,
            digest=digests[i],
            audience=audiences[i],
            vector=vectors.get(i),
            embedder=embedder,
            now=now,
        )
    if created:
        with connection.cursor() as cursor:
            cursor.execute(_INSERT_SQL, _insert_params(created, texts=texts, now=now, stability=stability))
        _mark_saved(created, agent=agent, now=now, stability=stability)
        if any(m.embedding is None for m in created.values()):
            transaction.on_commit(_embed_schedule, robust=True)

    def target(match: _Match) -> Any:
        """The memory a duplicate reinforces: a stored one, or the one an earlier item created (or,
        when that item was itself a duplicate, what it reinforced)."""
        while match.item is not None:
            if match.item in created:
                return created[match.item].pk
            earlier = plan[match.item]
            assert earlier is not None
            match = earlier
        return match.memory_id

    targets = [(target(m), items[i], audiences[i]) for i, m in enumerate(plan) if m is not None]
    reinforced = _reinforce_many(targets, agent=agent)
    results: list[WriteResult] = []
    for i, match in enumerate(plan):
        if match is None:
            memory = created[i]
            results.append(WriteResult(memory, "created" if memory.embedding is not None else "accepted"))
        else:
            results.append(WriteResult(reinforced[target(match)], match.outcome, match.similarity))
    return results


def embed_scheduled_key() -> str:
    """The current tenant's Redis flag ``{<schema>}:semantic:embed:scheduled``: set while a drain of
    its pending memories is queued and has not started yet."""
    return tenant_key("semantic", "embed", "scheduled")


def _embed_schedule() -> None:
    """After an async write commits: queue the worker's drain (``memory.semantic.tasks.embed_pending``)
    to start ``ENGRAM_ASYNC_EMBED_DELAY_SECONDS`` later, unless one is already queued and has not
    started (``SET NX PX`` of ``embed_scheduled_key`` for that long). Every write committed while the
    flag is set committed before the queued drain starts, so that drain reads it: one drain and one
    batched embedder call for the writes of a burst, where a message per write kept the worker
    running a task per write, most of them finding the rows already taken (and a Redis round trip
    of the web process per write). Best effort like every publish: a lost message is caught by beat's
    ``pending_sweep``; with Redis unreachable the drain is queued at once. A process that set the
    flag itself skips Redis until it expires: the drain it queued has not started before then."""
    delay = float(settings.ENGRAM_ASYNC_EMBED_DELAY_SECONDS)
    schema = current_schema()
    started = time.monotonic()
    if started < _embed_scheduled_until.get(schema, 0.0):
        return
    try:
        first = bool(get_redis().set(embed_scheduled_key(), "1", nx=True, px=max(1, int(delay * 1000))))
    except redis.RedisError as exc:
        logger.warning("async embedding queued without coalescing: Redis is unavailable (%s)", exc)
        first = True
    if first:
        _embed_scheduled_until[schema] = started + delay  # measured before the flag was set
        queue_later("memory.semantic.tasks.embed_pending", seconds=delay)


# schema -> monotonic time until which the drain this process queued has not started
_embed_scheduled_until: dict[str, float] = {}


@dataclass(frozen=True)
class PendingReport:
    """What one ``pending_embed`` batch did: memories embedded, merged into a near duplicate."""

    embedded: int = 0
    merged: int = 0


def pending_embed(
    *, policy: RetrievalPolicy, limit: int = 256, embedder: Embedder | None = None
) -> PendingReport:
    """Embed up to ``limit`` pending memories (async writes), oldest first, in one batch call of the
    embedder, and give them the synchronous path's near-duplicate rule (``_dedup_plan``, the same
    function: a near memory that says something else is no duplicate here either), in order, so
    two near duplicates in one batch merge too: a near duplicate reinforces the memory it matches
    and is merged into it (``merged_into``, hidden; its id still answers with the memory it
    became). Set-based: one statement finds the stored near duplicates, one writes
    the vectors, one marks the merged rows. Drains of a tenant take turns (a transaction's
    advisory lock, taken before the rows are claimed): two at once (a worker of two processes)
    each looked for near duplicates among the vectors committed before the other's, so a pair
    claimed apart stayed two memories or merged the earlier into the later. Rows locked by
    another writer are skipped (``SKIP LOCKED``). Raises ``EmbedderUnavailable`` when the
    embedder is down (the rows stay pending)."""
    embedder = embedder or get_embedder()
    dims = int(embedder.dimensions)
    with transaction.atomic():
        advisory_xact_lock("semantic-embed-drain")
        rows = list(
            SemanticMemory.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(embedding_dimensions=0, forgotten_at__isnull=True)
            .defer("search", "lexical")
            .order_by("created_at")[:limit]
        )
        if not rows:
            return PendingReport()
        vectors = list(embedder.embed([m.content for m in rows]))
        plan = _dedup_plan(
            owners=[(m.agent_id, m.scope) for m in rows],
            vectors=vectors,
            contents=[m.content for m in rows],
            embedder=embedder,
            policy=policy,
        )
        keep = [i for i, match in enumerate(plan) if match is None]
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE memory_semanticmemory m SET embedding = v.e::vector({dims}), "
                "embedding_model = %s, embedding_dimensions = %s "
                "FROM unnest(%s::uuid[], %s::text[]) AS v(id, e) WHERE m.id = v.id",
                [
                    embedder.name,
                    dims,
                    [str(rows[i].pk) for i in keep],
                    [_vector_text(vectors[i]) for i in keep],
                ],
            )
        merged = [
            (rows[i], m.memory_id if m.item is None else rows[m.item].pk) for i, m in enumerate(plan) if m
        ]
        if merged:
            now = timezone.now()
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE memory_semanticmemory m SET forgotten_at = %s, merged_into_id = v.target "
                    "FROM unnest(%s::uuid[], %s::uuid[]) AS v(id, target) WHERE m.id = v.id",
                    [now, [str(r.pk) for r, _ in merged], [str(t) for _, t in merged]],
                )
            by_agent: dict[int, list[tuple[Any, MemoryData, tuple[list[int], list[str]]]]] = {}
            for row, target in merged:
                data = MemoryData(
                    content=row.content, tags=row.tags, confidence=row.confidence, importance=row.importance
                )
                by_agent.setdefault(row.agent_id, []).append(
                    (target, data, (row.visible_to_agents, row.visible_to_roles))
                )
            agents = Agent.objects.in_bulk(list(by_agent))
            for agent_id, targets in by_agent.items():
                _reinforce_many(targets, agent=agents[agent_id])
    return PendingReport(len(keep), len(merged))


# A summary is embedded from its first 1,200 characters (about 256 word pieces): all-MiniLM-L6-v2 was
# trained on 256 and attention costs grow with the square of the length (LoCoMo's summaries took
# 0.31 s each embedded whole under load, against about 0.05 s cut); the full text stays searchable
# by the full-text side of recall.
SUMMARY_EMBED_CHARS = 1200


def _summary_embed_text(content: str) -> str:
    """What a summary is embedded from: its body (the header line after which it starts, naming the
    session and the event range, is the same words in every summary: ~20 of the 256 word pieces
    embedded, that would only pull every summary's vector towards the others), cut at
    ``SUMMARY_EMBED_CHARS``."""
    head, _, body = content.partition("\n")
    return (body or head)[:SUMMARY_EMBED_CHARS]


@dataclass(frozen=True)
class SummaryText:
    """A summary to store as a semantic memory of type ``summary`` (``memory_id`` None: a new one)."""

    session_id: str
    content: str
    memory_id: Any = None


def summaries_put(*, items: Sequence[SummaryText], embedder: Embedder | None = None) -> list[SemanticMemory]:
    """Create or rewrite summary memories (shared, written by the tenant's system agent, confidence
    1), embedded in one batch; returned in the order of ``items``. A summary is derived data, kept
    per node of the summary tree (``memory.consolidation``), so it skips the duplicate rules: its
    text names its session and event range. A forgotten summary is never rewritten nor recreated:
    its item is returned unchanged. The job that calls this records the change."""
    if not items:
        return []
    embedder = embedder or get_embedder()
    existing = SemanticMemory.objects.in_bulk([i.memory_id for i in items if i.memory_id is not None])
    todo = [i for i in items if i.memory_id is None or existing[i.memory_id].forgotten_at is None]
    texts = [_summary_embed_text(i.content) for i in todo]
    vectors = dict(zip(map(id, todo), embedder.embed(texts), strict=True)) if todo else {}
    system = system_agent_get()
    stability = consolidation_policy().initial_stability_hours
    out: list[SemanticMemory] = []
    fresh: list[SemanticMemory] = []
    now = timezone.now()
    with transaction.atomic():
        for item in items:
            if item.memory_id is not None:
                memory = existing[item.memory_id]
                if memory.forgotten_at is not None:
                    out.append(memory)
                    continue
                memory.content = item.content
                memory.content_hash = content_hash(item.content)
                memory.embedding = vectors[id(item)]
                memory.embedding_model = embedder.name
                memory.embedding_dimensions = embedder.dimensions
                memory.save(
                    update_fields=[
                        "content",
                        "content_hash",
                        "embedding",
                        "embedding_model",
                        "embedding_dimensions",
                    ]
                )
            else:
                memory = SemanticMemory(
                    agent=system,
                    scope=MemoryScope.SHARED,
                    memory_type=MemoryType.SUMMARY,
                    session_id=item.session_id,
                    content=item.content,
                    content_hash=content_hash(item.content),
                    importance=0.5,
                    confidence=1.0,
                    embedding=vectors[id(item)],
                    embedding_model=embedder.name,
                    embedding_dimensions=embedder.dimensions,
                    created_at=now,
                )
                fresh.append(memory)
            out.append(memory)
        if fresh:  # one insert for the new ones and one for their clocks
            SemanticMemory.objects.bulk_create(fresh)
            MemoryAccess.objects.bulk_create(
                [MemoryAccess(memory=m, last_accessed_at=now, stability_hours=stability) for m in fresh]
            )
    return out


def memory_forget(
    *,
    agent: Agent,
    memory_id: uuid.UUID | str,
    may_curate: bool = False,
    session_id: str | None = None,
    username: str | None = None,
) -> tuple[SemanticMemory, Event]:
    """Hide a memory from recall (the row stays for audit) and log a ``decision`` event in the
    memory's session; for a memory stored without one, in ``session_id`` (the request's) or else the
    session of whoever decided: the agent's ``agent:<name>``, or ``admin:<username>`` for a person.

    ``agent`` may forget the memories it wrote; with ``may_curate`` (a key with the ``curate``
    scope) also the other memories it can see. ``username``: a person forgot it in the admin (on
    behalf of the memory's agent), recorded as the decision's actor ``user:<username>``. Raises
    ``NotFound`` when the memory does not exist, is already forgotten or is not visible to
    ``agent``, and ``PermissionDenied`` for another agent's memory without ``may_curate``.
    """
    with transaction.atomic():
        memory = (
            selectors.memories_visible_to(agent)
            .select_for_update(of=("self",))
            .filter(pk=selectors.memory_uuid(memory_id))
            .first()
        )
        if memory is None:
            raise NotFound("No such memory.", field="id")
        if memory.agent_id != agent.pk and not may_curate:
            raise PermissionDenied(
                f"Memory {memory.pk} was written by another agent: only its author, or a key with the "
                "'curate' scope, may forget it.",
                field="id",
            )
        memory.forgotten_at = timezone.now()
        memory.forgotten_by = agent
        memory.save(update_fields=["forgotten_at", "forgotten_by"])
        event = decision_record(
            agent=agent,
            session_id=memory.session_id
            or session_id
            or (person_session(username) if username else agent_session(agent)),
            actor=f"user:{username}" if username else "",
            content=f"Forgot semantic memory {memory.pk}."
            + (f" (by {username} in the admin)" if username else ""),
            # no content-derived value here: every agent of the tenant can read the log, and a hash
            # of a short private memory can be reversed by guessing
            payload={
                "action": "memory_forget",
                "memory_id": str(memory.pk),
                "owner": memory.agent.name,
                "scope": memory.scope,
            },
        )
    return memory, event


# Share of the lexical side in the fused relevance (the one value: ``selectors.TEXT_WEIGHT``).
TEXT_WEIGHT = selectors.TEXT_WEIGHT


@dataclass(frozen=True)
class _Scored:
    """A candidate's score and its parts, each in [0, 1] (``selectors.hybrid_search`` says how).

    ``relevance = TEXT_WEIGHT * text_relevance + (1 - TEXT_WEIGHT) * similarity`` (hybrid fusion);
    ``score`` is the weighted mean of relevance, recency and importance (Park et al. 2023).
    """

    id: Any
    score: float
    relevance: float
    similarity: float
    text_relevance: float
    recency: float
    importance: float


@dataclass(frozen=True)
class SearchHit(_Scored):
    """One recalled memory (``id`` is its primary key) with the parts of its score."""

    memory: SemanticMemory


def _as_vector(value: Any) -> np.ndarray:
    """A pgvector value from a raw cursor (its text form ``[1,2,...]``) or an array, as float32."""
    if isinstance(value, str):
        return np.asarray(json.loads(value), dtype=np.float32)
    return np.asarray(value, dtype=np.float32)


def _mmr(hits: list[_Scored], vectors: dict[Any, np.ndarray], k: int, lam: float) -> list[_Scored]:
    """Maximal marginal relevance (Carbonell & Goldstein 1998): greedily pick
    ``argmax lam * score - (1 - lam) * max cos(candidate, already picked)``."""
    chosen: list[_Scored] = []
    pool = list(hits)
    while pool and len(chosen) < k:

        def gain(hit: _Scored) -> float:
            if not chosen:
                return hit.score
            redundancy = max(float(vectors[hit.id] @ vectors[c.id]) for c in chosen)
            return lam * hit.score - (1 - lam) * redundancy

        best = max(pool, key=gain)
        chosen.append(best)
        pool.remove(best)
    return chosen


def memory_search(
    *,
    agent: Agent,
    query: str,
    policy: RetrievalPolicy,
    k: int = 10,
    filters: MemoryFilters | None = None,
    weights: dict[str, float] | None = None,
    mmr_lambda: float | None = None,
    touch: bool = True,
    now: datetime | None = None,
) -> list[SearchHit]:
    """Hybrid recall of the ``k`` best memories ``agent`` may see for ``query``.

    Candidates: the nearest ``max(4k, 40)`` by vector (HNSW, cosine) and, per rare query word, as
    many by BM25 weight; each scored by ``selectors.hybrid_search`` (similarity and BM25 relevance
    fused, then ``score = (w_sim * relevance + w_rec * exp(-ln2 * hours / half_life) + w_imp *
    importance) / sum(w)`` with the hours since last access, Park et al. 2023), in one database
    round trip once the query's words are known to the process (``selectors.query_lexemes``).
    With ``mmr_lambda`` the top ``k`` are re-picked by MMR over the candidates. Hits are returned
    best first (ties by id).

    With ``touch`` the recall restarts the hits' clocks (``access_count`` + 1, stability raised):
    buffered in Redis and applied by the worker within ``ENGRAM_TOUCH_FLUSH_SECONDS``
    (``accesses_flush``); each hit's ``access`` shows this recall applied to the stored clock. Archived hits
    (with ``include_archived``) are restored and touched at once, recorded (``accesses_touch``),
    and so is every hit when Redis cannot be reached. Raises ``InvalidInput`` (field ``weights``)
    when every weight is 0.
    """
    embedder = get_embedder()
    dims = embedder.dimensions
    w = {"similarity": policy.w_similarity, "recency": policy.w_recency, "importance": policy.w_importance}
    w.update(weights or {})
    if sum(w.values()) <= 0:
        raise InvalidInput("At least one weight must be above 0, or every score is 0.", field="weights")
    now = now or timezone.now()

    qvec = list(embed_query(query))
    filters = filters or MemoryFilters()
    where, params = selectors.visible_filter_sql(agent, filters, model=embedder.name, dimensions=dims)
    pool_size = max(4 * k, 40)
    ranked = selectors.hybrid_search(
        where=where,
        params=params,
        vector=qvec,
        dimensions=dims,
        idf=selectors.lexeme_idf(selectors.query_lexemes(query)),
        pool=pool_size,
        weights=selectors.ScoreWeights(
            w["similarity"], w["recency"], w["importance"], math.log(2) / policy.recency_half_life_hours
        ),
        now=now,
        limit=None if mmr_lambda is not None else k,
        ef_search=max(pool_size, 40),
        with_embeddings=mmr_lambda is not None,
        generic_plan=not filters.narrows(),
    )
    by_id = {r.memory.pk: r for r in ranked}
    scored = [
        _Scored(r.memory.pk, r.score, r.relevance, r.similarity, r.text_relevance, r.recency, r.importance)
        for r in ranked
    ]
    if mmr_lambda is not None:
        vectors = {r.memory.pk: _as_vector(r.embedding) for r in ranked}
        scored = _mmr(scored, vectors, k, mmr_lambda)
    hits = [SearchHit(**vars(h), memory=by_id[h.id].memory) for h in scored]
    if touch and hits:
        _recall_touch(hits, agent=agent, now=now)
    return hits


def _recall_touch(hits: list[SearchHit], *, agent: Agent, now: datetime) -> None:
    """Restart the clocks of recalled ``hits``: buffered (``touches``), or at once for archived hits
    (restored and recorded) and when Redis is down; each hit's ``access`` then shows the access."""
    if not any(h.memory.archived_at is not None for h in hits):
        delay = float(settings.ENGRAM_TOUCH_FLUSH_SECONDS)
        try:
            schedule = touches.touches_push(
                ids=[h.memory.pk for h in hits], at=now, agent_id=agent.pk, delay=delay
            )
        except redis.RedisError as exc:
            logger.warning("recall touches go to PostgreSQL at once: Redis is unavailable (%s)", exc)
        else:
            if schedule:
                queue_later("memory.semantic.tasks.touches_flush", seconds=delay)
            growth = consolidation_policy().stability_growth
            for hit in hits:
                access = getattr(hit.memory, "access", None)
                if access is None:
                    continue
                hours = (now - access.last_accessed_at).total_seconds() / 3600.0
                access.stability_hours = stability_after_recall(access.stability_hours, hours, growth)
                access.last_accessed_at = max(access.last_accessed_at, now)
                access.access_count += 1
            return
    with transaction.atomic():
        # the only write of this transaction: losing the last fraction of a second of clock restarts
        # in a database crash is what a recency clock can afford, so the commit does not wait for WAL
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('synchronous_commit', 'off', true)")
        touched = accesses_touch([h.memory.pk for h in hits], now=now, agent=agent)
    for hit in hits:  # what is now stored (the score used the previous access time)
        if hit.memory.pk in touched:
            access = hit.memory.access
            access.last_accessed_at, access.access_count, access.stability_hours = touched[hit.memory.pk]
        hit.memory.archived_at = None  # a recall restores an archived memory


def accesses_flush(*, batch: int = 2000) -> int:
    """Apply the current tenant's buffered recalls (``touches``) to the access clocks, ``batch``
    entries per transaction, until none is left; returns how many entries were applied.

    Per memory, the ``n`` recalls of a batch count as ``n`` accesses: ``access_count + n``, the clock
    at the latest (never moved back), the stability raised by the spacing rule for ``n`` quick
    recalls (``forgetting.batch_stability_sql``). A memory archived meanwhile is restored, recorded
    as the recalling agent's (``memories_restore``, reason ``access``); rows gone (erased) are
    skipped. Flushes of a tenant take turns (an advisory lock); entries are acknowledged after
    their transaction commits, so a flush killed before that leaves them for the next one, and
    one killed between its commit and the acknowledgement has them counted twice (clocks unchanged).
    """
    growth = consolidation_policy().stability_growth
    applied = 0
    while True:
        with transaction.atomic():
            advisory_xact_lock("semantic-touch-flush")
            entries = touches.touches_read(count=batch)
            if not entries:
                return applied
            first: dict[str, datetime] = {}
            last: dict[str, tuple[datetime, int]] = {}
            counts: dict[str, int] = {}
            for entry in entries:
                for memory_id in entry.ids:
                    first[memory_id] = min(first.get(memory_id, entry.at), entry.at)
                    if memory_id not in last or entry.at >= last[memory_id][0]:
                        last[memory_id] = (entry.at, entry.agent_id)
                    counts[memory_id] = counts.get(memory_id, 0) + 1
            ids = [i for i in first if _is_uuid(i)]
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE memory_memoryaccess a SET stability_hours = "
                    f"{batch_stability_sql('v.first_at', 'v.n')}, "
                    "last_accessed_at = greatest(a.last_accessed_at, v.last_at), "
                    "access_count = a.access_count + v.n "
                    "FROM unnest(%s::uuid[], %s::timestamptz[], %s::timestamptz[], %s::int[]) "
                    "AS v(id, first_at, last_at, n), memory_semanticmemory m "
                    "WHERE a.memory_id = v.id AND m.id = a.memory_id "
                    "RETURNING a.memory_id, m.archived_at IS NOT NULL AND m.forgotten_at IS NULL",
                    [
                        growth,
                        growth,
                        ids,
                        [first[i] for i in ids],
                        [last[i][0] for i in ids],
                        [counts[i] for i in ids],
                    ],
                )
                archived = [row[0] for row in cursor.fetchall() if row[1]]
            by_agent: dict[int, list[Any]] = {}
            for memory_id in archived:
                by_agent.setdefault(last[str(memory_id)][1], []).append(memory_id)
            agents = Agent.objects.in_bulk(list(by_agent))
            for agent_id, memory_ids in by_agent.items():
                memories_restore(ids=memory_ids, reason="access", agent=agents.get(agent_id))
        touches.touches_ack([e.entry for e in entries])
        applied += len(entries)
        if len(entries) < batch:
            return applied


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def memories_erase(*, memory_ids: Sequence[uuid.UUID | str]) -> list[str]:
    """Delete the memories ``memory_ids`` of the current tenant for good: the row with its content,
    full-text vector and embedding (vectors can be inverted into text), and its access clock; the
    delete's trigger (migration 0020) removes its context and rebuilds its neighbours' contexts
    without its words (``MemoryContext``). Unlike ``memory_forget`` nothing stays for audit.
    Returns the ids deleted (as strings); ids already gone are skipped. Index entries go when the
    table is vacuumed (the caller does it).

    The caller records why (an erasure or a retention pass records its own decision)."""
    if not memory_ids:
        return []
    ids = [str(i) for i in memory_ids]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {MemoryAccess._meta.db_table} WHERE memory_id = ANY(%s::uuid[])", [ids])
        cursor.execute(
            f"DELETE FROM {SemanticMemory._meta.db_table} WHERE id = ANY(%s::uuid[]) RETURNING id", [ids]
        )
        return sorted(str(row[0]) for row in cursor.fetchall())
