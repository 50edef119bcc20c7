"""A task's pending writes against a checkpoint (LangGraph's ``put_writes``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from agents.models import Agent
from core.errors import InvalidInput, PayloadTooLarge
from core.redis import check_id

from ..models import MAX_NAMESPACE_LENGTH, SPECIAL_WRITE_CHANNELS
from .checks import (
    MAX_CHANNEL_LENGTH,
    MAX_STATE_BYTES,
    MAX_TASK_ID_LENGTH,
    MAX_WRITES,
    check_namespace,
    check_serialized_type,
    is_printable,
)


@dataclass(frozen=True)
class PendingWrite:
    """One write of a task as sent: ``channel`` and the serializer's ``(type tag, bytes)`` value."""

    channel: str
    value_type: str
    value: bytes


@dataclass(frozen=True)
class StoredWrite:
    """Where one write went: its ``idx``, and whether it was new (``False``: the task had already
    written there; for special channels, replaced)."""

    task_id: str
    channel: str
    idx: int
    created: bool


@dataclass(frozen=True)
class WritesResult:
    """What ``checkpoint_writes_put`` did: one ``StoredWrite`` per write in the order sent, and how
    many rows it created (0: all of them were there already)."""

    writes: list[StoredWrite]
    created: int


def _check_writes(*, task_id: str, task_path: str, writes: list[PendingWrite]) -> None:
    """``checkpoint_writes_put``'s checks of the task and its writes, in order. Raises
    ``InvalidInput`` or ``PayloadTooLarge`` naming the field."""
    if (
        not isinstance(task_id, str)
        or not 1 <= len(task_id) <= MAX_TASK_ID_LENGTH
        or not is_printable(task_id)
    ):
        raise InvalidInput(
            f"task_id must be 1 to {MAX_TASK_ID_LENGTH} printable characters.", field="task_id"
        )
    if not isinstance(task_path, str) or len(task_path) > MAX_NAMESPACE_LENGTH or not is_printable(task_path):
        raise InvalidInput(
            f"task_path must be at most {MAX_NAMESPACE_LENGTH} printable characters.", field="task_path"
        )
    if not 1 <= len(writes) <= MAX_WRITES:
        raise InvalidInput(f"writes must hold 1 to {MAX_WRITES} writes.", field="writes")
    for i, write in enumerate(writes):
        if (
            not isinstance(write.channel, str)
            or not 1 <= len(write.channel) <= MAX_CHANNEL_LENGTH
            or not is_printable(write.channel)
        ):
            raise InvalidInput(
                f"channel must be 1 to {MAX_CHANNEL_LENGTH} printable characters.",
                field=f"writes[{i}].channel",
            )
        check_serialized_type(write.value_type, field=f"writes[{i}].value.type")
        if len(write.value) > MAX_STATE_BYTES:
            raise PayloadTooLarge(
                f"the value is {len(write.value)} bytes; a write allows at most {MAX_STATE_BYTES}.",
                field=f"writes[{i}].value.data",
            )


# The rows as one array per column; which writes were new comes back in RETURNING (xmax = 0:
# inserted, not updated). ``{conflict}``: _KEEP, or _REPLACE when every write is to a special channel.
_WRITES_SQL = (
    "INSERT INTO memory_checkpointwrite (session_id, agent_id, checkpoint_ns, checkpoint_key, "
    "task_id, task_path, idx, channel, value_type, value, created_at) "
    "SELECT s, a, n, k, t, p, i, ch, vt, v, %s FROM unnest(%s::text[], %s::bigint[], %s::text[], "
    "%s::text[], %s::text[], %s::text[], %s::int[], %s::text[], %s::text[], %s::bytea[]) "
    "AS w(s, a, n, k, t, p, i, ch, vt, v) "
    "ON CONFLICT (session_id, agent_id, checkpoint_ns, checkpoint_key, task_id, idx) "
    "{conflict} RETURNING idx, (xmax = 0)"
)
_KEEP = "DO NOTHING"
_REPLACE = (
    "DO UPDATE SET channel = EXCLUDED.channel, value_type = EXCLUDED.value_type, "
    "value = EXCLUDED.value, task_path = EXCLUDED.task_path"
)
_IDX = 6  # a row's idx, in _WRITES_SQL's column order


def checkpoint_writes_put(
    *,
    agent: Agent,
    session_id: str,
    idempotency_key: str,
    checkpoint_ns: str = "",
    task_id: str,
    task_path: str = "",
    writes: list[PendingWrite],
) -> WritesResult:
    """Store task ``task_id``'s pending writes against ``agent``'s checkpoint ``idempotency_key``
    in the session and namespace (LangGraph's ``put_writes``).

    The rule is LangGraph's (``langgraph.checkpoint.base.WRITES_IDX_MAP``): a write's ``idx`` is its
    position in ``writes``, or for a special channel (``SPECIAL_WRITE_CHANNELS``: ``__error__`` -1,
    ``__scheduled__`` -2, ``__interrupt__`` -3, ``__resume__`` -4) that channel's fixed index. When
    every write is to a special channel they replace what the task wrote there before; otherwise a
    write whose ``(task_id, idx)`` is already stored is left as it is (a retried task writes once).
    At most ``MAX_WRITES`` writes, each value at most ``MAX_STATE_BYTES``.

    The writes belong to ``agent``'s stream (only it reads them back, with the checkpoint); the
    checkpoint need not exist yet: LangGraph may send a task's writes before the background put
    of their checkpoint has landed.

    Raises ``InvalidInput`` (field ``key``, ``task_id``, ``task_path``, ``writes``,
    ``writes[i].channel``, ``writes[i].value.type``...), ``PayloadTooLarge``
    (``writes[i].value.data``).
    """
    check_id(session_id, field="session_id")
    check_namespace(checkpoint_ns)
    _check_writes(task_id=task_id, task_path=task_path, writes=writes)
    overwrite = all(write.channel in SPECIAL_WRITE_CHANNELS for write in writes)
    rows: list[tuple[Any, ...]] = [
        (
            session_id,
            agent.pk,
            checkpoint_ns,
            idempotency_key,
            task_id,
            task_path,
            SPECIAL_WRITE_CHANNELS.get(w.channel, i),
            w.channel,
            w.value_type,
            w.value,
        )
        for i, w in enumerate(writes)
    ]
    if overwrite:  # one statement may not update a row twice: the last write to a channel wins
        rows = list({row[_IDX]: row for row in rows}.values())
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _WRITES_SQL.format(conflict=_REPLACE if overwrite else _KEEP),
            [timezone.now(), *([list(column) for column in zip(*rows, strict=True)])],
        )
        created = {idx for idx, inserted in cursor.fetchall() if inserted}
    return WritesResult(
        writes=[
            StoredWrite(task_id=task_id, channel=row[7], idx=row[_IDX], created=row[_IDX] in created)
            for row in rows
        ],
        created=len(created),
    )
