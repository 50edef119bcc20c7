"""The map of the layers (``LAYERS``): for each store of memory, how it finds the rows of a
target (a data subject, a session, an agent, a tag, an entity), how long it keeps them and from
when, and how it removes them. Retention, legal holds and erasure all read this one table: a new
layer takes part in all three by adding its ``Layer`` here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import models
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from memory.checkpoints.models import Checkpoint
from memory.checkpoints.services import checkpoints_erase
from memory.consolidation.models import Promotion, PromotionOutcome, SummaryNode
from memory.consolidation.services.lifecycle import promotions_detach, promotions_erase, summaries_erase
from memory.conversations.models import ExtractionJob
from memory.conversations.services import jobs_erase
from memory.episodic.models import REDACTION_ACTION, Event, EventKind
from memory.knowledge.models import Fact, FactStatus, entity_key
from memory.knowledge.services import facts_erase
from memory.procedural.models import SkillRun
from memory.procedural.services.runs import skill_runs_erase
from memory.semantic.models import AGENT_MEMORY_TYPES, MemoryType, SemanticMemory
from memory.semantic.services.erase import memories_erase
from memory.store.models import StoreItem
from memory.store.services import items_erase

from ..models import TargetKind
from ..redaction import events_redact_decided

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


def events_remove(rows: list[Any]) -> Removed:
    """Redact the events of a batch (named by the signed decision in force); their seqs, sessions
    and body digests."""
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


def _extraction_jobs_remove(rows: list[Any]) -> Removed:
    return Removed(jobs_erase(job_ids=[r["pk"] for r in rows]), {r["session_id"] for r in rows})


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


def summaries_stale(_cutoff: datetime, _kind: str) -> Q:
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
        remove=events_remove,
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
        aged=summaries_stale,
        remove=_summaries_remove,
    ),
    Layer(
        name="extractions",
        label="conversation extraction jobs",
        model=ExtractionJob,
        counts_from="when the job was queued (its prompt and the model's answer quote the messages)",
        default_days={"": 365},
        targets={
            TargetKind.SUBJECT: lambda v: Q(data_subject=v),
            TargetKind.SESSION: lambda v: Q(session_id=v),
            TargetKind.AGENT: lambda v: Q(agent__name=v),
        },
        aged=lambda cutoff, _kind: Q(created_at__lt=cutoff),
        load=("pk", "session_id"),
        remove=_extraction_jobs_remove,
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
