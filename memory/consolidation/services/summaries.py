"""The episodic summary tree: leaves over consecutive events of a session, parents over
``summary_fanout`` consecutive nodes, up to one root; each node's text also a ``summary`` memory."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from agents.services import system_agent_get
from memory.episodic.models import ChainHead, Event
from memory.episodic.services import decision_record
from memory.semantic.selectors import consolidation_policy
from memory.semantic.services.summaries import SummaryText, summaries_put
from tenants.models import ConsolidationPolicy

from .. import llm
from ..models import ConsolidationRun, Job, RunStatus, SummaryNode
from ..summarizer import SourceEvent, estimate_tokens, header, summarize_events, summarize_summaries
from .runs import (
    ACTOR,
    TRAIL_SESSION,
    UNSUMMARISED_PREFIXES,
    UNSUMMARISED_SESSIONS,
    batch_size,
    counts_add,
    run_execute,
)

logger = logging.getLogger(__name__)


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
    written: list[SummaryNode] = []
    for node, leaf in _leaves(session_id, last, new, policy):
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
    return _parents_write(session_id, written, policy.summary_fanout)


def _leaves(
    session_id: str, last: SummaryNode | None, new: Sequence[Event], policy: ConsolidationPolicy
) -> list[tuple[SummaryNode, _Leaf]]:
    """The leaves ``new`` events go to, with all their events: the ``last`` leaf while it has room
    (its events read back, unredacted), then new unsaved leaves after it."""
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
    return groups


def _parents_write(session_id: str, written: list[SummaryNode], fanout: int) -> list[SummaryNode]:
    """Rewrite, level by level up to the one root, the parents of the nodes ``written`` (each parent
    covers ``fanout`` consecutive nodes); returns ``written`` with the parents appended."""
    level, changed = 1, {n.position for n in written}
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
    size = batch_size(batch)

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
                counts_add(run.counts, events=len(events), sessions=len(by_session), nodes=len(written))
                run.cursor = {"after": after, "head": head}
                run.save(update_fields=["cursor", "counts"])

    return run_execute(Job.SUMMARIES, now, body)
