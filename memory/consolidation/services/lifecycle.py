"""The data lifecycle's hooks: ``compliance.lifecycle`` calls them when it erases or retains, and
records why."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Q

from agents.services import system_agent_get
from core.tasks import queue_on_commit
from memory.episodic.models import Event
from memory.episodic.services import decision_record
from memory.semantic.services.summaries import SummaryText, summaries_put

from ..models import Job, Promotion, SummaryNode
from .runs import ACTOR, TRAIL_SESSION, UNSUMMARISED_PREFIXES, UNSUMMARISED_SESSIONS, job_key
from .summaries import tree_extend


@contextmanager
def summaries_paused() -> Iterator[None]:
    """Hold the summary tree's job lock for the block, waiting for a running pass to end: while an
    erasure or a retention pass redacts events and removes the summaries covering them, no pass
    can read an event before its redaction and write its text into a node after the removal."""
    key = job_key(Job.SUMMARIES)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [key])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


@dataclass(frozen=True)
class SummariesErased:
    """What ``summaries_erase`` removed: node ids, the ids of their summary memories, the sessions."""

    node_ids: list[int]
    memory_ids: list[str]
    sessions: list[str]


def summaries_erase(*, node_ids: Sequence[int]) -> SummariesErased:
    """Delete for good the summary trees holding the nodes ``node_ids``: every node of their
    sessions (a node's ancestors summarise the same events; its siblings are rebuilt with it) and
    their summary memories (content, embedding, full-text and lexical postings, through
    ``memories_erase``); then queue, on commit, the rebuild of each session's tree from the events
    that remain (``memory.consolidation.tasks.summaries_rebuild``; redacted events are never read).
    Call inside a transaction; the caller records why."""
    from memory.semantic.services.erase import memories_erase

    with transaction.atomic():
        sessions = sorted(
            set(SummaryNode.objects.filter(pk__in=list(node_ids)).values_list("session_id", flat=True))
        )
        nodes = list(
            SummaryNode.objects.select_for_update()
            .filter(session_id__in=sessions)
            .order_by("pk")
            .values_list("pk", "memory_id")
        )
        SummaryNode.objects.filter(pk__in=[pk for pk, _ in nodes]).delete()
        memory_ids = memories_erase(memory_ids=[m for _, m in nodes if m is not None])
        for session_id in sessions:
            queue_on_commit("memory.consolidation.tasks.summaries_rebuild", session_id)
    return SummariesErased(sorted(pk for pk, _ in nodes), memory_ids, sessions)


def summary_tree_rebuild(*, session_id: str) -> list[SummaryNode]:
    """Build ``session_id``'s summary tree again from its events that are not redacted (after an
    erasure or a retention pass removed the old one), under the summary job's lock (waiting for a
    running pass), and store the nodes' summary memories. A session that already has a tree is
    left as it is unless that tree starts after the session's first event still there (a pass
    extended an empty tree meanwhile): then it is dropped and built whole. Recorded as one decision
    of ``job:consolidation``. Returns the nodes written."""
    from memory.semantic.services.erase import memories_erase

    if session_id in UNSUMMARISED_SESSIONS or session_id.startswith(UNSUMMARISED_PREFIXES):
        return []
    with summaries_paused(), transaction.atomic():
        events = list(
            Event.objects.filter(session_id=session_id, redacted_at__isnull=True)
            .defer("search", "payload_index")
            .order_by("seq")
        )
        first = SummaryNode.objects.filter(session_id=session_id, level=1).order_by("position").first()
        if first is not None and events and first.first_seq <= events[0].seq:
            return []  # whole already
        stale = list(SummaryNode.objects.filter(session_id=session_id).values_list("pk", "memory_id"))
        SummaryNode.objects.filter(pk__in=[pk for pk, _ in stale]).delete()
        memories_erase(memory_ids=[m for _, m in stale if m is not None])
        if not events:
            return []
        written = tree_extend(session_id=session_id, events=events)
        memories = summaries_put(items=[SummaryText(n.session_id, n.content, n.memory_id) for n in written])
        for node, memory in zip(written, memories, strict=True):
            node.memory = memory
        SummaryNode.objects.bulk_update(written, ["memory"])
        decision_record(
            agent=system_agent_get(),
            session_id=TRAIL_SESSION,
            actor=ACTOR,
            content=f"Rebuilt the summary tree of a session from its {len(events)} remaining events "
            f"({len(written)} nodes).",
            payload={
                "action": "summaries_rebuild",
                "session_id": session_id,
                "events": len(events),
                "nodes": [[n.level, n.position, n.first_seq, n.last_seq] for n in written],
            },
        )
    return written


def promotions_detach(*, fact_ids: Sequence[int]) -> list[int]:
    """Before facts ``fact_ids`` are erased: the promotions that point at them (as their fact, the
    provenance row or the contradiction their assert made) lose those links and say so in
    ``detail``, but stay, so their memory is never promoted again (which would recreate the fact).
    Returns the promotion ids changed. Call inside the erasing transaction."""
    from memory.knowledge.models import Contradiction, FactProvenance

    ids = list(fact_ids)
    if not ids:
        return []
    provenance = FactProvenance.objects.filter(fact_id__in=ids).values("pk")
    contradictions = Contradiction.objects.filter(
        Q(existing_fact_id__in=ids) | Q(new_fact_id__in=ids)
    ).values("pk")
    touched = Promotion.objects.filter(
        Q(fact_id__in=ids) | Q(provenance_id__in=provenance) | Q(contradiction_id__in=contradictions)
    )
    changed = sorted(touched.values_list("pk", flat=True))
    Promotion.objects.filter(pk__in=changed).update(
        fact=None, provenance=None, contradiction=None, detail="the fact was erased"
    )
    return changed


def promotions_erase(*, memory_ids: Sequence[Any]) -> list[int]:
    """Before memories ``memory_ids`` are erased: delete their promotion rows (the memory is gone,
    so it can never be promoted again). The facts they made are the caller's to erase first (for an
    erasure, ``compliance.lifecycle`` selects them through these rows; retention keeps them: a
    promoted fact has its own clock). Returns the promotion ids deleted. Call inside the erasing
    transaction."""
    ids = [uuid.UUID(str(i)) for i in memory_ids]
    if not ids:
        return []
    doomed = sorted(Promotion.objects.filter(memory_id__in=ids).values_list("pk", flat=True))
    Promotion.objects.filter(pk__in=doomed).delete()
    return doomed
