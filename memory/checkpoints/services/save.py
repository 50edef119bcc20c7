"""Saving a checkpoint: one transaction per checkpoint, serialised per (session, agent) by a
transaction-level advisory lock, taken with the checks and the insert in one call of the schema's
function ``memory_checkpoint_save`` (one round trip); after the commit the checkpoint's JSON
document goes to Redis (``cache``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.numeric import Int4, Int8

from agents.models import Agent
from agents.subjects import subject_written
from core.db.base import fetch_prepared
from core.errors import Conflict
from core.locks import advisory_xact_lock, lock_name
from tenants.models import WorkingMemoryPolicy

from .. import selectors
from ..models import MAX_STEP_INDEX, Checkpoint, document_json, fingerprint_prefix
from .cache import cache_key, cache_put, remember_stale
from .checks import Blob, Body, SaveInput, check_input


class SaveResult:
    """What ``checkpoint_save`` did.

    ``replayed``: the idempotency key was already used with the same body; ``checkpoint`` is the
    stored one. ``cached``: ``True`` once Redis holds the copy, ``False`` when Redis could not be
    reached after the commit, ``None`` for a replay or while an outer transaction has not committed.

    A new checkpoint's ``Checkpoint`` instance is built on first access to ``checkpoint`` (from the
    values the save already holds, no query): a caller that needs only ``cached`` (the LangGraph
    saver's put, the benchmarks) does not pay ``Model.__init__`` (~15 µs).
    """

    __slots__ = ("_build", "_channels_json", "_checkpoint", "cached", "replayed")

    def __init__(
        self,
        *,
        replayed: bool,
        checkpoint: Checkpoint | None = None,
        build: Callable[[], Checkpoint] | None = None,
        cached: bool | None = None,
        channels_json: str = "{}",
    ) -> None:
        """``checkpoint``, or ``build``: a function that makes it when first asked for;
        ``channels_json``: a new checkpoint's channel values as the save function assembled them
        (a replayed one carries them as ``channel_documents``)."""
        if (checkpoint is None) == (build is None):
            raise TypeError("give checkpoint or build, not both or neither")
        self._checkpoint, self._build = checkpoint, build
        self.replayed, self.cached, self._channels_json = replayed, cached, channels_json

    @property
    def checkpoint(self) -> Checkpoint:
        """The checkpoint saved (or replayed), as if loaded from PostgreSQL (``agent`` set)."""
        if self._checkpoint is None:
            assert self._build is not None
            self._checkpoint, self._build = self._build(), None
        return self._checkpoint

    @property
    def channels(self) -> dict[str, Any]:
        """The checkpoint's channel values by version (``Checkpoint.document``'s ``channels``)."""
        if self.replayed:
            return selectors.channels_of(self.checkpoint)
        return json.loads(self._channels_json) if self._channels_json != "{}" else {}

    @property
    def degraded(self) -> bool:
        """Saved in PostgreSQL, but the Redis copy could not be written."""
        return self.cached is False

    def __repr__(self) -> str:
        return f"SaveResult(replayed={self.replayed}, cached={self.cached})"


@dataclass(frozen=True, slots=True)
class _Save:
    """One save, checked (``_Save.checked``): the statement's parameters, the replay's comparison,
    the ``Checkpoint`` and the cached document are all built from it."""

    agent: Agent
    given: SaveInput
    body: Body
    prefix: str  # fingerprint_prefix: the fingerprinted document up to its step
    created_at: datetime

    @classmethod
    def checked(cls, agent: Agent, given: SaveInput) -> _Save:
        """``given`` checked (``check_input``, which says what is raised), for ``agent``."""
        body = check_input(given)
        prefix = fingerprint_prefix(
            state_json=body.state_json,
            plan_json=body.plan_json,
            schema_version=given.schema_version,
            checkpoint_ns=given.checkpoint_ns,
            parent_key=given.parent_key,
            metadata_json=body.metadata_json,
            serialized_type=given.serialized[0] if given.serialized is not None else "",
            serialized=given.serialized[1] if given.serialized is not None else None,
            channel_versions_json=body.channel_versions_json,
            blobs_json=body.blobs_json,
        )
        return cls(agent, given, body, prefix, timezone.now())

    @property
    def metadata(self) -> dict[str, Any]:
        return self.given.metadata or {}

    @property
    def serialized_type(self) -> str:
        return "" if self.given.serialized is None else self.given.serialized[0]

    @property
    def serialized(self) -> bytes | None:
        return None if self.given.serialized is None else self.given.serialized[1]

    @property
    def channel_versions(self) -> dict[str, str]:
        return self.given.channel_versions or {}

    def params(self) -> list[Any]:
        """``_SAVE_SQL``'s parameters, by the function's names in ``_SAVE_ARGUMENTS``' order
        (Int8/Int4: stable parameter types, so one prepared statement)."""
        named = {
            "lock_name": lock_name("ckpt", self.given.session_id, self.agent.pk),
            "p_session_id": self.given.session_id,
            "p_agent_id": Int8(self.agent.pk),
            "p_key": self.given.idempotency_key,
            "p_step": None if self.given.step_index is None else Int8(self.given.step_index),
            "p_max_step": _MAX_STEP,
            "p_state": self.body.state_json,
            "p_plan": self.body.plan_json,
            "p_schema_version": Int4(self.given.schema_version),
            "p_created_at": self.created_at,
            "p_fingerprint_prefix": self.prefix,
            "p_data_subject": self.given.data_subject,
            "p_ns": self.given.checkpoint_ns,
            "p_metadata": self.body.metadata_json,
            "p_parent_key": self.given.parent_key,
            "p_serialized_type": self.serialized_type,
            "p_serialized": self.serialized,
            "p_channel_versions": self.body.channel_versions_json,
            "p_blob_channels": [blob.channel for blob in self.given.blobs],
            "p_blob_versions": [blob.version for blob in self.given.blobs],
            "p_blob_types": [blob.value_type for blob in self.given.blobs],
            "p_blob_values": [blob.value for blob in self.given.blobs],
        }
        return [named[name] for name in _SAVE_ARGUMENTS]

    def compared(self) -> dict[str, Any]:
        """The fields a replay compares with the stored checkpoint (``serialized`` apart)."""
        return {
            "state": self.given.state,
            "plan": self.given.plan,
            "schema_version": self.given.schema_version,
            "checkpoint_ns": self.given.checkpoint_ns,
            "parent_key": self.given.parent_key,
            "metadata": self.metadata,
            "serialized_type": self.serialized_type,
            "channel_versions": self.channel_versions,
        }

    def _columns(self, step: int) -> dict[str, Any]:
        """The values the ``Checkpoint`` and its document share, by their names in both."""
        given = self.given
        return {
            "session_id": given.session_id,
            "step_index": step,
            "idempotency_key": given.idempotency_key,
            "schema_version": given.schema_version,
            "created_at": self.created_at,
            "checkpoint_ns": given.checkpoint_ns,
            "parent_key": given.parent_key,
            "serialized_type": self.serialized_type,
            "serialized": self.serialized,
        }

    def checkpoint(self, pk: int, step: int, fingerprint: str, alias: str) -> Checkpoint:
        """The saved checkpoint as if loaded from the database ``alias`` (``agent`` set, no query)."""
        checkpoint = Checkpoint(
            id=pk,
            **self._columns(step),
            state=self.given.state,
            plan=self.given.plan,
            agent=self.agent,
            data_subject=self.given.data_subject,
            fingerprint=fingerprint,
            metadata=self.metadata,
            channel_versions=self.channel_versions,
        )
        checkpoint._state.adding, checkpoint._state.db = False, alias
        return checkpoint

    def document(self, pk: int, step: int, channels_json: str) -> bytes:
        """The saved checkpoint's JSON document with its channel values (``channels_json``, as the
        save function assembled them), the bytes Redis caches (``document_json``)."""
        return document_json(
            pk=pk,
            **self._columns(step),
            agent_name=self.agent.name,
            metadata_json=self.body.metadata_json,
            state_json=self.body.state_json,
            plan_json=self.body.plan_json,
            channels_json=channels_json,
        )


# The stream's lock, then the checks and the insert, in one round trip: a function of the tenant's
# schema (docs/decisions/0015-checkpoint-save-in-one-call.md). Its arguments by name and type:
_SAVE_ARGUMENTS = {
    "lock_name": "text",
    "p_session_id": "text",
    "p_agent_id": "bigint",
    "p_key": "text",
    "p_step": "bigint",
    "p_max_step": "bigint",
    "p_state": "jsonb",
    "p_plan": "jsonb",
    "p_schema_version": "integer",
    "p_created_at": "timestamptz",
    "p_fingerprint_prefix": "text",
    "p_data_subject": "text",
    "p_ns": "text",
    "p_metadata": "jsonb",
    "p_parent_key": "text",
    "p_serialized_type": "text",
    "p_serialized": "bytea",
    "p_channel_versions": "jsonb",
    "p_blob_channels": "text[]",
    "p_blob_versions": "text[]",
    "p_blob_types": "text[]",
    "p_blob_values": "bytea[]",
}
_SAVE_SQL = (
    "SELECT saved_id, saved_step, saved_fingerprint, saved_channels FROM memory_checkpoint_save("
    + ", ".join(f"{name} => %s::{kind}" for name, kind in _SAVE_ARGUMENTS.items())
    + ")"
)
_MAX_STEP = Int8(MAX_STEP_INDEX)


def _insert_next(save: _Save) -> tuple[int, int, str, str] | None:
    """Call ``memory_checkpoint_save`` as a prepared statement (``fetch_prepared``: the call is
    parsed once per connection, and the ~2 KiB of state travels as a parameter, not quoted into
    the statement's text): ``(id, step, fingerprint, channels JSON)`` of the checkpoint inserted, or
    ``None`` (nothing inserted). Outside a transaction the call commits on its own."""
    pk, step, fingerprint, channels = fetch_prepared(_SAVE_SQL, save.params()) or (None, None, None, None)
    return None if pk is None else (pk, step, fingerprint, channels)


def _differing_fields(checkpoint: Checkpoint, **body: Any) -> list[str]:
    return [name for name, value in body.items() if getattr(checkpoint, name) != value] or ["body"]


# The step rule's Python twin: memory/sql/memory_checkpoint_save.sql holds the rule the insert applies.
def _replay_or_refuse(save: _Save) -> Checkpoint | None:
    """Under the stream's lock: the stored checkpoint when this save replays it, else ``None`` if
    the save may go ahead. Raises ``Conflict`` (the key used with another body, a step not after
    the latest, the last step reached)."""
    agent, session_id, key, step_index = (
        save.agent,
        save.given.session_id,
        save.given.idempotency_key,
        save.given.step_index,
    )
    latest, by_key = selectors.checkpoint_stream_head(agent=agent, session_id=session_id, idempotency_key=key)
    existing = (
        None
        if by_key is None
        else selectors.checkpoint_by_key(agent=agent, session_id=session_id, idempotency_key=key)
    )
    if by_key is not None and existing is None:  # saved under this key for another end user
        raise Conflict(
            f"idempotency_key {key!r} was already used in this session for another end user's "
            "checkpoint; send another key.",
            field="idempotency_key",
        )
    if existing is not None:
        step = existing.step_index if step_index is None else step_index
        if existing.fingerprint != hashlib.sha256(f"{save.prefix}{step}}}".encode()).hexdigest():
            differing = _differing_fields(existing, step_index=step, **save.compared())
            if save.serialized is not None and bytes(existing.serialized or b"") != save.serialized:
                differing = [f for f in differing if f != "body"] + ["serialized"]
            raise Conflict(
                f"idempotency_key {key!r} was already used by you in this session for step "
                f"{existing.step_index} with a different body (differs in: {', '.join(differing)}).",
                field="idempotency_key",
            )
        return existing
    if step_index is None:
        if latest is not None and latest + 1 > MAX_STEP_INDEX:
            raise Conflict(f"This stream has reached step {MAX_STEP_INDEX}.", field="step_index")
    elif latest is not None and step_index <= latest:
        raise Conflict(
            f"step_index {step_index} is not after your latest checkpoint in this session, step "
            f"{latest}; send a step_index greater than {latest}.",
            field="step_index",
        )
    return None


def _save_under_lock(save: _Save) -> Checkpoint | tuple[int, int, str, str]:
    """The save told apart under the stream's lock: the stored checkpoint it replays, or
    ``(id, step, fingerprint, channels JSON)`` of the checkpoint inserted. Raises ``Conflict`` (see
    ``_replay_or_refuse``, or the stream changed during the save)."""
    with transaction.atomic():
        advisory_xact_lock("ckpt", save.given.session_id, save.agent.pk)
        replayed = _replay_or_refuse(save)
        if replayed is not None:
            return replayed
        saved = _insert_next(save)  # the checks passed under the lock: so does the insert
        if saved is None:
            raise Conflict(
                "The checkpoint stream changed during the save; send it again.", field="step_index"
            )
        return saved


def _cache_after_commit(result: SaveResult, key: str, pk: int, step: int, document: bytes, ttl: int) -> None:
    """Copy the saved checkpoint ``pk`` to Redis (unless deleted since its commit: ``cache_put``);
    set ``result.cached``; remember the stream when Redis could not be reached."""
    result.cached = cache_put(key=key, checkpoint_id=pk, step_index=step, body=document, ttl_seconds=ttl)
    if not result.cached:
        remember_stale(key, step)


def checkpoint_save(
    *,
    agent: Agent,
    session_id: str,
    step_index: int | None,
    idempotency_key: str,
    state: dict[str, Any],
    plan: list[Any],
    schema_version: int = 1,
    policy: WorkingMemoryPolicy,
    data_subject: str = "",
    checkpoint_ns: str = "",
    parent_key: str = "",
    metadata: dict[str, Any] | None = None,
    serialized: tuple[str, bytes] | None = None,
    channel_versions: dict[str, str] | None = None,
    blobs: Sequence[Blob] = (),
) -> SaveResult:
    """Store ``agent``'s checkpoint of ``session_id`` after step ``step_index`` in the current tenant.

    The checkpoint joins ``agent``'s own stream in the session (steps and keys are checked against
    it only; other agents' checkpoints are never read or changed). ``state``: a JSON object of at
    most ``MAX_STATE_BYTES`` as UTF-8 JSON; ``plan``: a JSON list of at most ``MAX_PLAN_BYTES``.
    After the commit it is cached in Redis for ``policy.checkpoint_cache_ttl_seconds`` (a Redis
    failure only sets ``cached=False``). ``data_subject``: the person it is about, or "" (as
    ``agents.subjects.subject_written`` allows: another one raises ``SubjectRefused``, 403).

    ``step_index`` ``None``: the next step of the stream, chosen under its lock. The LangGraph
    fields: ``checkpoint_ns`` (a label within the stream, "" the root), ``parent_key`` (not
    checked), ``metadata`` (a JSON object of at most ``MAX_METADATA_BYTES``, filterable),
    ``serialized`` (``(type tag, bytes)``, at most ``MAX_STATE_BYTES``, never decoded here), and
    the channel values by version: ``channel_versions`` (channel -> version, the checkpoint's) and
    ``blobs`` (the values of its new versions only, at the versions ``channel_versions`` names, at
    most ``MAX_STATE_BYTES`` in all), stored once per ``(channel, version)`` of the stream
    (``CheckpointBlob``); reads return the values its versions name.

    Returns a ``SaveResult``: a new checkpoint, or the stored one (``replayed=True``) when this
    ``idempotency_key`` was already used by ``agent`` in the session with the same body. The common
    case is one call to PostgreSQL (``memory_checkpoint_save``: the lock, the checks, the inserts)
    and one to Redis; a replay or a refusal is then told apart under the lock.

    Raises ``InvalidInput`` (bad ids, types or blobs, NUL characters), ``PayloadTooLarge`` (field
    ``state``, ``plan``, ``serialized.data`` or ``blobs[i].value.data``), ``Conflict`` with field
    ``idempotency_key`` (the key was used with another body) or ``step_index`` (not after the
    stream's latest step, which the message gives).
    """
    data_subject = subject_written(agent, data_subject) if isinstance(data_subject, str) else data_subject
    given = SaveInput(
        session_id=session_id,
        step_index=step_index,
        idempotency_key=idempotency_key,
        state=state,
        plan=plan,
        schema_version=schema_version,
        data_subject=data_subject,
        checkpoint_ns=checkpoint_ns,
        parent_key=parent_key,
        metadata=metadata,
        serialized=serialized,
        channel_versions=channel_versions,
        blobs=tuple(blobs),
    )
    save = _Save.checked(agent, given)
    saved = _insert_next(save)
    if saved is None:  # a replay, a refusal, or the stream changed between the two messages
        told = _save_under_lock(save)
        if isinstance(told, Checkpoint):
            return SaveResult(checkpoint=told, replayed=True)
        saved = told
    pk, step, fingerprint, channels_json = saved
    result = SaveResult(
        build=partial(save.checkpoint, pk, step, fingerprint, connection.alias),
        replayed=False,
        channels_json=channels_json,
    )
    key, document = cache_key(session_id, agent.pk, checkpoint_ns), save.document(pk, step, channels_json)
    # outside a transaction the call above has committed: this runs now
    transaction.on_commit(
        partial(_cache_after_commit, result, key, pk, step, document, policy.checkpoint_cache_ttl_seconds)
    )
    return result
