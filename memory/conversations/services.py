"""A conversation's messages in one call (``messages_add``): appended to the episodic log and made
into memories, one per turn (``turns``) or by a language model in a job (``llm``, run by
``extraction_run``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.models import Agent
from core.errors import DomainError, InvalidInput
from core.tasks import queue_on_commit
from core.tenancy import current_tenant
from memory.consolidation.llm import chat, llm_configured
from memory.embeddings import Embedder, get_embedder
from memory.episodic.models import Event, EventKind, EventRole
from memory.episodic.services import EventData, events_append
from memory.knowledge.services.asserting import fact_assert
from memory.knowledge.services.data import FactData, FactObject
from memory.semantic.models import MemoryScope, MemoryType, SemanticMemory
from memory.semantic.selectors import MemoryFilters
from memory.semantic.services.recall import memory_search
from memory.semantic.services.writes import MemoryData, WriteResult, memories_create, memory_create
from tenants.models import RetrievalPolicy

from .extraction import EXTRACTION_PROMPT, AnswerRefused, Extracted, answer_read, prompt_user
from .models import ExtractionJob, JobStatus
from .selectors import session_turns_last

TURN_ROLES = frozenset({EventRole.USER, EventRole.ASSISTANT})
"""The roles whose messages become memories without a language model (system prompts and tool
output are logged, not remembered)."""

Extraction = Literal["auto", "turns", "llm"]


@dataclass(frozen=True)
class Message:
    """One message of a conversation: ``role`` (user, assistant, system, tool), who spoke (``name``,
    "" for the role itself), the text and when it was said (timezone-aware). ``metadata`` goes into
    the message's event payload and its memory's metadata as it is."""

    role: str
    content: str
    occurred_at: datetime
    name: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MessagesAdded:
    """What ``messages_add`` did: the ``events`` appended (one per message, in order), the memories
    of the turns (``(message index, write result)``; none when a ``job`` extracts them later)."""

    events: list[Event]
    memories: list[tuple[int, WriteResult]]
    job: ExtractionJob | None = None


def spoken_time(moment: datetime) -> str:
    """A time as a conversation's transcript writes it, in UTC: ``"1:56 pm on 8 May, 2023"``."""
    utc = moment.astimezone(UTC)
    half = "pm" if utc.hour >= 12 else "am"
    return f"{(utc.hour % 12) or 12}:{utc.minute:02d} {half} on {utc.day} {utc:%B}, {utc.year}"


def turn_content(message: Message) -> str:
    """The memory a turn becomes without a language model: who said it, when, and what
    (``"Caroline (1:56 pm on 8 May, 2023): <text>"``). The speaker says whose fact it is and the
    time anchors relative ones ("yesterday"): both are words later questions ask with."""
    return f"{message.name or message.role} ({spoken_time(message.occurred_at)}): {message.content}"


CONTEXT_TURNS = 1
"""How many turns of its session before a turn its context text holds (``turn_context_texts``)."""


def turn_context_texts(turns: Sequence[Message], *, before: Sequence[Message] = ()) -> list[str]:
    """The context text of each of ``turns`` (one session's, in order): the ``CONTEXT_TURNS`` turns
    before it in its session (``before``: the session's last turns already stored, oldest first,
    then the earlier ``turns``), one ``"<name>: <content>"`` line each, then the turn's memory
    (``turn_content``); a session's first turn has only its memory."""
    spoken = [*before, *turns]
    offset = len(before)
    texts = []
    for i, turn in enumerate(turns):
        earlier = spoken[max(0, offset + i - CONTEXT_TURNS) : offset + i]
        lines = [f"{m.name or m.role}: {m.content}" for m in earlier]
        texts.append("\n".join([*lines, turn_content(turn)]))
    return texts


def turn_vectors(
    turns: Sequence[Message], *, embedder: Embedder, before: Sequence[Message] = ()
) -> np.ndarray:
    """The vectors of ``turns``' memories, shape ``(len(turns), embedder.dimensions)``, unit rows:
    the normalised sum of the embedding of the turn's memory (``turn_content``) and of its context
    text (``turn_context_texts``), an equal say. A reply ("Yes! Took it last week") names its topic
    only with the turn it answers, so its vector carries that turn; the turn's own embedding keeps
    its own say (the context alone drowned turns that state their topic). The memory's text, and so
    its words, stay the turn's own. One model call over the distinct texts (a session's first turn
    is embedded once). The one rule of a conversation turn's vector."""
    if not turns:
        return np.empty((0, embedder.dimensions), dtype=np.float32)
    own = [turn_content(m) for m in turns]
    context = turn_context_texts(turns, before=before)
    distinct = list(dict.fromkeys([*own, *context]))
    row = {text: i for i, text in enumerate(distinct)}
    embedded = embedder.embed(distinct)
    summed = embedded[[row[t] for t in own]] + embedded[[row[t] for t in context]]
    norms = np.linalg.norm(summed, axis=1, keepdims=True)
    return (summed / np.clip(norms, 1e-12, None)).astype(np.float32)


