"""The data lifecycle's map of the stores: how each layer finds the rows of a target (a data
subject, a session, an agent, a tag, an entity), how long it keeps them and from when, and how it
removes them. Retention, legal holds and erasure all read this one table (``LAYERS``): a new layer
(procedural skills, say) takes part in all three by adding its ``Layer`` here. What a legal hold
keeps is ``unheld``, which every hard delete asks (the layers through ``core.holds``).

``STORES`` is the wider map: every place the tenant's data lives (the layers' tables and those
removed with them, the replay cache, export archives, Redis's copies and files, task results, the
planner's statistics, and what no erasure reaches at once), each with its erasure and its check in
the verification pass; every model of the project is in a store or in ``NO_PERSONAL_DATA``.

Also here: the erasure's steps over the layers (``erase_*``), its verification pass, and the
receipt it signs. ``compliance.services`` runs them and records them in the trail.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.db import DatabaseError, connection, models, transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from agents.models import IdempotencyRecord
from core.canonical_json import canonical_json
from core.fulltext import identifier_pattern
from core.locks import advisory_lock
from core.tenancy import maintenance
from memory.checkpoints.models import Checkpoint, CheckpointWrite
from memory.checkpoints.services import checkpoints_erase
from memory.consolidation.models import Promotion, PromotionOutcome, SummaryNode
from memory.consolidation.services import promotions_detach, promotions_erase, summaries_erase
from memory.episodic.models import REDACTION_ACTION, ChainHead, Event, EventKind
from memory.knowledge.models import (
    Contradiction,
    Entity,
    Fact,
    FactProvenance,
    FactStatus,
    GraphOutbox,
    entity_key,
)
from memory.knowledge.services import facts_erase
from memory.procedural.models import SkillRun
from memory.procedural.services import skill_runs_erase
from memory.semantic.models import (
    AGENT_MEMORY_TYPES,
    LexicalPosting,
    MemoryAccess,
    MemoryContext,
    MemoryType,
    SemanticMemory,
)
from memory.semantic.services.erase import memories_erase
from memory.store.models import StoreItem
from memory.store.services import items_erase
from memory.working.services import keys_holding, working_memory_erase

from . import copies
from .models import ErasureRequest, Export, LegalHold, RetentionRule, TargetKind
from .redaction import events_redact_decided

DAY = timedelta(days=1)


@dataclass(frozen=True)
class Removed:
    """What one batch removed from a layer: ``ids`` (seqs for events), the ``sessions`` the rows were
    in (their working memory in Redis goes too), and extra facts for the receipt (``details``)."""

    ids: list[Any]
    sessions: set[str] = field(default_factory=set)
    details: dict[str, list[Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Layer:
    """One store of memory, as the lifecycle sees it.

    ``targets``: for each ``TargetKind`` the layer has, the ``Q`` of its rows about a value (a kind
    it lacks selects nothing there). ``pending``: rows not removed yet (redacted events stay as
    rows). ``kinds``: memory types with retention rules of their own (``("",)``: one rule).
    ``default_days``: per kind, days kept when no rule is stored (``None``: kept by another
    mechanism, e.g. Redis TTLs). ``aged(cutoff, kind)``: rows past the cutoff, counted from
    ``counts_from``. ``remove(rows)``: delete or redact the rows of a batch (model instances with
    the ``load`` fields), for retention and erasure alike. ``like_sources``: derived rows kept as
    long as what they were made from, without rules of their own: ``aged`` then selects the rows
    whose sources were removed (by retention or an erasure), and every erasure removes those too.
    """

    name: str
    label: str
    model: type[models.Model] | None
    counts_from: str
    default_days: Mapping[str, int | None]
    targets: Mapping[str, Callable[[str], Q]] = field(default_factory=dict)
    kinds: tuple[str, ...] = ("",)
    pending: Q = field(default_factory=Q)
    aged: Callable[[datetime, str], Q] | None = None
    load: tuple[str, ...] = ("pk",)
    remove: Callable[[list[Any]], Removed] | None = None
    like_sources: bool = False

    def rows(self) -> QuerySet[Any]:
        assert self.model is not None
        return self.model._default_manager.filter(self.pending)


# --- the layers ----------------------------------------------------------------------------------------


def _events_remove(rows: list[Any]) -> Removed:
    seqs = events_redact_decided(event_ids=[r["pk"] for r in rows])
    digests = list(Event.objects.filter(seq__in=seqs).order_by("seq").values_list("body_digest", flat=True))
    return Removed(seqs, {r["session_id"] for r in rows}, {"body_digests": digests})


def _memories_remove(rows: list[Any]) -> Removed:
    ids = [r["pk"] for r in rows]
    promotions = promotions_erase(memory_ids=ids)  # their facts went first (knowledge's targets)
    erased = memories_erase(memory_ids=ids)
    sessions = {r["session_id"] for r in rows if r["session_id"]}
    return Removed(
        erased, sessions, {"content_hashes": [r["content_hash"] for r in rows], "promotion_ids": promotions}
    )


def _store_items_remove(rows: list[Any]) -> Removed:
    items, memories = items_erase(item_ids=[r["pk"] for r in rows])
    return Removed(items, set(), {"memory_ids": memories})


def _facts_remove(rows: list[Any]) -> Removed:
    ids = [r["pk"] for r in rows]
    detached = promotions_detach(fact_ids=ids)  # kept, so their memories are never promoted again
    erased = facts_erase(fact_ids=ids)
    sessions = {r["session_id"] for r in rows if r["session_id"]}
    return Removed(
        erased.fact_ids, sessions, {"entity_ids": erased.entity_ids, "promotions_detached": detached}
    )


def _summaries_remove(rows: list[Any]) -> Removed:
    erased = summaries_erase(node_ids=[r["pk"] for r in rows])
    return Removed(
        erased.node_ids, set(), {"memory_ids": erased.memory_ids, "rebuilt_sessions": erased.sessions}
    )


def _skill_runs_remove(rows: list[Any]) -> Removed:
    return Removed(skill_runs_erase(run_ids=[r["pk"] for r in rows]))


def _memories_about(kind: str) -> Callable[[str], Q]:
    """The semantic layer's rows of a target, as a subquery (for derived rows that name them)."""

    def select(value: str) -> Q:
        q = target_q(layer_get("semantic"), kind, value)
        return Q(pk__in=[]) if q is None else Q(pk__in=SemanticMemory.objects.filter(q).values("pk"))

    return select


