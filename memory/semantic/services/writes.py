"""The write pipeline of semantic memory: ``memory_create`` / ``memories_create``, the one statement
that inserts memories with their access clocks (shared by its three insert paths), and the schedule
of the async worker's drain.

The pipeline (single writes, batches and, for step 2, the async worker ``pending.pending_embed``),
applied as if a batch's items were written one after another:

1. Exact duplicate (same ``normalise_text``, agent and scope, current; archived or still
   pending included) of a stored memory or of an earlier item: reinforce it (one query for the
   batch).
2. Near duplicate (``duplicates.dedup_plan``: a current memory of the same agent and scope, or an
   earlier new item, near by the vectors that says the same, ``updates.relation``): reinforce it.
   A near memory of the same data subject that the write restates with a new value is an update:
   the write is stored (step 3) and supersedes it (``supersede.memories_supersede``), as does the
   memory an item names in ``supersedes``. A near memory about something else is left alone.
3. Otherwise insert (one statement for the batch). Two concurrent identical inserts meet the
   partial unique constraint; the batch is then planned again once, and the loser's items come
   back as exact duplicates of the winner's rows.

The texts that need it are embedded in one embedder call, before the transaction. With
``write="async"`` (write-back) only step 1 runs at once: the new memories are stored *pending* (no
vector) and ``accepted``, and the worker (``memory.semantic.tasks.embed_pending``, queued on commit
by ``embed_schedule`` and swept by beat) embeds them in batches and runs step 2
(``pending.pending_embed``). A single async write without a vector is tried first as one insert that
the unique constraint of step 1 stops (``_pending_accept``); when it does, the steps above reinforce
the duplicate."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import numpy as np
import redis
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agents.models import Agent
from agents.subjects import subject_written
from core.db.prepared import execute_prepared
from core.errors import DomainError, InvalidInput, NotFound
from core.redis import get_redis, tenant_key
from core.tasks import queue_later
from core.tenancy import current_schema
from memory.embeddings import Embedder, check_vector, get_embedder, vector_text
from memory.episodic.models import Event
from tenants.models import RetrievalPolicy

from ..models import MemoryScope, MemoryType, SemanticMemory
from ..near import GENERIC_PLAN, NEAR_OPTIONS, NearCandidate, near_params, near_sql
from ..selectors import consolidation_policy, live_content_ids
from .duplicates import Match, content_hash, dedup_plan
from .inserts import INSERT_ACCESS, INSERT_ROWS, INSERT_SQL, insert_params, mark_saved, new_memory
from .reinforce import memories_reinforce
from .supersede import Supersession, memories_supersede, stated_targets

logger = logging.getLogger(__name__)
# single writes' embeddings, run while their exact-duplicate lookup waits (one per core)
_EMBEDDING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memory-embedding")


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
    supersedes: Any = None  # the id of a memory this one replaces (an update the caller states)


@dataclass(frozen=True)
class WriteResult:
    """What ``memory_create`` did: ``created``, ``accepted`` (an async write, stored and queued for
    embedding), or matched an ``exact`` / ``near`` duplicate; ``supersedes``: the id of the memory
    the write replaced (an update: stated by the caller or found by ``dedup_plan``), else None."""

    memory: SemanticMemory
    outcome: Literal["created", "accepted", "exact", "near"]
    similarity: float | None = None
    supersedes: Any = None

    @property
    def deduplicated(self) -> bool:
        return self.outcome in ("exact", "near")

    @property
    def updated(self) -> bool:
        return self.supersedes is not None


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
            raise NotFound(
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
            raise NotFound(
                f"No event {data.source_event_id} in this tenant.", field=f"{prefix}source_event_id"
            )


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
    memory: its steps, and the async path, are the module's docstring. With ``batch`` (the caller
    sent an array) a domain error names its item: ``memories[<i>].<field>``. Each item's
    ``data_subject`` is ``agents.subjects.subject_written``'s (a bound key's subject; another one
    raises ``SubjectRefused``, 403).
    Raises ``InvalidInput`` for blank content, out-of-range values, an unknown source event or agent,
    a malformed fact hint, and ``EmbeddingMismatch`` for a supplied vector of another model or
    dimension; ``EmbedderUnavailable`` when the embedder is down (nothing is stored).
    """
    embedder = embedder or get_embedder()
    prefixes = [f"memories[{i}]." if batch else "" for i in range(len(items))]
    items = [
        replace(d, data_subject=subject_written(agent, d.data_subject, field=f"{p}data_subject"))
        for d, p in zip(items, prefixes, strict=True)
    ]
    _validate_all(items, prefixes)
    audiences = _audiences(items, prefixes)
    digests = [content_hash(d.content) for d in items]
    supplied = _supplied_vectors(items, prefixes, embedder=embedder, batch=batch)
    vectors: dict[int, np.ndarray] = dict(supplied)
    stating = any(d.supersedes is not None for d in items)
    one_statement = len(items) == 1 and not stating and not connection.in_atomic_block
    if write == "async" and len(items) == 1 and not supplied and not stating:
        memory = _pending_accept(
            agent=agent, data=items[0], digest=digests[0], audience=audiences[0], embedder=embedder
        )
        if memory is not None:
            return [WriteResult(memory, "accepted")]
    # a single write's text is embedded on another core while the exact-duplicate lookup waits (the
    # model and psycopg release the GIL); a batch is embedded after the lookup, without duplicates
    early: Future[np.ndarray] | None = None
    if write == "sync" and len(items) == 1 and 0 not in vectors:
        early = _EMBEDDING.submit(embedder.embed, [items[0].content])
    for attempt in (0, 1):
        exact = _exact_matches(agent, items, digests)
        if write == "sync":
            _embed_missing(vectors, items=items, exact=exact, embedder=embedder, early=early)
        try:
            written = vectors if write == "sync" else supplied
            planned: list[Match | None] | None = None  # the single write's near-duplicate plan, when made
            if one_statement and exact[0] is None and 0 in written:
                fast = _single_write(
                    agent=agent,
                    data=items[0],
                    digest=digests[0],
                    audience=audiences[0],
                    vector=written[0],
                    embedder=embedder,
                    policy=policy,
                )
                if isinstance(fast, WriteResult):
                    return [fast]
                planned = fast
            with transaction.atomic():
                return _write(
                    agent=agent,
                    items=items,
                    prefixes=prefixes,
                    digests=digests,
                    audiences=audiences,
                    exact=exact,
                    vectors=written,
                    embedder=embedder,
                    policy=policy,
                    planned=planned,
                )
        except IntegrityError:
            if attempt:
                raise
    raise AssertionError("unreachable")


