"""Promotion of memories that earned it to facts of the knowledge layer."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.errors import InvalidInput
from memory.episodic.models import EventKind, EventRole
from memory.episodic.services import EventData, events_append
from memory.knowledge.models import FactProvenance
from memory.knowledge.services import FactData, FactObject, FactRetracted, facts_assert_batch
from memory.semantic.models import MemoryType, SemanticMemory
from memory.semantic.selectors import consolidation_policy

from .. import llm
from ..models import ConsolidationRun, Job, Promotion, PromotionOutcome
from .runs import ACTOR, NIL, TRAIL_SESSION, batch_size, counts_add, run_execute


def _hints(memory: SemanticMemory) -> list[dict[str, Any]]:
    if memory.fact_hint:
        return [memory.fact_hint]
    if llm.llm_configured():
        return llm.extract_triples(memory.content)
    return []


def _fact_data(memory: SemanticMemory, hint: dict[str, Any]) -> FactData:
    subject, predicate = hint.get("subject"), hint.get("predicate")
    if not isinstance(subject, str) or not isinstance(predicate, str):
        raise InvalidInput("A fact hint names a subject and a predicate.", field="fact")
    return FactData(
        subject=subject,
        subject_type=str(hint.get("subject_type") or ""),
        predicate=predicate,
        object=FactObject.from_wire(hint.get("object")),
        confidence=memory.confidence,
        valid_from=memory.created_at,
        session_id=memory.session_id or "",
        source_event_id=memory.source_event_id,
        data_subject=memory.data_subject,  # the fact is about whom the memory was: erasable with it
    )


@dataclass
class _Promoted:
    """One memory's promotion in a batch, before its rows are written."""

    memory: SemanticMemory
    promotion: Promotion
    data: FactData | None = None


def _prepared(memory: SemanticMemory, hint: dict[str, Any], run: ConsolidationRun) -> _Promoted:
    """The unsaved ``Promotion`` of ``memory`` with the fact its ``hint`` states (``invalid`` when
    the hint names no subject or predicate: nothing to assert)."""
    promotion = Promotion(memory=memory, run=run, source_event_id=memory.source_event_id)
    try:
        data = _fact_data(memory, hint)
    except InvalidInput as exc:
        promotion.outcome, promotion.detail = PromotionOutcome.INVALID, exc.message
        return _Promoted(memory, promotion, None)
    return _Promoted(memory, promotion, data)


_FIELD = "promotions"
_ITEM = re.compile(rf"^{_FIELD}\[(\d+)\]")


def _asserted(done: Sequence[_Promoted]) -> None:
    """Assert the batch's facts through ``facts_assert_batch``, one call per author (each fact is
    its memory's author's, as ``fact_assert`` would record it), so contradictions are detected and
    retracted facts refused exactly as one by one, in a bounded number of statements.

    ``facts_assert_batch`` is all or nothing; an item it refuses (``FactRetracted``: ``refused``) or
    rejects (``InvalidInput``: ``invalid``, with its message) is marked, and the author's remaining
    items are asserted again. Each attempt runs in a savepoint, so a refused attempt leaves nothing.
    Sets each promotion's outcome, fact and contradiction."""
    by_agent: dict[int, list[_Promoted]] = {}
    for p in done:
        if p.data is not None:
            by_agent.setdefault(p.memory.agent_id, []).append(p)
    for todo in by_agent.values():
        while todo:
            try:
                with transaction.atomic():
                    results = facts_assert_batch(
                        agent=todo[0].memory.agent,
                        facts=[p.data for p in todo if p.data is not None],
                        refuse_retracted=True,
                        field_prefix=_FIELD,
                    )
            except (FactRetracted, InvalidInput) as exc:
                match = _ITEM.match(exc.field or "")
                if match is None:
                    raise
                failed = todo.pop(int(match.group(1)))
                if isinstance(exc, FactRetracted):
                    failed.promotion.outcome = PromotionOutcome.REFUSED
                    failed.promotion.detail = "the same fact was retracted"
                else:
                    failed.promotion.outcome, failed.promotion.detail = PromotionOutcome.INVALID, exc.message
                continue
            for p, result in zip(todo, results, strict=True):
                p.promotion.outcome = result.outcome
                p.promotion.fact = result.fact
                p.promotion.contradiction = result.contradiction
            break


def _provenance_link(done: Sequence[_Promoted], *, after_id: int) -> None:
    """Point each promotion at the provenance row its assert added, with one query for the batch:
    the rows added since ``after_id`` (the highest id before the batch) for the batch's facts, matched
    in id order on (fact, agent, session, source event). A concurrent assert of the very same
    provenance by the same agent could be matched instead: it records the same thing."""
    wanted = [p for p in done if p.promotion.fact_id is not None and p.data is not None]
    if not wanted:
        return
    rows: dict[tuple[Any, ...], list[int]] = {}
    for row in (
        FactProvenance.objects.filter(pk__gt=after_id, fact_id__in={p.promotion.fact_id for p in wanted})
        .order_by("pk")
        .values_list("pk", "fact_id", "agent_id", "session_id", "source_event_id")
    ):
        rows.setdefault(row[1:], []).append(row[0])
    for p in wanted:
        assert p.data is not None
        key = (p.promotion.fact_id, p.memory.agent_id, p.data.session_id, p.data.source_event_id)
        ids = rows.get(key)
        if ids:
            p.promotion.provenance_id = ids.pop(0)