def _session_before(*, agent: Agent, session_id: str, data_subject: str) -> list[Message]:
    """The last ``CONTEXT_TURNS`` turns ``agent`` logged in ``session_id`` about ``data_subject``,
    oldest first (``session_turns_last``), as messages."""
    return [
        Message(role=role, content=content, occurred_at=timezone.now(), name=name)
        for role, name, content in session_turns_last(
            agent=agent,
            session_id=session_id,
            data_subject=data_subject,
            turn_roles=TURN_ROLES,
            limit=CONTEXT_TURNS,
        )
    ]


def _mode(extraction: Extraction) -> Literal["turns", "llm"]:
    """The extraction ``extraction`` asks for: ``auto`` is ``llm`` when a chat endpoint is
    configured. Raises ``InvalidInput`` (field ``extraction``) for ``llm`` without one."""
    if extraction == "turns":
        return "turns"
    if extraction == "llm" and not llm_configured():
        raise InvalidInput("No language model endpoint is configured.", field="extraction")
    return "llm" if llm_configured() else "turns"


def _check(messages: Sequence[Message], scope: str) -> None:
    """Raises ``InvalidInput`` for an empty or oversized batch, an unknown role or a scope other
    than private or shared (the rest is ``events_append``'s to check)."""
    limit = settings.ENGRAM["MAX_MEMORY_BATCH"]
    if not messages or len(messages) > limit:
        raise InvalidInput(f"Send between 1 and {limit} messages.", field="messages")
    for i, message in enumerate(messages):
        if message.role not in EventRole.values:
            raise InvalidInput(f"Unknown role {message.role!r}.", field=f"messages[{i}].role")
        if not message.content.strip():
            raise InvalidInput("Content may not be blank.", field=f"messages[{i}].content")
    if scope not in (MemoryScope.PRIVATE, MemoryScope.SHARED):
        raise InvalidInput("Use private or shared.", field="scope")


def _formed(result: WriteResult) -> dict[str, Any]:
    """What a turn's event payload says of its memory: its id, the write's outcome and, for an
    update, the memory it superseded."""
    formed = {"memory_id": str(result.memory.pk), "memory_outcome": result.outcome}
    if result.supersedes is not None:
        formed["memory_supersedes"] = str(result.supersedes)
    return formed


def _event(message: Message, *, session_id: str, data_subject: str, extra: dict[str, Any]) -> EventData:
    payload = {**message.metadata, **({"name": message.name} if message.name else {}), **extra}
    return EventData(
        session_id=session_id,
        kind=EventKind.MESSAGE,
        role=message.role,
        content=message.content,
        occurred_at=message.occurred_at,
        payload=payload,
        data_subject=data_subject,
    )


def _turn_memories(
    turns: Sequence[Message],
    *,
    session_id: str,
    data_subject: str,
    scope: str,
    tags: Sequence[str],
    embedder: Embedder,
    before: Sequence[Message] = (),
) -> list[MemoryData]:
    """The memory of each turn (``turn_content``), its vector computed here (``turn_vectors``;
    ``before``: the session's turns already stored; one model call)."""
    contents = [turn_content(m) for m in turns]
    vectors = turn_vectors(turns, embedder=embedder, before=before)
    return [
        MemoryData(
            content=content,
            memory_type=MemoryType.OBSERVATION,
            scope=scope,
            session_id=session_id,
            tags=tags,
            metadata={
                **m.metadata,
                "source": m.metadata.get("source", "conversation"),
                "role": m.role,
                **({"name": m.name} if m.name else {}),
            },
            embedding=vector.tolist(),
            embedding_model=embedder.name,
            data_subject=data_subject,
        )
        for m, content, vector in zip(turns, contents, vectors, strict=True)
    ]