def _facts_of(kind: str, own: Callable[[str], Q]) -> Callable[[str], Q]:
    """Facts of a target: its own, and those a promotion made from the target's memories (the
    fact was derived from them; a promotion that reinforced someone else's fact made nothing)."""

    def select(value: str) -> Q:
        memories = _memories_about(kind)(value)
        made = list(
            Promotion.objects.filter(
                outcome__in=[PromotionOutcome.CREATED, PromotionOutcome.DISPUTED], fact__isnull=False
            )
            .filter(memory__in=SemanticMemory.objects.filter(memories).values("pk"))
            .values_list("fact_id", flat=True)
        )
        # the ids, not a subquery: "subject = v OR id IN (list)" is two index scans, where an OR
        # with a subquery would scan the whole table
        return own(value) | Q(pk__in=made) if made else own(value)

    return select


def _summaries_covering(events: Callable[[str], Q]) -> Callable[[str], Q]:
    """Summary nodes covering an event (not redacted) that ``events(value)`` selects."""

    def select(value: str) -> Q:
        covered = Event.objects.filter(
            events(value),
            session_id=OuterRef("session_id"),
            seq__gte=OuterRef("first_seq"),
            seq__lte=OuterRef("last_seq"),
            redacted_at__isnull=True,
        )
        return Q(Exists(covered))

    return select


