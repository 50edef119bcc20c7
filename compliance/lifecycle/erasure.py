"""The erasure's steps over the layers (``erase_*``): the rows of a target, read by key and
removed in batches, the entity itself, the working memory and the trail's copies of it; and the
keyed digests that name what was erased."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from memory.episodic.models import Event
from memory.knowledge.models import Entity, entity_key
from memory.knowledge.services import facts_erase
from memory.working.services import keys_holding, working_memory_erase

from .layers import Layer, Removed, events_remove, target_q


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
    return events_remove(rows) if rows else None


#: per target kind, the field whose distinct values name a target of that kind in the layers
#: (``layers.LAYERS``' ``targets``), read from every model of the tenant that has it
TARGET_FIELDS = {"subject": "data_subject", "session": "session_id"}


def target_values(kind: str) -> set[str]:
    """Every value of ``kind`` that names something in the current tenant: the distinct
    ``data_subject`` / ``session_id`` of every tenant model with that field, the agents' names,
    the memories' tags, the entities' names. Used to find an erased target again by its digest
    (``target_value_find``)."""
    from django.apps import apps

    from agents.models import Agent
    from memory.semantic.models import SemanticMemory

    if kind == "agent":
        return set(Agent.objects.values_list("name", flat=True))
    if kind == "tag":
        return {tag for tags in SemanticMemory.objects.values_list("tags", flat=True) for tag in tags or ()}
    if kind == "entity":
        return set(Entity.objects.values_list("name", flat=True))
    name = TARGET_FIELDS.get(kind)
    values: set[str] = set()
    for app in ("agents", "memory", "compliance"):
        for model in apps.get_app_config(app).get_models():
            if name and any(f.name == name for f in model._meta.concrete_fields):
                values |= set(
                    model._default_manager.exclude(**{name: ""}).values_list(name, flat=True).distinct()
                )
    return values


def target_value_find(kind: str, digest: str) -> str | None:
    """The value of ``kind`` in the current tenant whose ``value_digest`` is ``digest`` (an erased
    target named by its digest only); ``None`` when nothing of the tenant is named so."""
    for value in target_values(kind):
        if value and hmac.compare_digest(value_digest(kind, value), digest):
            return value
    return None