def messages_add(
    *,
    agent: Agent,
    session_id: str,
    messages: Sequence[Message],
    policy: RetrievalPolicy,
    data_subject: str = "",
    scope: str = MemoryScope.PRIVATE,
    tags: Sequence[str] = (),
    extraction: Extraction = "auto",
    embedder: Embedder | None = None,
) -> MessagesAdded:
    """Append ``messages`` to ``session_id``'s log as ``message`` events of ``agent`` about
    ``data_subject``, and form memories from them, all or nothing (one transaction).

    ``turns`` (the default without a chat endpoint): each user and assistant message becomes an
    ``observation`` memory (``turn_content``; ``scope``, ``tags``, the session and subject) through
    the write pipeline (``memories_create``: duplicates reinforce, near ones that say something else
    are kept apart); its event's payload names the memory (``memory_id``, ``memory_outcome``). Each
    turn's vector also carries the turn before it in the session (``turn_vectors``; the last one
    stored is read first). The texts are embedded before the transaction, so the chain
    head is locked only for the writes.
    ``llm`` (``auto`` with a chat endpoint configured): the events and a queued ``ExtractionJob``
    are stored, and the worker extracts the memories (``extraction_run``).

    Raises ``InvalidInput`` (fields ``messages``, ``messages[i].<field>``, ``scope``,
    ``extraction``) and what ``events_append`` and ``memories_create`` raise
    (``EmbedderUnavailable``: nothing is stored)."""
    _check(messages, scope)
    mode = _mode(extraction)
    if mode == "llm":
        return _messages_for_job(
            agent=agent,
            session_id=session_id,
            messages=messages,
            data_subject=data_subject,
            scope=scope,
            tags=tags,
        )
    embedder = embedder or get_embedder()
    turns = [i for i, m in enumerate(messages) if m.role in TURN_ROLES]
    items = _turn_memories(
        [messages[i] for i in turns],
        session_id=session_id,
        data_subject=data_subject,
        scope=scope,
        tags=tags,
        embedder=embedder,
        before=_session_before(agent=agent, session_id=session_id, data_subject=data_subject),
    )
    with transaction.atomic():
        results = (
            memories_create(agent=agent, items=items, policy=policy, embedder=embedder, batch=True)
            if items
            else []
        )
        formed = dict(zip(turns, results, strict=True))
        events = events_append(
            agent=agent,
            events=[
                _event(
                    message,
                    session_id=session_id,
                    data_subject=data_subject,
                    extra=(_formed(formed[i]) if i in formed else {}),
                )
                for i, message in enumerate(messages)
            ],
        )
    return MessagesAdded(events=events, memories=list(formed.items()))


def _messages_for_job(
    *,
    agent: Agent,
    session_id: str,
    messages: Sequence[Message],
    data_subject: str,
    scope: str,
    tags: Sequence[str],
) -> MessagesAdded:
    """``messages_add`` with a language model: the events and a queued job, its task queued on
    commit."""
    with transaction.atomic():
        events = events_append(
            agent=agent,
            events=[_event(m, session_id=session_id, data_subject=data_subject, extra={}) for m in messages],
        )
        job = ExtractionJob.objects.create(
            agent=agent,
            session_id=session_id,
            data_subject=data_subject,
            event_ids=[e.pk for e in events],
            scope=scope,
            tags=list(dict.fromkeys(tags)),
            model=settings.ENGRAM.get("LLM_MODEL", ""),
        )
        queue_on_commit("memory.conversations.tasks.extract", str(job.pk))
    return MessagesAdded(events=events, memories=[], job=job)


NEIGHBOURS_PER_MESSAGE = 3
NEIGHBOURS = 20  # existing memories shown to the model at most


def _neighbours(
    job: ExtractionJob, events: Sequence[Event], policy: RetrievalPolicy
) -> dict[str, SemanticMemory]:
    """The existing memories nearest to the job's messages that its agent may see, of exactly the
    job's end user (the search's ``data_subject`` filter; "" for none), at most ``NEIGHBOURS``, by
    prompt id (``m1``, ``m2``, ...)."""
    found: dict[Any, SemanticMemory] = {}
    for event in events:
        if event.role not in TURN_ROLES:
            continue
        hits = memory_search(
            agent=job.agent,
            query=event.content,
            policy=policy,
            k=NEIGHBOURS_PER_MESSAGE,
            filters=MemoryFilters(data_subject=job.data_subject),
            touch=False,
        )
        for hit in hits:
            if len(found) < NEIGHBOURS:
                found.setdefault(hit.memory.pk, hit.memory)
    return {f"m{i}": memory for i, memory in enumerate(found.values(), start=1)}


def _transcript(events: Sequence[Event]) -> list[str]:
    return [
        f"[{i}] {e.payload.get('name') or e.role} ({e.role}, {spoken_time(e.occurred_at)}): {e.content}"
        for i, e in enumerate(events, start=1)
    ]


def _job_end(
    job: ExtractionJob, *, error: str = "", decisions: list[dict[str, Any]] | None = None
) -> ExtractionJob:
    """Save ``job`` as ``failed`` with ``error``, or ``done`` with its ``decisions``."""
    job.status = JobStatus.FAILED if error else JobStatus.DONE
    job.error = error
    job.decisions = decisions or []
    job.finished_at = timezone.now()
    job.save(update_fields=["status", "error", "decisions", "finished_at", "prompt", "answer"])
    return job