def _summaries_stale(_cutoff: datetime, _kind: str) -> Q:
    """Summary nodes that summarised an event since redacted: fewer events of their range are left
    unredacted than they counted (a node only ever summarises unredacted events, so one rebuilt
    after a redaction is not stale). Their text may hold the erased content."""
    left = (
        Event.objects.filter(
            session_id=OuterRef("session_id"),
            seq__gte=OuterRef("first_seq"),
            seq__lte=OuterRef("last_seq"),
            redacted_at__isnull=True,
        )
        .order_by()
        .values("session_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Q(event_count__gt=Coalesce(Subquery(left), 0))


def _runs_in_sessions_of(value: str) -> Q:
    """Skill runs reported in a session holding the subject's events (a run has no subject of its
    own; its error text is about whom the session was, as its working memory is)."""
    sessions = Event.objects.filter(data_subject=value, redacted_at__isnull=True).values("session_id")
    return Q(session_id__in=sessions) & ~Q(session_id="")


def _checkpoints_remove(rows: list[Any]) -> Removed:
    ids, keys = checkpoints_erase(checkpoint_ids=[r["pk"] for r in rows])
    return Removed(ids, {r["session_id"] for r in rows}, {"redis_keys": keys})


def _entity_facts(value: str) -> Q:
    key = entity_key(value)
    return Q(subject__key=key) | Q(object_entity__key=key)


def _session_quiet_since(cutoff: datetime, _kind: str) -> Q:
    """Checkpoints of sessions whose last checkpoint (of any agent) is older than ``cutoff``."""
    newer = Checkpoint.objects.filter(session_id=OuterRef("session_id"), created_at__gte=cutoff)
    return Q(created_at__lt=cutoff) & ~Q(Exists(newer))


SEMANTIC_DAYS = 90
AGENT_TYPES = tuple(value for value, _ in AGENT_MEMORY_TYPES)

LAYERS: tuple[Layer, ...] = (
    Layer(
        name="episodic",
        label="episodic events",
        model=Event,
        counts_from="when the event occurred; removal redacts (content, payload and salt go, the "
        "chained digest stays)",
        default_days={"": 7 * 365},
        targets={
            TargetKind.SUBJECT: lambda v: Q(data_subject=v),
            TargetKind.SESSION: lambda v: Q(session_id=v),
            TargetKind.AGENT: lambda v: Q(agent__name=v),
        },
        # a decision that accounts for redactions stays whole (the chain check reads it)
        pending=Q(redacted_at__isnull=True)
        & ~Q(kind=EventKind.DECISION, payload_index__contains={"action": REDACTION_ACTION}),
        aged=lambda cutoff, _kind: Q(occurred_at__lt=cutoff),
        load=("pk", "session_id"),
        remove=_events_remove,
    ),
    Layer(
        name="semantic",
        label="semantic memories",
        model=SemanticMemory,
        counts_from="the memory's last access (recall restarts the clock); the summary tree's "
        "summaries are kept like their sources (see summary nodes)",
        default_days={t: SEMANTIC_DAYS for t in AGENT_TYPES},
        kinds=AGENT_TYPES,
        # a summary of the tree is kept like its sources (the "summaries" layer removes it with
        # its node); only a summary of no node (an agent's own) is the semantic layer's. The
        # store's linked rows are the store layer's (removed with their items).
        pending=(~Q(memory_type=MemoryType.SUMMARY) | Q(summary_node__isnull=True))
        & ~Q(memory_type=MemoryType.STORE),
        targets={
            TargetKind.SUBJECT: lambda v: Q(data_subject=v),
            TargetKind.SESSION: lambda v: Q(session_id=v),
            TargetKind.AGENT: lambda v: Q(agent__name=v),
            TargetKind.TAG: lambda v: Q(tags__contains=[v]),
        },
        aged=lambda cutoff, kind: (
            Q(memory_type=kind)
            & (Q(access__last_accessed_at__lt=cutoff) | Q(access__isnull=True, created_at__lt=cutoff))
        ),
        load=("pk", "session_id", "content_hash"),
        remove=_memories_remove,
    ),
    Layer(
        name="knowledge",
        label="knowledge facts",
        model=Fact,
        counts_from="when the fact was retracted or superseded (live facts are kept)",
        default_days={"": 365},
        targets={
            TargetKind.SUBJECT: _facts_of(TargetKind.SUBJECT, lambda v: Q(data_subject=v)),
            TargetKind.SESSION: _facts_of(TargetKind.SESSION, lambda v: Q(session_id=v)),
            TargetKind.AGENT: _facts_of(TargetKind.AGENT, lambda v: Q(agent__name=v)),
            TargetKind.TAG: _facts_of(TargetKind.TAG, lambda v: Q(pk__in=[])),
            TargetKind.ENTITY: _entity_facts,
        },
        aged=lambda cutoff, _kind: Q(
            status__in=[FactStatus.RETRACTED, FactStatus.SUPERSEDED], ended_at__lt=cutoff
        ),
        load=("pk", "session_id"),
        remove=_facts_remove,
    ),
    Layer(
        name="checkpoints",
        label="checkpoints",
        model=Checkpoint,
        counts_from="the session's last checkpoint (a session's checkpoints go together)",
        default_days={"": 30},
        targets={
            TargetKind.SUBJECT: lambda v: Q(data_subject=v),
            TargetKind.SESSION: lambda v: Q(session_id=v),
            TargetKind.AGENT: lambda v: Q(agent__name=v),
        },
        aged=_session_quiet_since,
        load=("pk", "session_id"),
        remove=_checkpoints_remove,
    ),
    Layer(
        name="summaries",
        label="summary nodes",
        model=SummaryNode,
        counts_from="their sources: a node goes with the events it covers (redacted by retention or "
        "an erasure), with its summary memory, and the session's tree is rebuilt from the events left",
        default_days={"": None},
        like_sources=True,
        targets={
            TargetKind.SUBJECT: _summaries_covering(lambda v: Q(data_subject=v)),
            TargetKind.SESSION: lambda v: Q(session_id=v),
            TargetKind.AGENT: _summaries_covering(lambda v: Q(agent__name=v)),
        },
        aged=_summaries_stale,
        remove=_summaries_remove,
    ),
    Layer(
        name="procedural",
        label="skill run reports",
        model=SkillRun,
        counts_from="when the run was reported (skills and their versions are operators' work, "
        "kept; the versions' run counters stay)",
        default_days={"": 365},
        targets={
            TargetKind.SUBJECT: _runs_in_sessions_of,
            TargetKind.SESSION: lambda v: Q(session_id=v),
            TargetKind.AGENT: lambda v: Q(agent__name=v),
        },
        aged=lambda cutoff, _kind: Q(reported_at__lt=cutoff),
        remove=_skill_runs_remove,
    ),
    Layer(
        name="store",
        label="store items (LangGraph)",
        model=StoreItem,
        counts_from="the item's last write (a put restarts it); an item's own TTL deletes it "
        "sooner; its indexed text and vector go with it",
        default_days={"": None},
        targets={
            TargetKind.SUBJECT: lambda v: Q(data_subject=v),
            TargetKind.AGENT: lambda v: Q(created_by__name=v) | Q(updated_by__name=v),
        },
        aged=lambda cutoff, _kind: Q(updated_at__lt=cutoff),
        remove=_store_items_remove,
    ),
    Layer(
        name="working",
        label="working memory (Redis)",
        model=None,
        counts_from="its TTLs (the tenant's working-memory policy); erasure deletes the working "
        "memory of the sessions erased",
        default_days={"": None},
    ),
)

LAYER_NAMES = tuple(layer.name for layer in LAYERS)


def layer_get(name: str) -> Layer:
    """The layer called ``name``; ``KeyError`` for another name."""
    for layer in LAYERS:
        if layer.name == name:
            return layer
    raise KeyError(name)


def stored_layers() -> tuple[Layer, ...]:
    """The layers with rows in PostgreSQL (the ones retention and erasure walk)."""
    return tuple(layer for layer in LAYERS if layer.model is not None)


# --- targets and holds -----------------------------------------------------------------------------------


def normalise_value(kind: str, value: str) -> str:
    """A target value as stored: trimmed; for a tenant, empty."""
    return "" if kind == TargetKind.TENANT else value.strip()


def target_q(layer: Layer, kind: str, value: str) -> Q | None:
    """The rows of ``layer`` about (``kind``, ``value``): ``Q()`` (all) for the tenant, ``None``
    when the layer holds nothing of that kind."""
    if kind == TargetKind.TENANT:
        return Q()
    select = layer.targets.get(kind)
    return None if select is None else select(value)


def active_holds() -> list[LegalHold]:
    return list(LegalHold.objects.filter(released_at__isnull=True).order_by("pk"))


def held_q(layer: Layer, holds: Sequence[LegalHold]) -> Q | None:
    """The rows of ``layer`` under any of ``holds`` (``Q()`` = all of them, ``None`` = none)."""
    parts = [q for h in holds if (q := target_q(layer, h.kind, h.value)) is not None]
    if not parts:
        return None
    if any(not q for q in parts):  # a tenant-wide hold
        return Q()
    combined = parts[0]
    for q in parts[1:]:
        combined |= q
    return combined


def unheld(layer_name: str, rows: QuerySet[Any]) -> tuple[QuerySet[Any], list[str]]:
    """``rows`` of the layer ``layer_name`` less those an active hold covers, and the holds covering
    any of them (described as ``legal hold #N on subject X (reason)``). The one rule of what a hold
    keeps: every hard delete asks it, retention directly and the layers through
    ``core.holds.holds_check`` (registered by ``compliance.apps``)."""
    layer = layer_get(layer_name)
    covering = [
        hold
        for hold in active_holds()
        if (q := target_q(layer, hold.kind, hold.value)) is not None and rows.filter(q).exists()
    ]
    held = held_q(layer, covering)
    if held is None:
        return rows, []
    return (rows.none() if not held else rows.exclude(held)), [f"{h} ({h.reason})" for h in covering]


def holds_meeting(kind: str, value: str) -> list[LegalHold]:
    """The active holds an erasure of (``kind``, ``value``) would touch: a tenant-wide hold, a hold
    on the same target, or one on another target that shares a row with it in some layer (a hold on
    session S meets the erasure of a subject with an event in S)."""
    met = []
    for hold in active_holds():
        same = hold.kind == kind and (
            entity_key(hold.value) == entity_key(value) if kind == TargetKind.ENTITY else hold.value == value
        )
        if hold.kind == TargetKind.TENANT or same:
            met.append(hold)
            continue
        for layer in stored_layers():
            mine, theirs = target_q(layer, kind, value), target_q(layer, hold.kind, hold.value)
            if mine is None or theirs is None:
                continue
            if layer.rows().filter(mine).filter(theirs).exists():
                met.append(hold)
                break
    return met


# --- retention ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleInEffect:
    """The retention of one layer and kind: ``days`` (``None``: not by age), and whether it comes
    from a stored rule or the layer's default."""

    layer: str
    kind: str
    days: int | None
    stored: bool


def rules_in_effect() -> list[RuleInEffect]:
    """Every layer's retention per kind: its own stored rule, else the layer's stored rule for
    every kind (``memory_type`` empty), else the declared default."""
    stored = {(r.layer, r.memory_type): r.keep_days for r in RetentionRule.objects.all()}
    result = []
    for layer in LAYERS:
        for kind in layer.kinds:
            if (layer.name, kind) in stored:
                result.append(RuleInEffect(layer.name, kind, stored[(layer.name, kind)], True))
            elif (layer.name, "") in stored:
                result.append(RuleInEffect(layer.name, kind, stored[(layer.name, "")], True))
            else:
                result.append(RuleInEffect(layer.name, kind, layer.default_days.get(kind), False))
    return result


def retention_candidates(layer: Layer, *, now: datetime) -> QuerySet[Any] | None:
    """The rows of ``layer`` its retention removes at ``now``, held rows left out; ``None`` when the
    layer is not kept by age (or everything is held)."""
    if layer.model is None or layer.aged is None:
        return None
    aged: Q | None = layer.aged(now, "") if layer.like_sources else None
    for rule in rules_in_effect() if not layer.like_sources else ():
        if rule.layer != layer.name or rule.days is None:
            continue
        q = layer.aged(now - rule.days * DAY, rule.kind)
        aged = q if aged is None else aged | q
    if aged is None:
        return None
    rows = layer.rows().filter(aged)
    if layer.like_sources:
        # a hold keeps its sources, which stay; the derived rows that summarised a removed
        # source go whatever the hold (their text holds it) and are rebuilt from what is kept
        return rows
    if held_q(layer, active_holds()) == Q():  # a tenant-wide hold: nothing of the layer goes
        return None
    return unheld(layer.name, rows)[0]


def retention_preview(*, now: datetime) -> dict[str, int | None]:
    """The dry run: per layer, how many rows retention would remove at ``now`` (``None``: the layer
    is not kept by age, or all of it is held)."""
    result: dict[str, int | None] = {}
    for layer in LAYERS:
        rows = retention_candidates(layer, now=now)
        result[layer.name] = None if rows is None else rows.count()
    return result


# --- erasure -----------------------------------------------------------------------------------------------


def value_digest(kind: str, value: str) -> str:
    """HMAC-SHA256 (hex) of ``<kind>:<value>`` under a key derived from ``SECRET_KEY``: names an
    erased target without keeping it, and cannot be brute-forced back without the secret."""
    key = hashlib.sha256(b"engram-erasure:" + str(settings.SECRET_KEY).encode()).digest()
    return hmac.new(key, f"{kind}:{value}".encode(), "sha256").hexdigest()


def keyed_digest(text: str) -> str:
    """HMAC-SHA256 (hex) of ``text`` under the erasure key (see ``value_digest``)."""
    return value_digest("content", text)


def erase_q(layer: Layer, kind: str, value: str) -> Q | None:
    """The rows of ``layer`` an erasure of (``kind``, ``value``) removes: the target's rows and, for a
    layer kept like its sources, the rows whose sources are gone; ``None`` when it removes none."""
    if layer.remove is None:
        return None
    q = target_q(layer, kind, value)
    if layer.like_sources and layer.aged is not None:
        stale = layer.aged(timezone.now(), "")
        q = stale if q is None else q | stale
    return q


# Ids read per round of an erasure: whatever the target's size, the query is the same indexed one
# (its LIMIT far above the rows it expects, so the planner never trades the target's index for a
# scan in key order that walks past a million rows of others to find each batch).
ERASE_ROUND = 100_000


def erase_candidates(layer: Layer, kind: str, value: str) -> list[Any]:
    """The primary keys of (at most ``ERASE_ROUND``) rows an erasure of (``kind``, ``value``) still
    has to remove from ``layer``, in one query through the target's index."""
    q = erase_q(layer, kind, value)
    if q is None:
        return []
    return list(layer.rows().filter(q).values_list("pk", flat=True)[:ERASE_ROUND])


def erase_rows(layer: Layer, kind: str, value: str, pks: Sequence[Any]) -> Removed | None:
    """Remove those of ``pks`` that are still rows of the target in ``layer`` (by primary key, so
    a batch costs what its rows cost); ``None`` when none is left. Call inside a transaction."""
    q = erase_q(layer, kind, value)
    if q is None or not pks:
        return None
    rows = list(layer.rows().filter(pk__in=list(pks)).filter(q).values(*layer.load))
    if not rows:
        return None
    assert layer.remove is not None
    return layer.remove(rows)


def entity_ids_of(value: str) -> list[int]:
    return list(Entity.objects.filter(key=entity_key(value)).values_list("pk", flat=True))


def erase_entity_rows(value: str) -> list[int]:
    """Delete the entity named ``value`` itself once its facts are gone (PostgreSQL and Neo4j)."""
    ids = entity_ids_of(value)
    if not ids:
        return []
    return facts_erase(fact_ids=[], entity_ids=ids).entity_ids


def erase_working_memory(
    *, sessions: Sequence[str], agent_ids: Sequence[int], needles: Sequence[str]
) -> list[str]:
    """Delete from Redis the working memory of ``sessions``, the scratchpads of ``agent_ids`` and
    every tenant key whose data holds one of ``needles`` (``keys_holding``: never by its name)."""
    extra = keys_holding(list(needles)) if needles else []
    return working_memory_erase(session_ids=list(sessions), agent_ids=list(agent_ids), keys=extra)


# the decision closing an execution records its final blackboard, values included
# (``memory.working.services.execution_close``): the trail's copy of the working memory
WORKING_MEMORY_RECORDS = Q(payload_index__action="execution_close")


def erase_working_memory_records(sessions: Sequence[str]) -> Removed | None:
    """Redact the trail's copies of the working memory an erasure deletes with ``sessions``: the
    decisions closing an execution in them (``WORKING_MEMORY_RECORDS``). Call inside a
    transaction, with the summary job paused (their summaries go next)."""
    rows = list(
        Event.objects.filter(WORKING_MEMORY_RECORDS, session_id__in=list(sessions), redacted_at__isnull=True)
        .order_by("seq")
        .values("pk", "session_id")
    )
    return _events_remove(rows) if rows else None


def vacuum(tables: Sequence[str], *, timings: dict[str, float] | None = None) -> list[str]:
    """``VACUUM (INDEX_CLEANUP ON, ANALYZE)`` each of ``tables``, so the dead tuples of erased rows
    and their index entries (the subject's id in its btree, the vectors in HNSW, the rows in GIN
    posting lists; GIN's keys need ``gin_rebuild``) are gone, not just invisible, and the
    planner's statistics sample only the rows left: they keep column values (most common values,
    histogram bounds), which may be the erased ones.
    ``INDEX_CLEANUP ON``, because the default (``AUTO``) skips the indexes when under 2% of the
    table's pages have dead tuples, as after erasing one person among millions, which would leave
    exactly what an erasure must remove. Needs autocommit (not inside a transaction); returns the
    tables vacuumed (none inside a transaction, as in tests that roll back). Runs as the tables'
    owner (the maintenance role): PostgreSQL skips a VACUUM by a tenant's role with only a
    warning. VACUUM reads only the pages the visibility map does not mark all-visible, so a
    table's cost is the pages the removal touched plus one pass over each of its indexes; ANALYZE
    reads a sample of at most 300 x default_statistics_target pages."""
    if connection.in_atomic_block:
        return []
    with maintenance(), connection.cursor() as cursor:
        for table in tables:
            started = time.monotonic()
            cursor.execute(f'VACUUM (INDEX_CLEANUP ON, ANALYZE) "{table}"')
            if timings is not None:
                timings[f"vacuum {table}"] = round(time.monotonic() - started, 3)
    return list(tables)


def gin_rebuild(tables: Sequence[str], *, timings: dict[str, float] | None = None) -> list[str]:
    """``REINDEX INDEX CONCURRENTLY`` every GIN index of ``tables`` (the full-text words of events,
    memory and skill tags, the store's namespace labels): GIN never removes a key from its entry
    tree, a VACUUM only empties its posting list, so the words of erased text and a person's id
    used as a label would stay in the index's pages, with no row behind them, until a rebuild.
    Concurrently: writes go on meanwhile; each costs a scan of its table. Needs autocommit (none
    inside a transaction); runs as the tables' owner. Returns the indexes rebuilt."""
    if connection.in_atomic_block or not tables:
        return []
    rebuilt = []
    # one rebuild of an index at a time: two erasures of the tenant would race on its copy
    with advisory_lock("gin-rebuild"), maintenance(), connection.cursor() as cursor:
        for index in gin_indexes(tables):
            started = time.monotonic()
            cursor.execute(f'REINDEX INDEX CONCURRENTLY "{index}"')
            rebuilt.append(index)
            if timings is not None:
                timings[f"reindex {index}"] = round(time.monotonic() - started, 3)
    return rebuilt


def gin_indexes(tables: Sequence[str]) -> list[str]:
    """The GIN indexes of ``tables`` (names in the current schema), sorted."""
    from core.tenancy import current_schema

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ic.relname FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid "
            "JOIN pg_am a ON a.oid = ic.relam JOIN pg_class tc ON tc.oid = i.indrelid "
            "JOIN pg_namespace n ON n.oid = tc.relnamespace "
            "WHERE a.amname = 'gin' AND n.nspname = %s AND tc.relname = ANY(%s) ORDER BY 1",
            [current_schema(), list(tables)],
        )
        return [row[0] for row in cursor.fetchall()]


def touched_tables(progress: Mapping[str, Any]) -> list[str]:
    """The tables an erasure removed rows from or changed (by its ``progress``), with those removed
    alongside (access clocks, lexical postings, provenance, entities, promotions, pending writes):
    the ones to vacuum."""

    def did(layer: str, key: str = "ids") -> bool:
        return bool(progress.get(layer, {}).get(key))

    tables: list[type[models.Model]] = []
    if did("episodic"):
        tables.append(Event)
    if did("semantic") or did("summaries", "memory_ids") or did("store", "memory_ids"):
        tables += [SemanticMemory, MemoryAccess, LexicalPosting, MemoryContext]
    if did("store"):
        tables.append(StoreItem)
    if did("knowledge") or did("knowledge", "entity_ids"):
        tables += [Fact, FactProvenance, Entity]
    if did("checkpoints"):
        tables += [Checkpoint, CheckpointWrite]
    if did("summaries"):
        tables.append(SummaryNode)
    if did("procedural"):
        tables.append(SkillRun)
    if did("semantic", "promotion_ids") or did("knowledge", "promotions_detached"):
        tables.append(Promotion)
    if progress.get("replay", {}).get("withdrawn"):
        tables.append(IdempotencyRecord)
    if did("records", "hold_ids"):
        tables += [LegalHold, LogEntry]
    return [model._meta.db_table for model in tables]


# --- the map of the stores and the verification pass ------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What an erasure erased, as its verification pass looks for it: the target and the run's
    ``progress`` (ids per layer, see ``compliance.services.erasure._progress_add``)."""

    kind: str
    value: str
    progress: Mapping[str, Any]

    def ids(self, layer: str, key: str = "ids") -> list[Any]:
        return list(self.progress.get(layer, {}).get(key, []))

    @property
    def memory_ids(self) -> list[Any]:
        return self.ids("semantic") + self.ids("summaries", "memory_ids") + self.ids("store", "memory_ids")

    @property
    def sessions(self) -> list[str]:
        """The sessions whose working memory the erasure deleted."""
        found = set(self.progress.get("sessions", []))
        return sorted(found | {self.value}) if self.kind == TargetKind.SESSION else sorted(found)

    @property
    def needles(self) -> list[str]:
        """Identifiers of the target searched in copies as whole identifiers: a data subject's id."""
        return [self.value] if self.kind == TargetKind.SUBJECT and self.value else []

    def erased(self) -> copies.Erased:
        return copies.Erased.of(self.progress, self.needles)


Counts = dict[str, dict[str, int]]


@dataclass(frozen=True)
class Store:
    """One place the tenant's data lives, as an erasure sees it: its ``models`` (the tables of a
    layer and those whose rows go with them; none for a store outside PostgreSQL), where it is
    (``system``), how an erasure removes the target from it (``erased``), and ``verify``: the
    verification pass's counts of what is left there, per system and check, each to be 0 (a
    ``postgres_notes`` entry is reported, not counted). ``verify`` is None only for a store no
    pass can look into; its ``lingers`` says what it keeps and until when (the receipt's
    ``lingering``)."""

    name: str
    label: str
    system: str
    erased: str
    verify: Callable[[Target], Counts] | None
    models: tuple[type[models.Model], ...] = ()
    lingers: str = ""


def _left(name: str, target: Target) -> int:
    layer = layer_get(name)
    q = target_q(layer, target.kind, target.value)
    return 0 if q is None else layer.rows().filter(q).count()


def _verify_episodic(target: Target) -> Counts:
    seqs = target.ids("episodic")
    pg = {"episodic_left": _left("episodic", target)}
    pg["events_with_body"] = (
        Event.objects.filter(seq__in=seqs)
        .filter(~Q(content="") | ~Q(payload_json="{}") | ~Q(body_salt="") | ~Q(data_subject=""))
        .count()
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {Event._meta.db_table} WHERE seq = ANY(%s) AND search <> ''::tsvector",
            [list(seqs)],
        )
        pg["events_fulltext"] = int(cursor.fetchone()[0])
    if target.kind == TargetKind.SUBJECT:
        pg["events_naming_subject"] = Event.objects.filter(data_subject=target.value).count()
    return {"postgres": pg}


def _verify_semantic(target: Target) -> Counts:
    memory_ids = target.memory_ids
    pg = {
        "semantic_left": _left("semantic", target),
        "memories": SemanticMemory.objects.filter(pk__in=memory_ids).count(),
        # neighbours' contexts built from an erased memory's text (the triggers rebuild them)
        "memory_contexts": MemoryContext.objects.filter(
            Q(memory_id__in=memory_ids) | Q(sources__overlap=list(memory_ids))
        ).count(),
    }
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {SemanticMemory._meta.db_table} WHERE id = ANY(%s::uuid[]) "
            "AND embedding IS NOT NULL",
            [list(memory_ids)],
        )
        embeddings = int(cursor.fetchone()[0])
    hashes = target.ids("semantic", "content_hashes")
    notes = {"same_content_elsewhere": SemanticMemory.objects.filter(content_hash__in=hashes).count()}
    return {"postgres": pg, "pgvector": {"embeddings": embeddings}, "postgres_notes": notes}


