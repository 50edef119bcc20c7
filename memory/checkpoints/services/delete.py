"""Deleting checkpoints: an agent's stream in a session (LangGraph's ``delete_thread``, held rows
refused) and an erasure's rows, with their pending writes, channel values (blobs) and Redis copies."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from django.db import transaction

from agents.models import Agent
from agents.subjects import SubjectHeld, subject_visible_q
from core.errors import NotFound, PermissionDenied, ServiceUnavailable
from core.holds import holds_check
from core.locks import advisory_xact_lock
from core.redis import check_id
from memory.episodic.models import Event
from memory.episodic.services import decision_record

from .. import selectors
from ..models import Checkpoint, CheckpointBlob, CheckpointWrite
from .cache import cache_key, copies_drop


@dataclass(frozen=True)
class ThreadDeleted:
    """What ``checkpoints_delete`` removed from one agent's stream in a session, and the decision
    event that records it (``None`` when there was nothing to delete)."""

    agent: str
    checkpoints: int
    writes: int
    blobs: int
    namespaces: list[str]
    event: Event | None


def checkpoints_delete(
    *, agent: Agent, session_id: str, owner_name: str | None = None, may_curate: bool = False
) -> ThreadDeleted:
    """Delete a stream of checkpoints in ``session_id`` (every namespace, with their pending
    writes and channel values): LangGraph's ``delete_thread``. The stream is ``agent``'s own, or with ``owner_name``
    that agent's, which needs ``may_curate`` (a key with the ``curate`` scope) unless it names
    ``agent`` itself. The delete is recorded as a ``decision`` event of ``agent`` in the session
    (payload: ``action`` ``checkpoints_deleted``, the stream's ``agent``, the counts and namespaces);
    after the commit the Redis copies of the stream's namespaces are dropped, leaving tombstones
    that refuse a late write of a deleted checkpoint (``cache.copies_drop``; when Redis cannot be
    reached, this process does it at its next checkpoint call that reaches Redis).

    Raises ``InvalidInput`` (bad session id), ``PermissionDenied`` (another agent's stream without
    ``may_curate``), ``NotFound`` (field ``agent``: no such agent in the tenant), ``Conflict``
    (field ``session_id``) when a legal hold covers a checkpoint or channel value of the stream:
    nothing is deleted;
    ``SubjectHeld`` (403) when ``agent`` acts for one end user and the stream holds another's.
    """
    check_id(session_id, field="session_id")
    owner = agent
    if owner_name is not None and owner_name != agent.name:
        if not may_curate:
            raise PermissionDenied(
                "Checkpoints are per agent: only their agent, or a key with the 'curate' scope, may "
                "delete another agent's checkpoints.",
                field="agent",
            )
        found = Agent.objects.filter(name=owner_name).first()
        if found is None:
            raise NotFound(f"No agent named {owner_name!r}.", field="agent")
        owner = found
    with transaction.atomic():
        advisory_xact_lock("ckpt", session_id, owner.pk)
        ids, namespaces = selectors.checkpoint_stream_ids(agent=owner, session_id=session_id)
        if agent.acting_for:
            other = Checkpoint.objects.filter(pk__in=ids).exclude(subject_visible_q(agent)).first()
            if other is not None:
                raise SubjectHeld(bound=agent.acting_for, field="session_id")
        holds_check(layer="checkpoints", rows=Checkpoint.objects.filter(pk__in=ids), field="session_id")
        blob_rows = CheckpointBlob.objects.filter(session_id=session_id, agent=owner)
        holds_check(layer="checkpoints", rows=blob_rows, field="session_id")
        writes, _ = CheckpointWrite.objects.filter(session_id=session_id, agent=owner).delete()
        blobs, _ = blob_rows.delete()
        if not ids and not writes and not blobs:
            return ThreadDeleted(
                agent=owner.name, checkpoints=0, writes=0, blobs=0, namespaces=[], event=None
            )
        Checkpoint.objects.filter(pk__in=ids).delete()
        event = decision_record(
            agent=agent,
            session_id=session_id,
            content=(
                f"Deleted {len(ids)} checkpoint(s), {writes} pending write(s) and {blobs} channel "
                f"value(s) of agent {owner.name} in this session."
            ),
            payload={
                "action": "checkpoints_deleted",
                "agent": owner.name,
                "checkpoints": len(ids),
                "writes": writes,
                "blobs": blobs,
                "namespaces": namespaces,
            },
        )
        # every checkpoint of the stream is deleted under its lock: a later save has a larger id
        gone = {cache_key(session_id, owner.pk, ns): max(ids) for ns in namespaces}
        transaction.on_commit(partial(copies_drop, gone))
    return ThreadDeleted(
        agent=owner.name, checkpoints=len(ids), writes=writes, blobs=blobs, namespaces=namespaces, event=event
    )


def checkpoints_erase(*, checkpoint_ids: list[int]) -> tuple[list[int], list[str]]:
    """Delete the checkpoints ``checkpoint_ids`` of the current tenant with their pending writes and
    the channel values that go with them (``selectors.checkpoint_blobs_released``; one a legal hold
    covers stays), then the Redis copies of the streams they were in (the cached latest may be one
    of them; the next restore reads what is left in PostgreSQL), leaving tombstones that refuse a
    late write of a deleted checkpoint (``cache.copies_drop``: a re-warm or a save's write that
    started before the delete). Retention and erasure both delete checkpoints through this
    (``compliance.lifecycle.layers``). Returns ``(ids deleted, Redis keys deleted)``.

    Raises ``ServiceUnavailable`` when Redis cannot be reached after the delete: an erasure must not
    report a copy gone that may still be cached (run it again; it is idempotent; this process also
    drops the copies at its next checkpoint call that reaches Redis). The caller records why."""
    if not checkpoint_ids:
        return [], []
    with transaction.atomic():
        rows = list(
            Checkpoint.objects.select_for_update()
            .filter(pk__in=checkpoint_ids)
            .values_list(
                "pk",
                "session_id",
                "agent_id",
                "checkpoint_ns",
                "idempotency_key",
                "channel_versions",
                "data_subject",
            )
        )
        Checkpoint.objects.filter(pk__in=[r[0] for r in rows]).delete()
        # their pending writes go with them
        selectors.checkpoint_writes_of(
            checkpoints=[(s, a, ns, key) for _, s, a, ns, key, _, _ in rows]
        ).delete()
        released = selectors.checkpoint_blobs_released(
            [(s, a, ns, v, subject) for _, s, a, ns, _, v, subject in rows]
        )
        if released:
            blobs = CheckpointBlob.objects.filter(pk__in=released)
            holds_check(layer="checkpoints", rows=blobs, refuse=False).delete()
    gone: dict[str, int] = {}
    for pk, session_id, agent_id, ns, *_ in rows:
        key = cache_key(session_id, agent_id, ns)
        gone[key] = max(pk, gone.get(key, pk))
    if not copies_drop(gone):
        raise ServiceUnavailable("Redis cannot be reached to drop checkpoint copies.")
    return sorted(r[0] for r in rows), sorted(gone)
