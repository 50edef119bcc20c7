"""Reads of checkpoints from PostgreSQL (the system of record). The Redis-first restore is a service.

Every read is scoped to one agent: to its stream in a session (checkpoints are per agent within a
session, see ``memory.checkpoints.services``), each one query on the unique index
``(session_id, agent, step_index)`` or ``(session_id, agent, idempotency_key)``; or, for LangGraph's
listing without a thread, to its streams in every session (``checkpoint_tuples_all``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from django.db import connection
from django.db.models import BooleanField, F, Func, JSONField, Q, QuerySet, Subquery
from django.db.models.expressions import RawSQL
from psycopg.types.numeric import Int8

from agents.models import Agent
from agents.subjects import subject_asked, subject_filter_q, subject_visible_q
from core.db.base import fetch_prepared

from .models import Checkpoint, CheckpointBlob, CheckpointWrite, document_json


def _stream(*, agent: Agent, session_id: str) -> QuerySet[Checkpoint]:
    """``agent``'s stream in the session: the checkpoints it may read (for an agent acting for one
    end user, those of its subject or of none: ``agents.subjects``)."""
    return Checkpoint.objects.select_related("agent").filter(
        subject_visible_q(agent), session_id=session_id, agent=agent
    )


def checkpoint_list(
    *,
    agent: Agent,
    session_id: str,
    after_step: int = -1,
    checkpoint_ns: str | None = None,
    data_subject: str | None = None,
) -> QuerySet[Checkpoint]:
    """``agent``'s checkpoints in the session with a step after ``after_step``, in step order
    (``checkpoint_ns``: only that namespace; ``None``: all; ``data_subject``: only that end user's,
    ``SubjectRefused`` when ``agent`` acts for another).

    ``state`` and ``plan`` are deferred (up to 1 MiB each): use ``Checkpoint.summary()`` on the rows,
    or ``checkpoint_get`` for one checkpoint in full.
    """
    subject = subject_asked(agent, data_subject)
    rows = _stream(agent=agent, session_id=session_id).filter(
        subject_filter_q(subject), step_index__gt=after_step
    )
    if checkpoint_ns is not None:
        rows = rows.filter(checkpoint_ns=checkpoint_ns)
    return rows.defer("state", "plan", "serialized").order_by("step_index")


def _of_stream(function: str, last: str) -> Func:
    """A call of the schema's SQL function ``function`` (memory/sql) on a checkpoint's stream
    (session, agent, namespace) and its column ``last``, answering JSON."""
    fields = (F("session_id"), F("agent_id"), F("checkpoint_ns"), F(last))
    return Func(*fields, function=function, output_field=JSONField())


def with_channels(rows: QuerySet[Checkpoint]) -> QuerySet[Checkpoint]:
    """``rows`` with ``channel_documents``: each checkpoint's channel values by version as the API
    shows them (``{channel: {"version", "value"}}``, ``{}`` for one saved whole), assembled in the
    same query by the schema's function ``memory_checkpoint_channels`` (memory/sql)."""
    return rows.annotate(channel_documents=_of_stream("memory_checkpoint_channels", "channel_versions"))


def channels_of(checkpoint: Checkpoint) -> dict[str, Any]:
    """The ``channel_documents`` of a checkpoint loaded through ``with_channels`` (``AttributeError``
    for one loaded without it: its channels were never read)."""
    return dict(getattr(checkpoint, "channel_documents") or {})  # noqa: B009 (an annotation)


def with_pending_writes(rows: QuerySet[Checkpoint]) -> QuerySet[Checkpoint]:
    """``rows`` with ``write_documents``: each checkpoint's pending writes as the API shows them (a
    list of ``CheckpointWrite.document()`` in ``(task_path, task_id, idx)`` order), in the same
    query (the schema's function ``memory_checkpoint_pending_writes``, memory/sql)."""
    return rows.annotate(write_documents=_of_stream("memory_checkpoint_pending_writes", "idempotency_key"))


def checkpoint_get(*, agent: Agent, session_id: str, step_index: int) -> Checkpoint | None:
    """``agent``'s checkpoint at ``step_index`` in the session, in full (``with_channels``), or ``None``."""
    return with_channels(_stream(agent=agent, session_id=session_id).filter(step_index=step_index)).first()


def checkpoint_by_key(*, agent: Agent, session_id: str, idempotency_key: str) -> Checkpoint | None:
    """The checkpoint ``agent`` saved in the session under ``idempotency_key``, in full
    (``with_channels``), or ``None``."""
    return with_channels(
        _stream(agent=agent, session_id=session_id).filter(idempotency_key=idempotency_key)
    ).first()


# state, plan and metadata as jsonb text, spliced into the document as they are; the agent is the
# caller (no join). The index probe of checkpoint_ns_step_idx.
_LATEST_SQL = (
    "SELECT id, step_index, idempotency_key, schema_version, created_at, parent_key, "
    "metadata::text, state::text, plan::text, serialized_type, serialized, "
    "memory_checkpoint_channels(session_id, agent_id, checkpoint_ns, channel_versions)::text "
    "FROM memory_checkpoint WHERE session_id = %s AND agent_id = %s AND checkpoint_ns = %s "
    "AND (%s = '' OR data_subject IN ('', %s)) "
    "ORDER BY step_index DESC LIMIT 1"
)