def _verify_knowledge(target: Target) -> Counts:
    pg = {
        "knowledge_left": _left("knowledge", target),
        "facts": Fact.objects.filter(pk__in=target.ids("knowledge")).count(),
        "entities": Entity.objects.filter(pk__in=target.ids("knowledge", "entity_ids")).count(),
    }
    if target.kind == TargetKind.ENTITY:
        pg["entity_named"] = Entity.objects.filter(key=entity_key(target.value)).count()
    return {"postgres": pg}


def _verify_promotions(target: Target) -> Counts:
    promotions = Promotion.objects.filter(
        Q(memory_id__in=target.memory_ids) | Q(fact_id__in=target.ids("knowledge"))
    ).count()
    return {"postgres": {"promotions": promotions}}


def _verify_graph(target: Target) -> Counts:
    from core.neo4j import get_driver, neo4j_guard
    from core.tenancy import current_schema

    driver = get_driver()
    if driver is None:
        return {}
    neo4j: dict[str, int] = {}
    tenant = current_schema()
    with neo4j_guard():
        records, _, _ = driver.execute_query(
            "MATCH ()-[r:FACT {tenant: $t}]->() WHERE r.fact_id IN $ids RETURN count(r) AS n",
            t=tenant,
            ids=target.ids("knowledge"),
        )
        neo4j["relationships"] = int(records[0]["n"])
        records, _, _ = driver.execute_query(
            "MATCH (n:Entity {tenant: $t}) WHERE n.id IN $ids RETURN count(n) AS n",
            t=tenant,
            ids=target.ids("knowledge", "entity_ids"),
        )
        neo4j["nodes"] = int(records[0]["n"])
        if target.kind == TargetKind.ENTITY:
            records, _, _ = driver.execute_query(
                "MATCH (n:Entity {tenant: $t}) WHERE toLower(n.name) = toLower($name) RETURN count(n) AS n",
                t=tenant,
                name=target.value,
            )
            neo4j["nodes_named"] = int(records[0]["n"])
    return {"neo4j": neo4j}