def _supplied_vectors(
    items: Sequence[MemoryData], prefixes: Sequence[str], *, embedder: Embedder, batch: bool
) -> dict[int, np.ndarray]:
    """The vectors the caller sent, by item index, each checked against ``embedder`` (its model and
    dimension; a model named without a vector must be the embedder's). Raises what ``check_vector``
    raises, the field prefixed by the item's ``prefixes`` entry for a ``batch``."""
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
    return supplied


def _embed_missing(
    vectors: dict[int, np.ndarray],
    *,
    items: Sequence[MemoryData],
    exact: Sequence[Match | None],
    embedder: Embedder,
    early: Future[np.ndarray] | None,
) -> None:
    """Add to ``vectors`` those of the items that have none and are no exact duplicate: a single
    write's from ``early`` (raising what the embedder raised), a batch's in one model call, outside
    the transaction."""
    missing = [i for i in range(len(items)) if i not in vectors and exact[i] is None]
    if missing and early is not None:
        vectors[0] = early.result()[0]
    elif missing:
        for i, vector in zip(missing, embedder.embed([items[i].content for i in missing]), strict=True):
            vectors[i] = vector


def _exact_matches(agent: Agent, items: Sequence[MemoryData], digests: Sequence[str]) -> list[Match | None]:
    """Step 1 of ``memories_create``: each item's exact duplicate, stored (one query) or an earlier
    item of the batch."""
    stored = live_content_ids(
        agent=agent,
        scopes={d.scope for d in items},
        subjects={d.data_subject for d in items},
        digests=set(digests),
    )
    first: dict[tuple[str, str, str], int] = {}
    out: list[Match | None] = []
    for i, (data, digest) in enumerate(zip(items, digests, strict=True)):
        key = (data.scope, data.data_subject, digest)
        if key in stored:
            out.append(Match("exact", 1.0, memory_id=stored[key]))
        elif key in first:
            out.append(Match("exact", 1.0, item=first[key]))
        else:
            first[key] = i
            out.append(None)
    return out


