"""Erasing facts for good (an erasure's or retention's step): PostgreSQL and the Neo4j projection."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q

from core.errors import Conflict
from core.locks import advisory_xact_lock, advisory_xact_locks

from ..models import Contradiction, ContradictionStatus, Entity, Fact, FactProvenance, GraphOutbox
from ..projection import FACT_LOCK, TENANT_LOCK, unproject
from .disputes import disputes_settle
from .outbox import queue_projection


@dataclass(frozen=True)
class FactsErased:
    """What ``facts_erase`` removed: fact ids, entity ids (asked for, or left without a fact);
    ``undisputed``: ids of kept facts that disputed an erased one and are active now."""

    fact_ids: list[int]
    entity_ids: list[int]
    undisputed: tuple[int, ...] = ()


def facts_erase(*, fact_ids: Sequence[int], entity_ids: Sequence[int] = ()) -> FactsErased:
    """Delete for good the facts ``fact_ids`` (with their provenance, contradictions and outbox
    rows) and the entities ``entity_ids`` (whose facts must be among ``fact_ids``) of the current
    tenant, from PostgreSQL and from the Neo4j projection, in one transaction: Neo4j first, under
    the graph lock (shared, as drains take it; ``graph_rebuild`` waits) and the facts' locks, so
    neither a drain nor a rebuild can project them again; then the rows. Entities the facts touched
    that are left without any fact go too (their names are data of the facts). Kept facts that
    disputed an erased one are settled (``disputes_settle``). A retried call skips what is gone.

    Raises ``Conflict`` when one of ``entity_ids`` still has a fact not in ``fact_ids`` and
    :class:`core.neo4j.Neo4jUnavailable` when Neo4j cannot be reached (nothing is deleted then).
    The caller records why."""
    with transaction.atomic():
        advisory_xact_lock(TENANT_LOCK, shared=True)
        advisory_xact_locks(FACT_LOCK, sorted(set(fact_ids)))
        facts = list(Fact.objects.filter(pk__in=fact_ids).values_list("pk", "subject_id", "object_entity_id"))
        ids = [f[0] for f in facts]
        wanted = set(entity_ids)
        others = Fact.objects.filter(Q(subject_id__in=wanted) | Q(object_entity_id__in=wanted)).exclude(
            pk__in=ids
        )
        if wanted and others.exists():
            raise Conflict("An entity to erase still has facts outside the erasure.", field="entity_ids")
        touched = {e for _, s, o in facts for e in (s, o) if e is not None} | wanted
        still_used = set(
            Fact.objects.filter(subject_id__in=touched)
            .exclude(pk__in=ids)
            .values_list("subject_id", flat=True)
        ) | set(
            Fact.objects.filter(object_entity_id__in=touched)
            .exclude(pk__in=ids)
            .values_list("object_entity_id", flat=True)
        )
        doomed_entities = sorted((touched - still_used) | wanted)
        unproject(fact_ids=ids, entity_ids=doomed_entities, touched_ids=sorted(touched))
        challengers = list(
            Fact.objects.filter(
                pk__in=Contradiction.objects.filter(existing_fact_id__in=ids, status=ContradictionStatus.OPEN)
                .exclude(new_fact_id__in=ids)
                .values("new_fact_id")
            )
        )
        Contradiction.objects.filter(Q(existing_fact_id__in=ids) | Q(new_fact_id__in=ids)).delete()
        GraphOutbox.objects.filter(fact_id__in=ids).delete()
        FactProvenance.objects.filter(fact_id__in=ids).delete()
        Fact.objects.filter(pk__in=ids).delete()
        Entity.objects.filter(pk__in=doomed_entities).delete()
        made_active, _opened = disputes_settle(challengers)
        if made_active:
            queue_projection(made_active)
    return FactsErased(sorted(ids), doomed_entities, tuple(sorted(f.pk for f in made_active)))