class LatestDocument(NamedTuple):
    """A checkpoint as ``checkpoint_latest_document`` reads it: its id, step and JSON document."""

    pk: int
    step: int
    body: bytes


def checkpoint_latest_document(
    *, agent: Agent, session_id: str, checkpoint_ns: str = ""
) -> LatestDocument | None:
    """``agent``'s checkpoint with the highest step index in the session and namespace: its id,
    step and document JSON bytes (``models.document_json``), or ``None``.

    One probe of ``checkpoint_ns_step_idx`` as a prepared statement (``core.db.base.fetch_prepared``:
    planned once per connection; planning it on every call cost more than running it), and no
    ORM or model instance: state, plan, metadata and the channel values (its blobs, assembled by
    ``memory_checkpoint_channels`` in the same statement) come back as ``jsonb`` text and go into the
    document as they are (neither parsed nor serialised again), and the agent is the caller. For
    an agent acting for one end user, the latest of the checkpoints of its subject or of none
    (``agents.subjects.subject_visible_q`` in SQL).
    """
    bound = agent.acting_for
    row = fetch_prepared(_LATEST_SQL, [session_id, Int8(agent.pk), checkpoint_ns, bound, bound])
    if row is None:
        return None
    pk, step, key, version, created_at, parent_key, metadata, state, plan, kind, data, channels = row
    return LatestDocument(
        pk,
        step,
        document_json(
            pk=pk,
            session_id=session_id,
            step_index=step,
            idempotency_key=key,
            schema_version=version,
            agent_name=agent.name,
            created_at=created_at,
            checkpoint_ns=checkpoint_ns,
            parent_key=parent_key,
            metadata_json=metadata,
            state_json=state,
            plan_json=plan,
            serialized_type=kind,
            serialized=data,
            channels_json=channels,
        ),
    )