def _create_unless_near(
    *,
    memory: SemanticMemory,
    text: str,
    now: datetime,
    stability: float,
    embedder: Embedder,
    policy: RetrievalPolicy,
) -> list[NearCandidate]:
    """The unsaved ``memory`` of a single write that is no exact duplicate, in one statement outside
    any transaction (its implicit one makes it all or nothing): the near-duplicate lookup
    (``near_sql``) and, when it finds nothing, the row and its access clock (``text``: the vector's
    ``vector_text``; ``insert_params``' ``now`` and ``stability``). Returns the near memories the
    lookup found (nothing written), or none (stored). One round trip for the common case (decision
    0040), a prepared statement's ``EXECUTE`` under its generic plan: no parse, no plan per write
    (their ~0.35 ms were a third of the statement's time, decision 0118)."""
    assert not connection.in_atomic_block  # the options are the implicit transaction's
    sql = (
        f"{near_sql(int(embedder.dimensions))}, "
        f"ins AS ({INSERT_ROWS.format(where='WHERE NOT EXISTS (SELECT FROM near)', conflict='')}), acc AS ({INSERT_ACCESS}) "
        "SELECT id, similarity, content, data_subject FROM near"
    )
    params = near_params([(memory.agent_id, memory.scope, memory.data_subject)], [text], embedder, policy)
    params += insert_params({0: memory}, texts={0: text}, now=now, stability=stability)
    with connection.cursor() as cursor:
        execute_prepared(cursor, sql, params, before=NEAR_OPTIONS + GENERIC_PLAN)
        return [
            NearCandidate(pk, float(sim), content, subject) for pk, sim, content, subject in cursor.fetchall()
        ]


def _single_write(
    *,
    agent: Agent,
    data: MemoryData,
    digest: str,
    audience: tuple[list[int], list[str]],
    vector: np.ndarray,
    embedder: Embedder,
    policy: RetrievalPolicy,
) -> WriteResult | list[Match | None]:
    """A single write that is no exact duplicate, outside any transaction: ``_create_unless_near``,
    and when it finds near memories, the rule's plan (``dedup_plan``, given that lookup). A write the
    rule stores beside them (neither a duplicate nor an update) is inserted by one statement, whose
    implicit transaction makes it all or nothing, as the lookup's is: nothing else changes, so no
    transaction of its own (a ``BEGIN`` and a ``COMMIT``: two more round trips, decision 0110).
    Returns the created memory, or the plan (one entry: the duplicate reinforced or the memory
    updated) for the caller's transaction. Raises ``IntegrityError`` when a concurrent write stored
    the same text first (the caller plans again)."""
    now = timezone.now()
    stability = consolidation_policy().initial_stability_hours
    memory = new_memory(
        agent=agent,
        data=data,
        index=0,
        digest=digest,
        audience=audience,
        vector=vector,
        embedder=embedder,
        now=now,
    )
    text = vector_text(vector)
    near = _create_unless_near(
        memory=memory, text=text, now=now, stability=stability, embedder=embedder, policy=policy
    )
    if near:
        plan = _near_plan(
            agent=agent,
            items=[data],
            exact=[None],
            vectors={0: vector},
            texts={0: text},
            embedder=embedder,
            policy=policy,
            nearest=[near],
        )
        if plan[0] is not None:
            return plan
        with connection.cursor() as cursor:
            execute_prepared(
                cursor, INSERT_SQL, insert_params({0: memory}, texts={0: text}, now=now, stability=stability)
            )
    mark_saved({0: memory}, agent=agent, now=now, stability=stability)
    return WriteResult(memory, "created")


def _near_plan(
    *,
    agent: Agent,
    items: Sequence[MemoryData],
    exact: Sequence[Match | None],
    vectors: dict[int, np.ndarray],
    texts: dict[int, str],
    embedder: Embedder,
    policy: RetrievalPolicy,
    stated: dict[int, SemanticMemory] | None = None,
    nearest: list[list[NearCandidate]] | None = None,
) -> list[Match | None]:
    """Step 2 of ``memories_create``: ``dedup_plan`` over the items that are no exact duplicate and
    state no update (``stated``), ``nearest`` the single write's lookup when made."""
    n = len(items)
    stated = stated or {}
    return dedup_plan(
        owners=[(agent.pk, d.scope, d.data_subject) for d in items],
        vectors=[vectors.get(i) for i in range(n)],
        contents=[d.content for d in items],
        embedder=embedder,
        policy=policy,
        # an update the caller states is stored as said (unless it repeats a memory word for word)
        skip=[exact[i] is not None or i in stated for i in range(n)],
        texts=[texts.get(i) for i in range(n)],
        nearest=nearest,
    )