def _verify_checkpoints(target: Target) -> Counts:
    left = Checkpoint.objects.filter(pk__in=target.ids("checkpoints")).count()
    return {"postgres": {"checkpoints_left": _left("checkpoints", target), "checkpoints": left}}


def _verify_summaries(target: Target) -> Counts:
    return {
        "postgres": {
            "summaries_left": _left("summaries", target),
            "summary_nodes": SummaryNode.objects.filter(pk__in=target.ids("summaries")).count(),
            # a node written before a redaction of its range holds the erased text (rebuilt ones never do)
            "summaries_stale": SummaryNode.objects.filter(_summaries_stale(timezone.now(), "")).count(),
        }
    }


def _verify_procedural(target: Target) -> Counts:
    runs = SkillRun.objects.filter(pk__in=target.ids("procedural")).count()
    return {"postgres": {"procedural_left": _left("procedural", target), "skill_runs": runs}}


def _verify_store(target: Target) -> Counts:
    items = StoreItem.objects.filter(pk__in=target.ids("store")).count()
    return {"postgres": {"store_left": _left("store", target), "store_items": items}}


def _verify_working(target: Target) -> Counts:
    from core.redis import get_redis, redis_errors

    deleted = target.ids("redis", "keys") + target.ids("checkpoints", "redis_keys")
    redis: dict[str, int] = {}
    with redis_errors():
        redis["deleted_keys_back"] = int(get_redis().exists(*deleted)) if deleted else 0
    if target.kind == TargetKind.SUBJECT:
        redis["keys_naming_subject"] = len(keys_holding([target.value]))
    records = Event.objects.filter(
        WORKING_MEMORY_RECORDS, session_id__in=target.sessions, redacted_at__isnull=True
    ).count()
    return {"redis": redis, "postgres": {"working_memory_records": records}}