def checkpoint_tuples(
    *,
    agent: Agent,
    session_id: str,
    checkpoint_ns: str | None = None,
    key: str | None = None,
    before: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> QuerySet[Checkpoint]:
    """``agent``'s checkpoints in the session in full, with their channel values and pending writes
    (``with_channels``, ``with_pending_writes``: one query): LangGraph's ``list`` and ``get_tuple``.

    Filters: ``checkpoint_ns`` (``None``: every namespace), ``key`` (one idempotency key),
    ``before`` (saved before the checkpoint with that key, in its stream order; an unknown key
    matches nothing), ``metadata`` (JSON containment: every key given has that value). Not
    ordered: the page orders it (newest first).
    """
    rows = _filtered(
        _stream(agent=agent, session_id=session_id), checkpoint_ns=checkpoint_ns, metadata=metadata
    )
    if key is not None:
        rows = rows.filter(idempotency_key=key)
    if before is not None:
        rows = _saved_before(rows, agent=agent, session_id=session_id, key=before, order="step_index")
    return with_pending_writes(with_channels(rows))


def checkpoint_tuples_all(
    *,
    agent: Agent,
    checkpoint_ns: str | None = None,
    before: tuple[str, str] | None = None,
    metadata: dict[str, Any] | None = None,
) -> QuerySet[Checkpoint]:
    """``agent``'s checkpoints in every session, in full with their channel values and pending
    writes (as ``checkpoint_tuples``): LangGraph's ``list`` without a thread. For an agent acting
    for one end user, those of its subject or of none (``agents.subjects``).

    Filters as ``checkpoint_tuples``: ``checkpoint_ns``, ``metadata``; ``before`` names a checkpoint
    by ``(session_id, idempotency_key)`` and keeps those saved before it in the agent's save order
    (the row id, which within a stream follows the step order; an unknown checkpoint matches
    nothing). Not ordered: the page orders it (newest first, ``-id``, on ``checkpoint_agent_id_idx``).
    """
    rows = _filtered(
        Checkpoint.objects.select_related("agent").filter(subject_visible_q(agent), agent=agent),
        checkpoint_ns=checkpoint_ns,
        metadata=metadata,
    )
    if before is not None:
        session_id, key = before
        rows = _saved_before(rows, agent=agent, session_id=session_id, key=key, order="pk")
    return with_pending_writes(with_channels(rows))


def _saved_before(
    rows: QuerySet[Checkpoint], *, agent: Agent, session_id: str, key: str, order: str
) -> QuerySet[Checkpoint]:
    """``rows`` below ``agent``'s checkpoint ``key`` in the session in ``order`` (a column: the
    step, or the id); none when there is no such checkpoint (``< NULL`` holds for no row)."""
    named = Checkpoint.objects.filter(session_id=session_id, agent=agent, idempotency_key=key)
    return rows.filter(**{f"{order}__lt": Subquery(named.values(order)[:1])})


def _filtered(
    rows: QuerySet[Checkpoint], *, checkpoint_ns: str | None, metadata: dict[str, Any] | None
) -> QuerySet[Checkpoint]:
    """``rows`` of namespace ``checkpoint_ns`` (``None``: every one) whose metadata holds ``metadata``
    (JSON containment: every key given has that value)."""
    if checkpoint_ns is not None:
        rows = rows.filter(checkpoint_ns=checkpoint_ns)
    if metadata:
        rows = rows.filter(metadata__contains=metadata)
    return rows


def checkpoint_stream_ids(*, agent: Agent, session_id: str) -> tuple[list[int], list[str]]:
    """The ids of ``agent``'s checkpoints in the session and the namespaces they are in (sorted)."""
    rows = list(
        Checkpoint.objects.filter(session_id=session_id, agent=agent).values_list("pk", "checkpoint_ns")
    )
    return [pk for pk, _ in rows], sorted({ns for _, ns in rows})


def checkpoint_latest_step(*, agent: Agent, session_id: str) -> int | None:
    """The highest step index ``agent`` saved in the session, or ``None`` when it saved none."""
    return (
        Checkpoint.objects.filter(session_id=session_id, agent=agent)
        .order_by("-step_index")
        .values_list("step_index", flat=True)
        .first()
    )


def checkpoint_stream_head(
    *, agent: Agent, session_id: str, idempotency_key: str
) -> tuple[int | None, int | None]:
    """``(latest step, id of the checkpoint saved under idempotency_key)`` of ``agent``'s stream in
    the session, each ``None`` when there is none: what a save checks, in one round trip (one probe
    of each unique index) instead of two queries."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT step_index FROM memory_checkpoint WHERE session_id = %s AND agent_id = %s "
            "        ORDER BY step_index DESC LIMIT 1), "
            "       (SELECT id FROM memory_checkpoint WHERE session_id = %s AND agent_id = %s "
            "        AND idempotency_key = %s)",
            [session_id, agent.pk, session_id, agent.pk, idempotency_key],
        )
        latest, by_key = cursor.fetchone()
    return latest, by_key


def checkpoint_writes_of(*, checkpoints: list[tuple[str, int, str, str]]) -> QuerySet[CheckpointWrite]:
    """The pending writes of the checkpoints named ``(session_id, agent id, checkpoint_ns, key)``,
    in ``(task_path, task_id, idx)`` order (LangGraph's ``writes_sort_key``)."""
    if not checkpoints:
        return CheckpointWrite.objects.none()
    match = Q()
    for session_id, agent_id, ns, key in checkpoints:
        match |= Q(session_id=session_id, agent_id=agent_id, checkpoint_ns=ns, checkpoint_key=key)
    return CheckpointWrite.objects.filter(match).order_by("task_path", "task_id", "idx")


def _of_streams(streams: list[tuple[str, int, str]]) -> Q:
    """Rows of the streams named ``(session_id, agent id, checkpoint_ns)`` (none for ``[]``)."""
    match = Q(pk__in=[])
    for session_id, agent_id, ns in streams:
        match |= Q(session_id=session_id, agent_id=agent_id, checkpoint_ns=ns)
    return match


# a blob is named while a checkpoint of its stream has its (channel, version) in channel_versions
_NAMED_SQL = (
    "EXISTS (SELECT FROM memory_checkpoint c WHERE c.session_id = memory_checkpointblob.session_id "
    "AND c.agent_id = memory_checkpointblob.agent_id AND c.checkpoint_ns = memory_checkpointblob.checkpoint_ns "
    "AND c.channel_versions ->> memory_checkpointblob.channel = memory_checkpointblob.version)"
)


def checkpoint_blobs_unnamed(rows: QuerySet[CheckpointBlob]) -> QuerySet[CheckpointBlob]:
    """The blobs of ``rows`` that no checkpoint of their stream names (no ``channel_versions``
    holds their ``(channel, version)``): a checkpoint's values outlived by their last reader."""
    return rows.alias(named=RawSQL(_NAMED_SQL, [], output_field=BooleanField())).filter(named=False)


def checkpoint_blobs_released(erased: list[tuple[str, int, str, dict[str, str], str]]) -> list[int]:
    """The ids of the blobs that go with the checkpoints ``erased`` (their ``(session_id, agent id,
    checkpoint_ns, channel_versions, data_subject)``, already deleted): every blob of their streams
    that no checkpoint left names, and each blob an erased checkpoint names that is about its end
    user (the same non-empty ``data_subject``), even if a checkpoint left names it too."""
    streams = sorted({(s, a, ns) for s, a, ns, _, _ in erased})
    about = Q(pk__in=[])
    for session_id, agent_id, ns, versions, subject in erased:
        if subject and versions:
            named = Q(pk__in=[])
            for channel, version in versions.items():
                named |= Q(channel=channel, version=version)
            about |= (
                Q(session_id=session_id, agent_id=agent_id, checkpoint_ns=ns, data_subject=subject) & named
            )
    unnamed = checkpoint_blobs_unnamed(CheckpointBlob.objects.filter(_of_streams(streams)))
    return sorted(
        set(unnamed.values_list("pk", flat=True))
        | set(CheckpointBlob.objects.filter(about).values_list("pk", flat=True))
    )
