"""The data lifecycle's map of the stores: how each layer finds the rows of a target (a data
subject, a session, an agent, a tag, an entity), how long it keeps them and from when, and how it
removes them. Retention, legal holds and erasure all read this one table (``LAYERS``): a new layer
(procedural skills, say) takes part in all three by adding its ``Layer`` here.

Also here: the erasure's steps over every store (``erase_*``), its verification pass, and the
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
from django.db import connection, models
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from core.canonical_json import canonical_json
from core.tenancy import maintenance
from memory.checkpoints.models import Checkpoint
from memory.checkpoints.services import checkpoints_erase
from memory.consolidation.models import Promotion, PromotionOutcome, SummaryNode
from memory.consolidation.services import promotions_detach, promotions_erase, summaries_erase
from memory.episodic.models import Event
from memory.episodic.services import events_redact
from memory.knowledge.models import Entity, Fact, FactStatus, entity_key
from memory.knowledge.services import facts_erase
from memory.procedural.models import SkillRun
from memory.procedural.services import skill_runs_erase
from memory.semantic.models import AGENT_MEMORY_TYPES, MemoryContext, MemoryType, SemanticMemory
from memory.semantic.services import memories_erase
from memory.store.models import StoreItem
from memory.store.services import items_erase
from memory.working.services import keys_holding, working_memory_erase

from .models import LegalHold, RetentionRule, TargetKind

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
    seqs = events_redact(event_ids=[r["pk"] for r in rows])
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
        pending=Q(redacted_at__isnull=True),
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


def vacuum(tables: Sequence[str], *, timings: dict[str, float] | None = None) -> list[str]:
    """``VACUUM (INDEX_CLEANUP ON)`` each of ``tables``, so the dead tuples of erased rows and their
    index entries (the subject's id in its btree, the words in GIN, the vectors in HNSW) are gone,
    not just invisible. ``INDEX_CLEANUP ON``, because the default (``AUTO``) skips the indexes when
    under 2% of the table's pages have dead tuples, as after erasing one person among millions,
    which would leave exactly what an erasure must remove. No ANALYZE: an erasure removes nothing
    the planner's statistics depend on (autovacuum refreshes them). Needs autocommit (not inside
    a transaction); returns the tables vacuumed (none inside a transaction, as in tests that roll
    back). Runs as the tables' owner (the maintenance role): PostgreSQL skips a VACUUM by a
    tenant's role with only a warning. VACUUM reads only the pages the visibility map does not
    mark all-visible, so a table's cost is the pages the removal touched plus one pass over each
    of its indexes."""
    if connection.in_atomic_block:
        return []
    with maintenance(), connection.cursor() as cursor:
        for table in tables:
            started = time.monotonic()
            cursor.execute(f'VACUUM (INDEX_CLEANUP ON) "{table}"')
            if timings is not None:
                timings[f"vacuum {table}"] = round(time.monotonic() - started, 3)
    return list(tables)


def touched_tables(progress: Mapping[str, Any]) -> list[str]:
    """The tables an erasure removed rows from (by its ``progress``), with those removed alongside
    (access clocks, lexical postings, provenance, entities, promotions): the ones to vacuum."""
    from memory.knowledge.models import FactProvenance
    from memory.semantic.models import LexicalPosting, MemoryAccess, MemoryContext

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
        tables.append(Checkpoint)
    if did("summaries"):
        tables.append(SummaryNode)
    if did("procedural"):
        tables.append(SkillRun)
    if did("semantic", "promotion_ids") or did("knowledge", "promotions_detached"):
        tables.append(Promotion)
    return [model._meta.db_table for model in tables]


def verification_pass(
    *, kind: str, value: str, progress: Mapping[str, Any], timings: dict[str, float] | None = None
) -> dict[str, dict[str, int]]:
    """Look for what an erasure removed in every store; each count must be 0.

    PostgreSQL: rows of the target left in each layer, erased rows still there (memories, facts,
    entities, checkpoints by id; redacted events with any body, full-text vector or subject left);
    pgvector: embeddings of erased memories; Neo4j (Cypher): relationships of erased facts and
    nodes of erased entities (and, for an entity, nodes of its name); Redis (SCAN): keys that were
    deleted, and for a data subject any key holding its identifier. Also reported, not counted as
    left: live memories with the same content digest as an erased one (``same_content_elsewhere``:
    another agent wrote the same words outside the erasure's scope)."""
    from core.neo4j import get_driver

    report: dict[str, dict[str, int]] = {"postgres": {}, "pgvector": {}, "neo4j": {}, "redis": {}}
    clock = [time.monotonic()]

    def lap(step: str) -> None:
        now = time.monotonic()
        if timings is not None:
            timings[f"verify {step}"] = round(timings.get(f"verify {step}", 0.0) + now - clock[0], 3)
        clock[0] = now

    pg = report["postgres"]
    for layer in stored_layers():
        q = target_q(layer, kind, value)
        pg[f"{layer.name}_left"] = 0 if q is None else layer.rows().filter(q).count()
    seqs = progress.get("episodic", {}).get("ids", [])
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
    if kind == TargetKind.SUBJECT:
        pg["events_naming_subject"] = Event.objects.filter(data_subject=value).count()
    summaries = progress.get("summaries", {})
    memory_ids = (
        list(progress.get("semantic", {}).get("ids", []))
        + list(summaries.get("memory_ids", []))
        + list(progress.get("store", {}).get("memory_ids", []))
    )
    pg["memories"] = SemanticMemory.objects.filter(pk__in=memory_ids).count()
    # neighbours' contexts built from an erased memory's text (the triggers rebuild them)
    pg["memory_contexts"] = MemoryContext.objects.filter(
        Q(memory_id__in=memory_ids) | Q(sources__overlap=list(memory_ids))
    ).count()
    pg["summary_nodes"] = SummaryNode.objects.filter(pk__in=summaries.get("ids", [])).count()
    # a node written before a redaction of its range holds the erased text (rebuilt ones never do)
    pg["summaries_stale"] = SummaryNode.objects.filter(_summaries_stale(timezone.now(), "")).count()
    pg["promotions"] = Promotion.objects.filter(
        Q(memory_id__in=memory_ids) | Q(fact_id__in=progress.get("knowledge", {}).get("ids", []))
    ).count()
    pg["skill_runs"] = SkillRun.objects.filter(pk__in=progress.get("procedural", {}).get("ids", [])).count()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {SemanticMemory._meta.db_table} WHERE id = ANY(%s::uuid[]) "
            "AND embedding IS NOT NULL",
            [list(memory_ids)],
        )
        report["pgvector"]["embeddings"] = int(cursor.fetchone()[0])
    fact_ids = progress.get("knowledge", {}).get("ids", [])
    entity_ids = progress.get("knowledge", {}).get("entity_ids", [])
    pg["facts"] = Fact.objects.filter(pk__in=fact_ids).count()
    pg["entities"] = Entity.objects.filter(pk__in=entity_ids).count()
    if kind == TargetKind.ENTITY:
        pg["entity_named"] = Entity.objects.filter(key=entity_key(value)).count()
    pg["store_items"] = StoreItem.objects.filter(pk__in=progress.get("store", {}).get("ids", [])).count()
    pg["checkpoints"] = Checkpoint.objects.filter(
        pk__in=progress.get("checkpoints", {}).get("ids", [])
    ).count()
    hashes = progress.get("semantic", {}).get("content_hashes", [])
    report["postgres_notes"] = {
        "same_content_elsewhere": SemanticMemory.objects.filter(content_hash__in=hashes).count()
    }

    lap("postgres")
    driver = get_driver()
    if driver is not None:
        from core.neo4j import neo4j_guard
        from core.tenancy import current_schema

        tenant = current_schema()
        with neo4j_guard():
            records, _, _ = driver.execute_query(
                "MATCH ()-[r:FACT {tenant: $t}]->() WHERE r.fact_id IN $ids RETURN count(r) AS n",
                t=tenant,
                ids=list(fact_ids),
            )
            report["neo4j"]["relationships"] = int(records[0]["n"])
            records, _, _ = driver.execute_query(
                "MATCH (n:Entity {tenant: $t}) WHERE n.id IN $ids RETURN count(n) AS n",
                t=tenant,
                ids=list(entity_ids),
            )
            report["neo4j"]["nodes"] = int(records[0]["n"])
            if kind == TargetKind.ENTITY:
                records, _, _ = driver.execute_query(
                    "MATCH (n:Entity {tenant: $t}) WHERE toLower(n.name) = toLower($name) RETURN count(n) AS n",
                    t=tenant,
                    name=value,
                )
                report["neo4j"]["nodes_named"] = int(records[0]["n"])
    lap("neo4j")
    from core.redis import get_redis, redis_errors

    deleted = progress.get("redis", {}).get("keys", []) + progress.get("checkpoints", {}).get(
        "redis_keys", []
    )
    with redis_errors():
        report["redis"]["deleted_keys_back"] = int(get_redis().exists(*deleted)) if deleted else 0
    if kind == TargetKind.SUBJECT:
        report["redis"]["keys_naming_subject"] = len(keys_holding([value]))
    lap("redis")
    return report


def verification_clean(report: Mapping[str, Mapping[str, int]]) -> bool:
    """Whether a ``verification_pass`` found nothing left (notes aside)."""
    return all(
        n == 0 for store, counts in report.items() if store != "postgres_notes" for n in counts.values()
    )


def receipt_bytes(document: dict[str, Any]) -> bytes:
    """The RFC 8785 text of a receipt, the bytes that are signed."""
    return canonical_json(document, root="receipt").encode()