def _naming(texts: Sequence[str], needles: Sequence[str]) -> int:
    pattern = identifier_pattern(list(needles))
    return 0 if pattern is None else sum(1 for text in texts if pattern.search(text))


def _verify_replay(target: Target) -> Counts:
    watermark = target.progress.get("replay", {}).get("watermark")
    if watermark is None:
        kept = IdempotencyRecord.objects.filter(response_body__isnull=False).count()
    else:
        kept = IdempotencyRecord.objects.filter(pk__lte=watermark, response_body__isnull=False).count()
    pg = {"replay_answers_kept_from_before": kept}
    if target.needles:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT response_body::text FROM {IdempotencyRecord._meta.db_table} "
                "WHERE response_body IS NOT NULL AND response_body::text LIKE ANY(%s)",
                [[f"%{n}%" for n in target.needles]],
            )
            pg["replay_answers_naming_subject"] = _naming([r[0] for r in cursor.fetchall()], target.needles)
    return {"postgres": pg}


def _verify_exports(target: Target) -> Counts:
    return {"files": {"archives_holding_erased": len(copies.archives_holding(target.erased()))}}


def _verify_records(target: Target) -> Counts:
    if not target.needles:
        return {}
    from django.contrib.contenttypes.models import ContentType

    holds = LegalHold.objects.filter(kind=target.kind, value=target.value).count()
    logged = list(
        LogEntry.objects.filter(
            content_type=ContentType.objects.get_for_model(LegalHold), object_repr__contains=target.value
        ).values_list("object_repr", flat=True)
    )
    return {
        "postgres": {
            "legal_holds_naming_subject": holds,
            "admin_log_naming_subject": _naming(logged, target.needles),
        }
    }