def _pending_accept(
    *, agent: Agent, data: MemoryData, digest: str, audience: tuple[list[int], list[str]], embedder: Embedder
) -> SemanticMemory | None:
    """Store one async write as a pending memory with its access clock, in one statement outside a
    transaction (its implicit one is the commit: one round trip, decision 0040), unless it is an
    exact duplicate: the insert does nothing when a live memory of the agent has the same scope,
    data subject and ``content_hash`` (the unique constraint ``semantic_live_content_uniq``, which is step 1's rule),
    and None is returned for the pipeline to reinforce that memory. Queues the worker's drain on
    commit."""
    now = timezone.now()
    memory = new_memory(
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
    unless_duplicate = INSERT_ROWS.format(where="", conflict="ON CONFLICT DO NOTHING")
    with connection.cursor() as cursor:
        execute_prepared(
            cursor,
            f"WITH ins AS ({unless_duplicate}) {INSERT_ACCESS} RETURNING memory_id",
            insert_params(created, texts={}, now=now, stability=stability),
        )
        if cursor.fetchone() is None:
            return None
    mark_saved(created, agent=agent, now=now, stability=stability)
    transaction.on_commit(embed_schedule, robust=True)
    return memory


def _write(
    *,
    agent: Agent,
    items: Sequence[MemoryData],
    prefixes: Sequence[str],
    digests: Sequence[str],
    audiences: Sequence[tuple[list[int], list[str]]],
    exact: Sequence[Match | None],
    vectors: dict[int, np.ndarray],
    embedder: Embedder,
    policy: RetrievalPolicy,
    planned: list[Match | None] | None = None,
) -> list[WriteResult]:
    """Steps 2 and 3 of ``memories_create`` inside its transaction, and the updates: the memories
    the items state they supersede (locked first) and those ``dedup_plan`` finds (``planned``: the
    single write's plan, made already by ``_single_write``)."""
    n = len(items)
    stated = stated_targets(
        agent=agent, wanted=[(d.supersedes, d.data_subject, d.scope) for d in items], prefixes=prefixes
    )
    texts = {i: vector_text(v) for i, v in vectors.items()}  # formatted once: lookup and insert
    near = planned or _near_plan(
        agent=agent,
        items=items,
        exact=exact,
        vectors=vectors,
        texts=texts,
        embedder=embedder,
        policy=policy,
        stated=stated,
    )
    updates = {i: m for i, m in enumerate(near) if m is not None and m.outcome == "update"}
    plan = [exact[i] or (None if i in updates else near[i]) for i in range(n)]
    now = timezone.now()
    stability = consolidation_policy().initial_stability_hours
    created: dict[int, SemanticMemory] = {}
    for i, data in enumerate(items):
        if plan[i] is None:
            created[i] = new_memory(
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
            execute_prepared(
                cursor, INSERT_SQL, insert_params(created, texts=texts, now=now, stability=stability)
            )
        mark_saved(created, agent=agent, now=now, stability=stability)
        if any(m.embedding is None for m in created.values()):
            transaction.on_commit(embed_schedule, robust=True)
    return _results(
        agent=agent,
        items=items,
        audiences=audiences,
        plan=plan,
        created=created,
        updates=updates,
        stated=stated,
        now=now,
    )


def _results(
    *,
    agent: Agent,
    items: Sequence[MemoryData],
    audiences: Sequence[tuple[list[int], list[str]]],
    plan: Sequence[Match | None],
    created: dict[int, SemanticMemory],
    updates: dict[int, Match],
    stated: dict[int, SemanticMemory],
    now: datetime,
) -> list[WriteResult]:
    """The end of ``_write``: the duplicates reinforce what they match, the updates supersede the
    memories they replace (``memories_supersede``), one ``WriteResult`` per item."""

    def target(match: Match) -> Any:
        """The memory a duplicate reinforces or an update replaces: a stored one, or the one an
        earlier item created (or, when that item was itself a duplicate, what it reinforced)."""
        while match.item is not None:
            if match.item in created:
                return created[match.item].pk
            earlier = plan[match.item]
            assert earlier is not None
            match = earlier
        return match.memory_id

    targets = [(target(m), items[i], audiences[i]) for i, m in enumerate(plan) if m is not None]
    reinforced = memories_reinforce(targets, agent=agent)
    results: list[WriteResult] = []
    changes: list[Supersession] = []
    for i, match in enumerate(plan):
        if match is None:
            memory = created[i]
            outcome: Literal["created", "accepted", "exact", "near"] = (
                "created" if memory.embedding is not None else "accepted"
            )
            similarity = None
        else:
            assert match.outcome != "update"  # an update is created: no plan entry
            memory, outcome, similarity = reinforced[target(match)], match.outcome, match.similarity
        old: Any = None
        if i in stated and stated[i].pk != memory.pk:
            old = stated[i].pk
            changes.append(Supersession(old, memory, "stated"))
        elif i in updates:
            old = target(updates[i])
            changes.append(Supersession(old, memory, "detected", updates[i].similarity))
            similarity = updates[i].similarity
        results.append(WriteResult(memory, outcome, similarity, supersedes=old))
    memories_supersede(agent=agent, changes=changes, now=now)
    return results


def embed_scheduled_key() -> str:
    """The current tenant's Redis flag ``{<schema>}:semantic:embed:scheduled``: set while a drain of
    its pending memories is queued and has not started yet."""
    return tenant_key("semantic", "embed", "scheduled")


def embed_schedule() -> None:
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