def _promotions_record(done: Sequence[_Promoted], run: ConsolidationRun) -> None:
    """Write the batch's ``Promotion`` rows in one insert and record them in the trail: one decision
    per (author, session) of the batch, in the memories' session (``consolidation`` for memories
    without one), listing each memory with its outcome, fact, contradiction and source event (who
    promoted each fact: the job, as the memory's author)."""
    if not done:
        return
    Promotion.objects.bulk_create([p.promotion for p in done])
    groups: dict[tuple[int, str], list[_Promoted]] = {}
    for p in done:
        groups.setdefault((p.memory.agent_id, p.memory.session_id or TRAIL_SESSION), []).append(p)
    by_agent: dict[int, list[tuple[str, list[_Promoted]]]] = {}
    for (agent_id, session_id), members in groups.items():
        by_agent.setdefault(agent_id, []).append((session_id, members))
    for sessions in by_agent.values():
        agent = sessions[0][1][0].memory.agent
        events = []
        for session_id, members in sessions:
            outcomes: dict[str, int] = {}
            for p in members:
                counts_add(outcomes, **{str(p.promotion.outcome): 1})
            events.append(
                EventData(
                    session_id=session_id,
                    kind=EventKind.DECISION,
                    role=EventRole.SYSTEM,
                    content=f"Promoted {len(members)} memories to facts: "
                    + ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items())),
                    payload={
                        "action": "memories_promote",
                        "run_id": run.pk,
                        "promotions": [
                            {
                                "memory_id": str(p.memory.pk),
                                "outcome": p.promotion.outcome,
                                "fact_id": p.promotion.fact_id,
                                "provenance_id": p.promotion.provenance_id,
                                "contradiction_id": p.promotion.contradiction_id,
                                "source_event_id": p.memory.source_event_id,
                                **({"detail": p.promotion.detail} if p.promotion.detail else {}),
                            }
                            for p in members
                        ],
                    },
                    occurred_at=timezone.now(),
                    actor=ACTOR,
                )
            )
        events_append(agent=agent, events=events)


def promotion_pass(*, now: datetime | None = None, batch: int | None = None) -> ConsolidationRun | None:
    """Promote the memories that earned it to facts of the knowledge layer: live, not archived,
    embedded, not summaries, never promoted, with confidence above the tenant's
    ``promote_min_confidence`` and at least ``promote_min_accesses`` recalls or reinforcements.

    The fact comes from the memory's fact hint (``{"subject", "predicate", "object"}``) or, with an
    LLM endpoint configured and no hint, from the triples it extracts; it is asserted through
    ``fact_assert`` as the memory's author, with the memory's confidence, session and source event
    (its provenance), so a conflicting fact opens a contradiction as usual, and a retracted one is
    refused (``refused``). Each memory is promoted once (``Promotion``, unique per memory). Without
    a hint and without an endpoint the memory is skipped (``skipped_no_hint``, counted each run).

    Set-based per batch (``batch`` memories, one transaction): candidates come by the partial index
    on confidence (``semantic_promotable_idx``), the ``Promotion`` rows are inserted together, their
    provenance rows found with one query, and the trail gets one decision per (author, session)
    listing every promotion of the batch; the facts are asserted with ``facts_assert_batch``, one call
    per author of the batch.
    Counts: ``examined``, ``created``, ``reinforced``, ``disputed``, ``refused``, ``invalid``,
    ``skipped_no_hint``. Returns the run, or None when one is already running."""
    size = batch_size(batch)
    policy = consolidation_policy()

    def body(run: ConsolidationRun) -> None:
        after = uuid.UUID(run.cursor["after"]) if run.cursor.get("after") else NIL
        eligible = (
            SemanticMemory.objects.filter(
                forgotten_at__isnull=True,
                archived_at__isnull=True,
                superseded_at__isnull=True,  # an older version's fact would come back as current
                embedding_dimensions__gt=0,
                confidence__gt=policy.promote_min_confidence,
                access__access_count__gte=policy.promote_min_accesses,
                promotion__isnull=True,
            )
            .exclude(memory_type__in=[MemoryType.SUMMARY, MemoryType.STORE])
            .select_related("agent")
            .defer("embedding", "search", "lexical")
            .order_by("pk")
        )
        while True:
            with transaction.atomic():
                memories = list(eligible.filter(pk__gt=after)[:size])
                if not memories:
                    break
                counts: dict[str, int] = {"examined": len(memories)}
                watermark = FactProvenance.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
                done: list[_Promoted] = []
                for memory in memories:
                    hints = _hints(memory)
                    if not hints:
                        counts_add(counts, skipped_no_hint=1)
                        continue
                    # one promotion per memory: the first triple (an extractor may find several)
                    done.append(_prepared(memory, hints[0], run))
                _asserted(done)
                for p in done:
                    counts_add(counts, **{str(p.promotion.outcome): 1})
                _provenance_link(done, after_id=watermark)
                _promotions_record(done, run)
                after = memories[-1].pk
                counts_add(run.counts, **counts)
                run.cursor = {"after": str(after)}
                run.save(update_fields=["cursor", "counts"])
            if len(memories) < size:
                break

    return run_execute(Job.PROMOTION, now, body)