def statistics_naming(needles: Sequence[str]) -> list[str]:
    """The tables of the current tenant whose planner statistics (``pg_stats``: most common values
    and elements, histogram bounds, those of their expression indexes too) hold one of ``needles`` as a whole
    identifier: ANALYZE samples them again (``vacuum``)."""
    pattern = identifier_pattern(list(needles))
    if pattern is None:
        return []
    from core.tenancy import current_schema

    like = [f"%{n}%" for n in needles]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(t.relname, c.relname), concat_ws(' ', s.most_common_vals::text, "
            "s.histogram_bounds::text, s.most_common_elems::text) FROM pg_stats s "
            "JOIN pg_namespace n ON n.nspname = s.schemaname "
            "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename "
            "LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = i.indrelid "
            "WHERE s.schemaname = %s AND (s.most_common_vals::text LIKE ANY(%s) "
            "OR s.histogram_bounds::text LIKE ANY(%s) OR s.most_common_elems::text LIKE ANY(%s))",
            [current_schema(), like, like, like],
        )
        return sorted({table for table, text in cursor.fetchall() if pattern.search(text)})


def statistics_forget(tables: Sequence[str]) -> list[str]:
    """After ``vacuum``: ANALYZE samples no row of an empty table, so it keeps the statistics it
    had, sampled from the rows an erasure removed (values of their columns). For each of
    ``tables`` that is empty (checked under an exclusive lock, waited for at most 5 s), every
    column with statistics is declared again with its own type, which drops them (an empty table:
    nothing to rewrite); a column that cannot be (a dependent view, say) keeps them, for the
    verification pass to find. Needs autocommit; returns the ``table.column`` done."""
    if connection.in_atomic_block:
        return []
    from core.tenancy import current_schema

    done = []
    with maintenance():
        for table in tables:
            try:
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '5s'")
                    cursor.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
                    cursor.execute(f'SELECT EXISTS (SELECT 1 FROM "{table}")')
                    if cursor.fetchone()[0]:
                        continue
                    cursor.execute(
                        "SELECT s.attname, format_type(a.atttypid, a.atttypmod) FROM pg_stats s "
                        "JOIN pg_namespace n ON n.nspname = s.schemaname "
                        "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename "
                        "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = s.attname "
                        "WHERE s.schemaname = %s AND s.tablename = %s",
                        [current_schema(), table],
                    )
                    for column, kind in cursor.fetchall():
                        try:
                            with transaction.atomic():
                                cursor.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" TYPE {kind}')
                            done.append(f"{table}.{column}")
                        except DatabaseError:
                            continue
            except DatabaseError:  # the lock was not granted in time: the verification pass tells
                continue
    return done


def _verify_statistics(target: Target) -> Counts:
    # the erasure samples them again by ANALYZE, which cannot run inside a transaction (tests
    # that roll back): there the statistics are what they were, and not the erasure's to check
    if not target.needles or connection.in_atomic_block:
        return {}
    return {"postgres": {"statistics_naming_subject": len(statistics_naming(target.needles))}}


def _verify_index_keys(target: Target) -> Counts:
    # rebuilt with the vacuum, which cannot run inside a transaction (tests that roll back)
    if connection.in_atomic_block:
        return {}
    wanted = set(gin_indexes(touched_tables(target.progress)))
    return {"postgres": {"gin_indexes_not_rebuilt": len(wanted - set(target.progress.get("reindexed", [])))}}


def _verify_celery(target: Target) -> Counts:
    if not target.needles:
        return {}
    return {"redis": {"task_results_naming_subject": len(copies.celery_results_holding(target.needles))}}


def _verify_redis_files(target: Target) -> Counts:
    return {
        "redis": {"files_not_rewritten": copies.redis_files_pending(target.progress.get("redis_files", {}))}
    }


def _layer_store(
    name: str, system: str, verify: Callable[[Target], Counts], *extra: type[models.Model]
) -> Store:
    layer = layer_get(name)
    assert layer.model is not None
    return Store(name, layer.label, system, "its layer's rows of the target", verify, (layer.model, *extra))


