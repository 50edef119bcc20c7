"""Reads of the knowledge layer: facts about an entity (optionally as of a time), contradictions."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Max, Q, QuerySet

from .models import (
    LIVE_STATUSES,
    Contradiction,
    Entity,
    Fact,
    FactProvenance,
    FactStatus,
    GraphOutbox,
    entity_key,
)


def entity_by_name(name: str) -> Entity | None:
    """The entity whose normalised key matches ``name`` (any spelling, case or width), or None."""
    return Entity.objects.filter(key=entity_key(name)).first()


def fact_list(
    *,
    entity: Entity | None = None,
    as_of: datetime | None = None,
    agent_name: str | None = None,
    last_sessions: int | None = None,
) -> QuerySet[Fact]:
    """Facts with ``entity`` as subject or object.

    Without ``as_of``: the live ones (``active`` and ``disputed``). With ``as_of``: what was held
    valid then in valid time — ``valid_from <= as_of < valid_to`` (open end: still valid) and not
    retracted; a fact superseded later is returned, its successor only from its ``valid_from`` on.
    (Facts are often learned after they began, so the time they were recorded does not filter.)
    ``agent_name`` keeps facts asserted (in any provenance row) by that agent; ``last_sessions=N``
    keeps facts asserted in the N sessions with the most recent assertions.
    """
    qs = Fact.objects.select_related("subject", "predicate", "object_entity", "agent").annotate(
        assertions=Count("provenance", distinct=True)
    )
    if entity is not None:
        qs = qs.filter(Q(subject=entity) | Q(object_entity=entity))
    if as_of is None:
        qs = qs.filter(status__in=LIVE_STATUSES)
    else:
        qs = (
            qs.filter(valid_from__lte=as_of)
            .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=as_of))
            .exclude(status=FactStatus.RETRACTED)
        )
    if agent_name is not None:
        qs = qs.filter(provenance__agent__name=agent_name)
    if last_sessions is not None:
        sessions = (
            FactProvenance.objects.exclude(session_id="")
            .values("session_id")
            .annotate(latest=Max("asserted_at"))
            .order_by("-latest")
            .values_list("session_id", flat=True)[:last_sessions]
        )
        qs = qs.filter(provenance__session_id__in=list(sessions))
    return qs.distinct().order_by("valid_from", "id")


def contradiction_list(*, status: str | None = None) -> QuerySet[Contradiction]:
    """Contradictions (oldest first) with both facts and their subjects, predicates and objects loaded."""
    qs = Contradiction.objects.select_related(
        "existing_fact__subject",
        "existing_fact__predicate",
        "existing_fact__object_entity",
        "existing_fact__agent",
        "new_fact__subject",
        "new_fact__predicate",
        "new_fact__object_entity",
        "new_fact__agent",
        "existing_fact__source_event",
        "new_fact__source_event",
    )
    if status is not None:
        qs = qs.filter(status=status)
    return qs.order_by("created_at", "id")


def outbox_pending() -> bool:
    """Whether the current tenant's outbox has changes not yet projected into Neo4j (the partial
    index ``outbox_pending_idx`` holds just those rows, so this stays cheap however many were
    processed)."""
    return GraphOutbox.objects.filter(processed_at__isnull=True).exists()