def extraction_run(*, job_id: Any) -> ExtractionJob:
    """Run the extraction job ``job_id`` of the current tenant (a finished one is returned as it is).

    The prompt (``EXTRACTION_PROMPT``, then the nearest existing memories and the messages) goes to
    the chat endpoint; the answer is read whole (``answer_read``) and applied in one transaction
    (``_decisions_apply``) that also ends the job ``done`` with its decisions. The prompt and the
    raw answer are kept either way. A timed-out or unreachable endpoint, an empty or malformed
    answer, the embedder unavailable, or an item a write refuses ends the job ``failed`` with the
    reason, and nothing of the answer is stored (the messages stay in the log). Raises ``ExtractionJob.DoesNotExist``."""
    job = ExtractionJob.objects.select_related("agent").get(pk=job_id)
    if job.status in (JobStatus.DONE, JobStatus.FAILED):
        return job
    job.status = JobStatus.RUNNING
    job.attempts += 1
    job.save(update_fields=["status", "attempts"])
    events = list(Event.objects.filter(pk__in=job.event_ids, redacted_at__isnull=True).order_by("seq"))
    if not events:
        return _job_end(job, error="the messages were erased")
    policy = current_tenant().retrieval_policy
    try:
        neighbours = _neighbours(job, events, policy)
        user = prompt_user(_transcript(events), {key: m.content for key, m in neighbours.items()})
        job.prompt = f"{EXTRACTION_PROMPT}\n\n{user}"
        job.answer = chat(EXTRACTION_PROMPT, user)
        extracted = answer_read(job.answer, known=neighbours)
    except AnswerRefused as exc:
        return _job_end(job, error=str(exc))
    except DomainError as exc:  # the chat endpoint (LLMUnavailable) or the embedder unavailable
        return _job_end(job, error=exc.message)
    try:
        with transaction.atomic():
            decisions = _decisions_apply(job, extracted, neighbours, events, policy)
            return _job_end(job, decisions=decisions)
    except DomainError as exc:
        return _job_end(job, error=f"a write refused the answer: {exc.message} ({exc.field or 'input'})")


def _decisions_apply(
    job: ExtractionJob,
    extracted: Extracted,
    neighbours: dict[str, SemanticMemory],
    events: Sequence[Event],
    policy: RetrievalPolicy,
) -> list[dict[str, Any]]:
    """Write what ``extracted`` decides, in order (memories, then facts), and return one decision
    per item: an ``add`` or ``update`` goes through the write pipeline (``memory_create``; an update
    replaces the memory it names), a ``noop`` writes nothing, a fact is asserted (``fact_assert``:
    a contradiction is opened as for any assert). Raises what those services raise."""
    source = events[-1].pk
    decisions: list[dict[str, Any]] = []
    for item in extracted.memories:
        decision: dict[str, Any] = {"kind": "memory", "action": item.action, "text": item.text}
        old = neighbours[item.target] if item.target else None
        if old is not None:
            decision["existing_id"] = str(old.pk)
        if item.action != "noop":
            result = memory_create(
                agent=job.agent,
                data=MemoryData(
                    content=item.text,
                    scope=job.scope,
                    session_id=job.session_id,
                    tags=job.tags,
                    metadata={"source": "extraction", "job": str(job.pk)},
                    source_event_id=source,
                    data_subject=job.data_subject,
                    supersedes=old.pk if item.action == "update" and old is not None else None,
                ),
                policy=policy,
            )
            decision.update(memory_id=str(result.memory.pk), outcome=result.outcome)
            if result.supersedes is not None:
                decision["supersedes"] = str(result.supersedes)
        decisions.append(decision)
    for fact in extracted.facts:
        asserted = fact_assert(
            agent=job.agent,
            data=FactData(
                subject=fact.subject,
                predicate=fact.predicate,
                object=FactObject.from_wire(fact.obj),
                session_id=job.session_id,
                source_event_id=source,
                data_subject=job.data_subject,
            ),
        )
        decisions.append(
            {
                "kind": "fact",
                "action": "assert",
                "subject": fact.subject,
                "predicate": fact.predicate,
                "object": fact.obj,
                "fact_id": asserted.fact.pk,
                "outcome": asserted.outcome,
                "contradiction_id": asserted.contradiction.pk if asserted.contradiction else None,
            }
        )
    return decisions


def jobs_erase(*, job_ids: Sequence[Any]) -> list[str]:
    """Delete the extraction jobs ``job_ids`` of the current tenant (their prompts and answers quote
    the messages: an erasure or retention of those takes the jobs too). Returns the ids deleted."""
    with transaction.atomic():
        ids = [
            str(pk) for pk in ExtractionJob.objects.filter(pk__in=list(job_ids)).values_list("pk", flat=True)
        ]
        ExtractionJob.objects.filter(pk__in=ids).delete()
    return ids
