"""The consolidation jobs: the forgetting curve (archiving), promotion of memories to facts, and the
episodic summary tree.

Every job runs in the current tenant as one ``ConsolidationRun`` of bounded batches, each batch one
transaction that also commits the run's cursor and counts: a worker killed mid-run loses at most
its current batch, and the next start of the job (the requeued message, or the next schedule)
resumes the run from its cursor. Runs of one job in one tenant never overlap (a session advisory
lock, released when the worker's connection closes, even on a kill). Every change is recorded in
the trail by ``decision_record`` with ``actor`` ``job:consolidation``: one decision per batch of
archived memories and per batch of summaries (session ``consolidation``), one per batch of
promotions and session (in the memories' session, else ``consolidation``). Nothing comes back: forgotten memories are never archived, restored, promoted
or rewritten, and a promotion never re-asserts a retracted fact.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from agents.services import system_agent_get
from core.errors import DomainError, InvalidInput
from core.tasks import queue_on_commit
from core.tenancy import current_schema
from memory.episodic.models import ChainHead, Event, EventKind, EventRole
from memory.episodic.services import EventData, decision_record, events_append
from memory.knowledge.models import FactProvenance
from memory.knowledge.services import FactData, FactObject, FactRetracted, facts_assert_batch
from memory.semantic.models import MemoryType, SemanticMemory
from memory.semantic.selectors import consolidation_policy
from memory.semantic.services.summaries import SummaryText, summaries_put

from . import llm
from .models import (
    ConsolidationRun,
    Job,
    Promotion,
    PromotionOutcome,
    RunStatus,
    SummaryNode,
)
from .selectors import consolidation_due, run_unfinished
from .summarizer import (
    SourceEvent,
    estimate_tokens,
    header,
    summarize_events,
    summarize_summaries,
)

logger = logging.getLogger(__name__)

ACTOR = "job:consolidation"
TRAIL_SESSION = "consolidation"
# sessions the summary tree leaves out: the jobs' own trail (summarising it would feed itself) and
# the one-object trail sessions of memories and facts ("memory:<id>", "fact:<id>": a forget, a
# retract), which hold a decision or two each and would each cost a summary memory
UNSUMMARISED_SESSIONS = (TRAIL_SESSION,)
UNSUMMARISED_PREFIXES = ("memory:", "fact:")


def _batch_size(batch: int | None) -> int:
    return int(batch or settings.ENGRAM["CONSOLIDATION_BATCH"])


def _job_key(job: str) -> int:
    digest = hashlib.sha256(f"{current_schema()}:consolidation:{job}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def job_lock(job: str) -> Iterator[bool]:
    """A session advisory lock on (tenant, ``job``): yields False when another run holds it."""
    key = _job_key(job)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        got = bool(cursor.fetchone()[0])
    try:
        yield got
    finally:
        if got:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


def _run_open(job: str, now: datetime | None) -> ConsolidationRun:
    """The unfinished run of ``job`` to resume (``attempts`` + 1; it keeps its clock), or a new one
    at ``now`` (default: the current time)."""
    run = run_unfinished(job)
    if run is not None:
        run.attempts += 1
        run.save(update_fields=["attempts"])
        logger.info("resuming %s at %s", run, run.cursor)
        return run
    return ConsolidationRun.objects.create(job=job, clock=now or timezone.now())


def _add(counts: dict[str, int], **more: int) -> None:
    for name, value in more.items():
        counts[name] = int(counts.get(name, 0)) + int(value)


def _run_finish(run: ConsolidationRun, *, error: str = "") -> ConsolidationRun:
    run.status = RunStatus.FAILED if error else RunStatus.DONE
    run.error = error
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "finished_at"])
    return run


def _execute(
    job: str, now: datetime | None, body: Callable[[ConsolidationRun], None]
) -> ConsolidationRun | None:
    """Run ``body`` over the open run of ``job`` under the job's lock; None when another run holds
    the lock. A domain error (a dependency down) ends the run as ``failed`` with its message; any
    other exception too, and is raised again."""
    with job_lock(job) as got:
        if not got:
            logger.info("%s already running in %s", job, current_schema())
            return None
        run = _run_open(job, now)
        try:
            body(run)
        except DomainError as exc:
            return _run_finish(run, error=f"{type(exc).__name__}: {exc.message}")
        except Exception as exc:
            _run_finish(run, error=f"{type(exc).__name__}: {exc}")
            raise
        return _run_finish(run)


# --- the forgetting curve ---------------------------------------------------------------------------

_ARCHIVE_SQL = """
UPDATE memory_semanticmemory m SET archived_at = %(clock)s
FROM memory_memoryaccess a
WHERE a.memory_id = m.id AND m.id > %(after)s AND (%(upper)s::uuid IS NULL OR m.id <= %(upper)s::uuid)
  AND m.forgotten_at IS NULL AND m.archived_at IS NULL AND m.embedding_dimensions > 0
  AND m.memory_type <> 'store'
  AND m.created_at <= %(born_before)s
  AND extract(epoch FROM (%(clock)s - a.last_accessed_at)) / 3600.0 > -a.stability_hours * ln(%(threshold)s)