STORES: tuple[Store, ...] = (
    _layer_store("episodic", "postgres", _verify_episodic, ChainHead),
    _layer_store("semantic", "postgres", _verify_semantic, MemoryAccess, LexicalPosting, MemoryContext),
    _layer_store(
        "knowledge", "postgres", _verify_knowledge, FactProvenance, Entity, Contradiction, GraphOutbox
    ),
    Store(
        "promotions",
        "memory-to-fact promotions",
        "postgres",
        "with the memories and facts they link",
        _verify_promotions,
        (Promotion,),
    ),
    Store("graph", "the Neo4j projection", "neo4j", "with the facts and entities it projects", _verify_graph),
    _layer_store("checkpoints", "postgres", _verify_checkpoints, CheckpointWrite),
    _layer_store("summaries", "postgres", _verify_summaries),
    _layer_store("procedural", "postgres", _verify_procedural),
    _layer_store("store", "postgres", _verify_store),
    Store(
        "working",
        "working memory and checkpoint copies (Redis)",
        "redis",
        "the sessions' working memory, the agents' scratchpads, every key holding the subject's id, "
        "the erased checkpoints' copies",
        _verify_working,
    ),
    Store(
        "replay",
        "the Idempotency-Key replay cache",
        "postgres",
        "every stored answer written before (reads are never stored): withdrawn, keys kept",
        _verify_replay,
        (IdempotencyRecord,),
    ),
    Store(
        "exports",
        "export archives (files)",
        "files",
        "every archive file holding an erased row or the subject's id, whatever its export's state",
        _verify_exports,
        (Export,),
    ),
    Store(
        "records",
        "compliance records: legal holds and the admin's log of them",
        "postgres",
        "released holds on the subject keep its digest, not its id; their trail records carry the "
        "subject and are redacted with its events",
        _verify_records,
        (LegalHold, ErasureRequest, LogEntry),
    ),
    Store(
        "statistics",
        "PostgreSQL's planner statistics (sampled column values)",
        "postgres",
        "sampled again from the rows left (ANALYZE with the vacuum); a table left empty loses them",
        _verify_statistics,
    ),
    Store(
        "index_keys",
        "GIN indexes' keys (full-text words, tags, store namespace labels)",
        "postgres",
        "the GIN indexes of the tables it removed rows from rebuilt (REINDEX CONCURRENTLY)",
        _verify_index_keys,
    ),
    Store(
        "task_results",
        "Celery's task results (Redis)",
        "redis",
        "the results naming the subject",
        _verify_celery,
    ),
    Store(
        "redis_files",
        "Redis's append-only file and snapshot (disk)",
        "redis",
        "rewritten after the deletes (BGREWRITEAOF, BGSAVE)",
        _verify_redis_files,
    ),
    Store(
        "wal",
        "PostgreSQL's write-ahead log, WAL archive and backups",
        "postgres",
        "nothing at once",
        None,
        lingers="until recycled, and the backups' retention (ENGRAM_BACKUP_RETENTION_DAYS)",
    ),
    Store(
        "graph_logs",
        "Neo4j's transaction logs",
        "neo4j",
        "nothing at once",
        None,
        lingers="until rotated (db.tx_log.rotation.retention_policy)",
    ),
)

# The models no store above needs: none holds personal data of the memory's data subjects. A model
# added to the project must join a store or this list, with its reason (tests/compliance walk them).
NO_PERSONAL_DATA: dict[str, str] = {
    "tenants.Tenant": "the customer organisation and its policies",
    "tenants.Domain": "the tenant's host names",
    "contenttypes.ContentType": "the names of the models",
    "auth.Permission": "the names of the permissions",
    "auth.Group": "admin roles",
    "auth.Group_permissions": "admin roles' permissions",
    "auth.User": "the people of the admin (officers, operators): accounts, not data subjects of memory",
    "auth.User_groups": "admin people's roles",
    "auth.User_user_permissions": "admin people's permissions",
    "sessions.Session": "admin logins (Django's own expiry)",
    "agents.Agent": "software agents' names and roles (an agent erasure removes what they wrote)",
    "agents.ApiKey": "key ids, scopes and hashed secrets",
    "memory.Predicate": "the names of relations (lives_in, knows)",
    "memory.Tool": "tool contracts (JSON Schema): operators' work",
    "memory.ToolVersion": "tool contracts' versions",
    "memory.Skill": "skills: operators' procedures",
    "memory.SkillVersion": "skills' versioned step lists",
    "memory.SkillRunStats": "run counters per skill version",
    "memory.ConsolidationRun": "counts of the consolidation passes",
    "compliance.ChainCheck": "chain checks: seqs, hashes and findings about them",
    "compliance.Anchor": "signed chain heads (seq and hash)",
    "compliance.RetentionRule": "days per layer",
    "compliance.RetentionRun": "counts per layer",
}


def verification_pass(
    *, kind: str, value: str, progress: Mapping[str, Any], timings: dict[str, float] | None = None
) -> dict[str, dict[str, int]]:
    """Look for what an erasure removed in every store of ``STORES``; each count must be 0.

    Returns the counts per system (``postgres``, ``pgvector``, ``neo4j``, ``redis``, ``files``)
    and check, as each store's ``verify`` reports them (their docstrings in ``STORES``' order:
    rows of the target left per layer, erased rows by id, redacted events with a body, embeddings,
    Neo4j relationships and nodes, Redis keys, replayed answers, archives, holds, statistics, task
    results, Redis's files). ``postgres_notes`` is reported, not counted: live memories with the
    same content digest as an erased one (another agent wrote the same words outside the erasure's
    scope). ``timings`` gets each store's seconds (``verify <store>``)."""
    target = Target(kind, value, progress)
    report: dict[str, dict[str, int]] = {
        "postgres": {},
        "pgvector": {},
        "neo4j": {},
        "redis": {},
        "files": {},
    }
    for store in STORES:
        if store.verify is None:
            continue
        started = time.monotonic()
        for system, counts in store.verify(target).items():
            report.setdefault(system, {}).update(counts)
        if timings is not None:
            timings[f"verify {store.name}"] = round(
                timings.get(f"verify {store.name}", 0.0) + time.monotonic() - started, 3
            )
    return report


def verification_clean(report: Mapping[str, Mapping[str, int]]) -> bool:
    """Whether a ``verification_pass`` found nothing left (notes aside)."""
    return all(
        n == 0 for store, counts in report.items() if store != "postgres_notes" for n in counts.values()
    )


def receipt_bytes(document: dict[str, Any]) -> bytes:
    """The RFC 8785 text of a receipt, the bytes that are signed."""
    return canonical_json(document, root="receipt").encode()