RETURNING m.id
"""
_NIL = uuid.UUID(int=0)


def forgetting_pass(*, now: datetime | None = None, batch: int | None = None) -> ConsolidationRun | None:
    """Archive the memories that the forgetting curve has let go: live (not forgotten, not already
    archived, embedded) memories created at least ``archive_min_age_hours`` before the run's clock
    whose recall probability ``exp(-t / S)`` (``memory.semantic.forgetting``) is below the tenant's
    ``archive_below_recall``, i.e. ``t > -S ln θ`` hours since their last access. Archived memories
    leave default recall (``include_archived`` finds them; a recall, a reinforcement or an operator
    restores them); nothing is deleted.

    Batches walk the memories in id order (``batch`` rows each, ``ENGRAM_CONSOLIDATION_BATCH`` by
    default); each batch that archives something records one decision listing the ids. Counts:
    ``examined``, ``archived``. Returns the run, or None when one is already running."""
    size = _batch_size(batch)
    policy = consolidation_policy()

    def body(run: ConsolidationRun) -> None:
        if not 0.0 < policy.archive_below_recall:
            return  # a threshold of 0: nothing is ever below it
        clock = run.clock
        born_before = clock - timedelta(hours=policy.archive_min_age_hours)
        after = uuid.UUID(run.cursor["after"]) if run.cursor.get("after") else _NIL
        while True:
            with transaction.atomic():
                ids = list(
                    SemanticMemory.objects.filter(pk__gt=after)
                    .order_by("pk")
                    .values_list("pk", flat=True)[:size]
                )
                if not ids:
                    break
                upper = ids[-1] if len(ids) == size else None
                with connection.cursor() as cursor:
                    cursor.execute(
                        _ARCHIVE_SQL,
                        {
                            "clock": clock,
                            "after": after,
                            "upper": upper,
                            "born_before": born_before,
                            "threshold": min(policy.archive_below_recall, 1.0),
                        },
                    )
                    archived = sorted(str(row[0]) for row in cursor.fetchall())
                if archived:
                    decision_record(
                        agent=system_agent_get(),
                        session_id=TRAIL_SESSION,
                        actor=ACTOR,
                        content=f"Archived {len(archived)} memories below recall probability "
                        f"{policy.archive_below_recall} (forgetting curve).",
                        payload={
                            "action": "memories_archive",
                            "run_id": run.pk,
                            "clock": clock.isoformat(),
                            "threshold": policy.archive_below_recall,
                            "min_age_hours": policy.archive_min_age_hours,
                            "memory_ids": archived,
                        },
                    )
                after = ids[-1]
                _add(run.counts, examined=len(ids), archived=len(archived))
                run.cursor = {"after": str(after)}
                run.save(update_fields=["cursor", "counts"])
            if upper is None:
                break

    return _execute(Job.FORGETTING, now, body)


# --- promotion to facts -----------------------------------------------------------------------------


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
                _add(outcomes, **{str(p.promotion.outcome): 1})
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
    size = _batch_size(batch)
    policy = consolidation_policy()

    def body(run: ConsolidationRun) -> None:
        after = uuid.UUID(run.cursor["after"]) if run.cursor.get("after") else _NIL
        eligible = (
            SemanticMemory.objects.filter(
                forgotten_at__isnull=True,
                archived_at__isnull=True,
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
                        _add(counts, skipped_no_hint=1)
                        continue
                    # one promotion per memory: the first triple (an extractor may find several)
                    done.append(_prepared(memory, hints[0], run))
                _asserted(done)
                for p in done:
                    _add(counts, **{str(p.promotion.outcome): 1})
                _provenance_link(done, after_id=watermark)
                _promotions_record(done, run)
                after = memories[-1].pk
                _add(run.counts, **counts)
                run.cursor = {"after": str(after)}
                run.save(update_fields=["cursor", "counts"])
            if len(memories) < size:
                break

    return _execute(Job.PROMOTION, now, body)


# --- the episodic summary tree ----------------------------------------------------------------------


@dataclass
class _Leaf:
    events: list[SourceEvent]
    tokens: int


def _source(event: Event) -> SourceEvent:
    return SourceEvent(
        seq=event.seq,
        kind=event.kind,
        role=event.role,
        content=event.content,
        payload=event.payload,
        speaker=str(event.payload.get("speaker") or "") if isinstance(event.payload, dict) else "",
    )


def _event_tokens(event: SourceEvent) -> int:
    return estimate_tokens(event.content) + (estimate_tokens(str(event.payload)) if event.payload else 0)


def _summarize_leaf(events: Sequence[SourceEvent]) -> tuple[list[str], str]:
    if llm.llm_configured():
        try:
            text = llm.summarize_abstractive(
                [f"[{e.kind}] {e.speaker or e.role}: {e.content}" for e in events]
            )
            return text.splitlines(), "abstractive"
        except llm.LLMUnavailable:
            logger.warning("chat endpoint down: extractive summary instead")
    return summarize_events(events), "extractive"


def _summarize_parent(children: Sequence[str]) -> tuple[list[str], str]:
    if llm.llm_configured():
        try:
            return llm.summarize_abstractive(list(children)).splitlines(), "abstractive"
        except llm.LLMUnavailable:
            logger.warning("chat endpoint down: extractive summary instead")
    return summarize_summaries(children), "extractive"


def _node_set(
    node: SummaryNode, *, first: int, last: int, count: int, last_hash: str, body: list[str], method: str
) -> None:
    node.first_seq, node.last_seq, node.event_count, node.last_event_hash = first, last, count, last_hash
    node.content = "\n".join([header(node.session_id, node.level, first, last, count), *body])
    node.method = method
    node.updated_at = timezone.now()


def tree_extend(*, session_id: str, events: Sequence[Event]) -> list[SummaryNode]:
    """Add ``events`` (of ``session_id``, in seq order) to the session's summary tree, incrementally:
    events already covered are skipped; the last leaf takes events while it has fewer than
    ``summary_leaf_events`` events and ``summary_leaf_tokens`` tokens, then new leaves follow; then,
    level by level, only the parents of changed nodes are rewritten (each covers ``summary_fanout``
    consecutive nodes), up to the one root. Returns the nodes written (text, range and hash set;
    their memories are written by the caller)."""
    policy = consolidation_policy()
    leaves = SummaryNode.objects.filter(session_id=session_id, level=1)
    last = leaves.order_by("-position").first()
    new = [e for e in events if last is None or e.seq > last.last_seq]
    if not new:
        return []
    hashes = {e.seq: e.hash for e in new}
    groups: list[tuple[SummaryNode, _Leaf]] = []
    if (
        last is not None
        and last.event_count < policy.summary_leaf_events
        and last.tokens < policy.summary_leaf_tokens
    ):
        old = [
            _source(e)
            for e in Event.objects.filter(
                session_id=session_id,
                seq__gte=last.first_seq,
                seq__lte=last.last_seq,
                redacted_at__isnull=True,  # an erased event's text is never read back into a summary
            ).order_by("seq")
        ]
        groups.append((last, _Leaf(old, sum(_event_tokens(e) for e in old))))
    next_position = 0 if last is None else last.position + 1
    for event in new:
        source = _source(event)
        tokens = _event_tokens(source)
        leaf = groups[-1][1] if groups else None
        if (
            leaf is None
            or len(leaf.events) >= policy.summary_leaf_events
            or (leaf.events and leaf.tokens + tokens > policy.summary_leaf_tokens)
        ):
            node = SummaryNode(session_id=session_id, level=1, position=next_position)
            next_position += 1
            leaf = _Leaf([], 0)
            groups.append((node, leaf))
        leaf.events.append(source)
        leaf.tokens += tokens

    written: list[SummaryNode] = []
    for node, leaf in groups:
        body, method = _summarize_leaf(leaf.events)
        last_seq = leaf.events[-1].seq
        last_hash = hashes.get(last_seq) or node.last_event_hash
        _node_set(
            node,
            first=leaf.events[0].seq,
            last=last_seq,
            count=len(leaf.events),
            last_hash=last_hash,
            body=body,
            method=method,
        )
        node.tokens, node.child_count = leaf.tokens, 0
        node.save()
        written.append(node)

    level, changed = 1, {n.position for n in written}
    fanout = policy.summary_fanout
    while True:
        count = SummaryNode.objects.filter(session_id=session_id, level=level).count()
        if count <= 1:
            break
        parents = SummaryNode.objects.filter(session_id=session_id, level=level + 1)
        if not parents.exists():
            changed = set(range(count))  # a new level: every parent is new
        for position in sorted({p // fanout for p in changed}):
            children = list(
                SummaryNode.objects.filter(
                    session_id=session_id,
                    level=level,
                    position__gte=position * fanout,
                    position__lt=(position + 1) * fanout,
                ).order_by("position")
            )
            node = parents.filter(position=position).first() or SummaryNode(
                session_id=session_id, level=level + 1, position=position
            )
            body, method = _summarize_parent([c.content for c in children])
            _node_set(
                node,
                first=children[0].first_seq,
                last=children[-1].last_seq,
                count=sum(c.event_count for c in children),
                last_hash=children[-1].last_event_hash,
                body=body,
                method=method,
            )
            node.child_count, node.tokens = len(children), estimate_tokens(node.content)
            node.save()
            written.append(node)
        changed = {n.position for n in written if n.level == level + 1}
        level += 1
    return written


def summaries_pass(*, now: datetime | None = None, batch: int | None = None) -> ConsolidationRun | None:
    """Bring every session's summary tree up to the events logged when the run started: the run
    reads the log in seq order, ``batch`` events at a time (``ENGRAM_CONSOLIDATION_BATCH``), from
    where the previous run stopped, extends the tree of each session in the batch
    (``tree_extend``) and stores each written node's text as a semantic memory of type ``summary``
    (embedded in one batch; searchable). One decision per batch records the nodes written. Sessions
    in ``UNSUMMARISED_SESSIONS`` (the jobs' own trail) and those starting with
    ``UNSUMMARISED_PREFIXES`` (one object's trail) are left out. Counts: ``events``,
    ``sessions``, ``nodes``. Returns the run, or None when one is already running."""
    size = _batch_size(batch)

    def body(run: ConsolidationRun) -> None:
        if "head" not in run.cursor:
            previous = (
                ConsolidationRun.objects.filter(job=Job.SUMMARIES, status=RunStatus.DONE)
                .order_by("-started_at", "-id")
                .first()
            )
            start = int(previous.cursor.get("after", 0)) if previous else 0
            head = ChainHead.objects.filter(pk=1).values_list("last_seq", flat=True).first() or 0
            run.cursor = {"after": start, "head": int(head)}
            run.save(update_fields=["cursor"])
        after, head = int(run.cursor["after"]), int(run.cursor["head"])
        while after < head:
            upper = min(after + size, head)
            with transaction.atomic():
                events = list(
                    Event.objects.filter(seq__gt=after, seq__lte=upper, redacted_at__isnull=True)
                    .exclude(session_id__in=UNSUMMARISED_SESSIONS)
                    .exclude(
                        session_id__regex=r"^("
                        + "|".join(p.rstrip(":") for p in UNSUMMARISED_PREFIXES)
                        + r"):"
                    )
                    .defer("search", "payload_index")
                    .order_by("seq")
                )
                by_session: dict[str, list[Event]] = {}
                for event in events:
                    by_session.setdefault(event.session_id, []).append(event)
                written: list[SummaryNode] = []
                for session_id, session_events in by_session.items():
                    written.extend(tree_extend(session_id=session_id, events=session_events))
                memories = summaries_put(
                    items=[SummaryText(n.session_id, n.content, n.memory_id) for n in written]
                )
                linked = []
                for node, memory in zip(written, memories, strict=True):
                    if node.memory_id != memory.pk:
                        node.memory = memory
                        linked.append(node)
                SummaryNode.objects.bulk_update(linked, ["memory"])
                if written:
                    decision_record(
                        agent=system_agent_get(),
                        session_id=TRAIL_SESSION,
                        actor=ACTOR,
                        content=f"Summarised events #{after + 1}–#{upper} of {len(by_session)} sessions "  # noqa: RUF001
                        f"({len(written)} summary nodes written).",
                        payload={
                            "action": "summaries_update",
                            "run_id": run.pk,
                            "through_seq": upper,
                            "nodes": [
                                [n.session_id, n.level, n.position, n.first_seq, n.last_seq] for n in written
                            ],
                        },
                    )
                after = upper
                _add(run.counts, events=len(events), sessions=len(by_session), nodes=len(written))
                run.cursor = {"after": after, "head": head}
                run.save(update_fields=["cursor", "counts"])

    return _execute(Job.SUMMARIES, now, body)


# --- the whole pass ---------------------------------------------------------------------------------


def consolidate(*, now: datetime | None = None, force: bool = False) -> list[ConsolidationRun]:
    """One consolidation pass in the current tenant, when due by its policy's ``interval_hours`` (or
    ``force``), or when a run was left unfinished: promotion, then forgetting, then summaries.
    Returns the runs made (none when not due; a job already running elsewhere is left to it)."""
    moment = now or timezone.now()
    if not force and not consolidation_due(interval_hours=consolidation_policy().interval_hours, now=moment):
        return []
    runs = []
    started = time.monotonic()
    for job in (promotion_pass, forgetting_pass, summaries_pass):
        run = job(now=now)
        if run is not None:
            runs.append(run)
    logger.info("consolidation of %s took %.1f s", current_schema(), time.monotonic() - started)
    return runs


# --- the data lifecycle's hooks (compliance.lifecycle calls them; it records why) ------------------


@contextmanager
def summaries_paused() -> Iterator[None]:
    """Hold the summary tree's job lock for the block, waiting for a running pass to end: while an
    erasure or a retention pass redacts events and removes the summaries covering them, no pass
    can read an event before its redaction and write its text into a node after the removal."""
    key = _job_key(Job.SUMMARIES)
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
