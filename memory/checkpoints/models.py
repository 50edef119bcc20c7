"""Checkpoints (state hydration): an agent's serialised state at one step of a session.

Checkpoints are per agent within a session: a session is shared by the agents of a multi-agent
system, and each of them has its own checkpoint stream in it (private state, like a scratchpad).
PostgreSQL holds every checkpoint; Redis holds a copy of the latest one per (session, agent) (see
``memory.checkpoints.services``).
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

# JSON clients (JavaScript, Lua inside Redis) hold integers exactly only up to 2**53 - 1.
MAX_STEP_INDEX = 2**53 - 1
MAX_SCHEMA_VERSION = 2**31 - 1


# LangGraph's special write channels and the fixed ``idx`` their writes take (its ``WRITES_IDX_MAP``,
# langgraph.checkpoint.serde.types): a task's write to one of them replaces the previous one.
SPECIAL_WRITE_CHANNELS: dict[str, int] = {
    "__error__": -1,
    "__scheduled__": -2,
    "__interrupt__": -3,
    "__resume__": -4,
}
MAX_NAMESPACE_LENGTH = 500
MAX_SERIALIZED_TYPE_LENGTH = 64
MAX_VERSION_LENGTH = 255  # a channel version as text (LangGraph's are ~50 characters)


def compact_json(value: Any) -> str:
    """``value`` as JSON text with no spaces and non-ASCII kept, keys in their order (the stored
    ``jsonb`` text's shape for a document assembled from an instance)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON text: sorted keys, no spaces, non-ASCII kept (what fingerprints
    hash, and what a save stores and caches: one serialisation per value)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint_prefix(
    *,
    state_json: str,
    plan_json: str,
    schema_version: int,
    checkpoint_ns: str = "",
    parent_key: str = "",
    metadata_json: str = "{}",
    serialized_type: str = "",
    serialized: bytes | None = None,
    channel_versions_json: str = "{}",
    blobs_json: str = "{}",
) -> str:
    """The canonical JSON document that ``checkpoint_fingerprint`` hashes, up to its step: it ends
    with ``"step_index":``, and the document is the prefix, the step in decimal and ``}``.

    ``state_json``, ``plan_json``, ``metadata_json``, ``channel_versions_json``: the values as
    ``canonical_json`` gives them; ``blobs_json``: ``blob_digests`` of the blobs the save sent.
    ``step_index`` is the last key in sorted order, so the prefix does not depend on the step: a
    save that lets PostgreSQL choose the step (``step_index`` ``None``) finishes the hash there
    (``memory/sql/memory_checkpoint_save.sql``: prefix || step || ``}``).
    Equal to ``canonical_json`` of the whole document (a dict's canonical JSON is its items in key
    order, each ``key:value`` with the value in canonical JSON, joined by commas).
    """
    parts = {"plan": plan_json, "schema_version": str(schema_version), "state": state_json}
    extra = {
        "checkpoint_ns": canonical_json(checkpoint_ns) if checkpoint_ns else "",
        "parent_key": canonical_json(parent_key) if parent_key else "",
        "metadata": "" if metadata_json == "{}" else metadata_json,
        "serialized_type": canonical_json(serialized_type) if serialized_type else "",
        "serialized": "" if serialized is None else f'"{hashlib.sha256(serialized).hexdigest()}"',
        "channel_versions": "" if channel_versions_json == "{}" else channel_versions_json,
        "blobs": "" if blobs_json == "{}" else blobs_json,
    }
    parts.update({name: text for name, text in extra.items() if text})
    items = "".join(f'"{name}":{parts[name]},' for name in sorted(parts))  # names need no escaping
    return "{" + items + '"step_index":'


def checkpoint_fingerprint(
    *,
    step_index: int,
    state: dict[str, Any],
    plan: list[Any],
    schema_version: int,
    checkpoint_ns: str = "",
    parent_key: str = "",
    metadata: dict[str, Any] | None = None,
    serialized_type: str = "",
    serialized: bytes | None = None,
    channel_versions: dict[str, str] | None = None,
    blobs: list[tuple[str, str, str, bytes]] | None = None,
) -> str:
    """Hex SHA-256 (64 chars) of the checkpoint body in canonical JSON (sorted keys, no spaces, UTF-8).

    Two bodies with the same content but another key order have the same fingerprint; the session id
    and idempotency key are not part of it (they select the row the fingerprint is compared with).
    The LangGraph fields (namespace, parent, metadata, serialized payload: its SHA-256, channel
    versions, the blobs sent: ``blob_digests``) enter the document only when set, so checkpoints
    saved before they existed keep their fingerprints.
    The document is ``fingerprint_prefix(...)``, the step and ``}``.
    """
    prefix = fingerprint_prefix(
        state_json=canonical_json(state),
        plan_json=canonical_json(plan),
        schema_version=schema_version,
        checkpoint_ns=checkpoint_ns,
        parent_key=parent_key,
        metadata_json=canonical_json(metadata or {}),
        serialized_type=serialized_type,
        serialized=serialized,
        channel_versions_json=canonical_json(channel_versions or {}),
        blobs_json=blob_digests(blobs or []),
    )
    return hashlib.sha256(f"{prefix}{step_index}}}".encode()).hexdigest()


def blob_digests(blobs: list[tuple[str, str, str, bytes]]) -> str:
    """The fingerprinted form of a save's blobs ``(channel, version, type, bytes)``: canonical JSON
    of ``{channel: {"sha256": hex of the bytes, "type": type, "version": version}}`` ("{}" for none)."""
    return canonical_json(
        {
            channel: {"sha256": hashlib.sha256(data).hexdigest(), "type": kind, "version": version}
            for channel, version, kind, data in blobs
        }
    )


class Checkpoint(models.Model):
    """The working state and active plan of ``agent`` in a session after step ``step_index``.

    Rows are written once (``checkpoint_save``) and never changed; a thread delete
    (``checkpoints_delete``) or an erasure removes them. Within one agent's stream of a session,
    step indexes strictly increase and each idempotency key names one checkpoint; another agent's
    stream in the same session is independent (its own steps and keys).

    LangGraph's model maps onto it (``engram_client.langgraph``): its thread is the session, its
    ``checkpoint_id`` the idempotency key, its ``checkpoint_ns`` a label of the row within the
    agent's stream (steps and keys stay unique across namespaces), its parent checkpoint id
    ``parent_key``, its metadata ``metadata``; the checkpoint itself is the serializer's opaque
    ``(type, bytes)`` pair in ``serialized_type`` / ``serialized``, never decoded here. Its channel
    values are either inside ``serialized`` or, when ``channel_versions`` names them, in the
    stream's ``CheckpointBlob`` rows of those versions (written once per version, shared by every
    checkpoint of the stream that names it).
    """

    session_id = models.CharField(max_length=200)
    step_index = models.BigIntegerField(validators=[MinValueValidator(0), MaxValueValidator(MAX_STEP_INDEX)])
    idempotency_key = models.CharField(max_length=255)
    state = models.JSONField(
        blank=True, help_text="the agent's working state (a JSON object; {} when `serialized` holds it)"
    )
    plan = models.JSONField(default=list, blank=True, help_text="the active plan: a JSON list of steps")
    schema_version = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_SCHEMA_VERSION)]
    )
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="checkpoints")
    data_subject = models.CharField(
        max_length=200, blank=True, default="", help_text="the person it is about"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    fingerprint = models.CharField(max_length=64, editable=False, help_text="SHA-256 of the body")
    checkpoint_ns = models.CharField(
        max_length=MAX_NAMESPACE_LENGTH, blank=True, default="", help_text="LangGraph's checkpoint_ns"
    )
    parent_key = models.CharField(
        max_length=255, blank=True, default="", help_text="idempotency key of the checkpoint it follows"
    )
    metadata = models.JSONField(default=dict, blank=True, help_text="a JSON object, filterable")
    serialized_type = models.CharField(
        max_length=MAX_SERIALIZED_TYPE_LENGTH,
        blank=True,
        default="",
        help_text="the serializer's type tag of `serialized` (e.g. msgpack)",
    )
    serialized = models.BinaryField(null=True, blank=True, help_text="an opaque serialized checkpoint")
    channel_versions = models.JSONField(
        default=dict,
        blank=True,
        help_text="channel -> version (text): the blobs holding its channel values ({}: none, the "
        "values are inside `serialized`)",
    )

    class Meta:
        ordering = ["session_id", "step_index"]
        constraints = [
            # also the index of every stream read: latest (ORDER BY step_index DESC LIMIT 1), pages
            # (step_index > n), one step; its session_id prefix serves the admin's search by session
            models.UniqueConstraint(
                fields=["session_id", "agent", "step_index"], name="checkpoint_session_agent_step_uniq"
            ),
            models.UniqueConstraint(
                fields=["session_id", "agent", "idempotency_key"], name="checkpoint_session_agent_key_uniq"
            ),
            models.CheckConstraint(condition=models.Q(step_index__gte=0), name="checkpoint_step_nonnegative"),
        ]
        indexes = [
            models.Index(fields=["agent", "created_at"], name="checkpoint_agent_idx"),
            # an agent's checkpoints across sessions, newest first (LangGraph's list without a thread)
            models.Index(fields=["agent", "id"], name="checkpoint_agent_id_idx"),
            # the latest of one namespace, and a namespace's pages (LangGraph's list and get_tuple)
            models.Index(
                fields=["session_id", "agent", "checkpoint_ns", "step_index"], name="checkpoint_ns_step_idx"
            ),
            models.Index(
                fields=["data_subject"],
                condition=~models.Q(data_subject=""),
                name="checkpoint_subject_idx",
            ),
        ]

    def __str__(self) -> str:
        """``<session> step <n> (<agent>)``; needs ``agent`` loaded to avoid one query."""
        return f"{self.session_id} step {self.step_index} ({self.agent.name})"

    def summary(self) -> dict[str, Any]:
        """The checkpoint without ``state``, ``plan`` and ``serialized``: JSON-ready, times in UTC with
        ``Z``; ``parent_key`` is ``None`` when unset.

        Needs ``agent`` loaded (``select_related("agent")``) to avoid one query.
        """
        return {
            "id": self.pk,
            "session_id": self.session_id,
            "step_index": self.step_index,
            "idempotency_key": self.idempotency_key,
            "schema_version": self.schema_version,
            "agent": self.agent.name,
            "created_at": self.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "checkpoint_ns": self.checkpoint_ns,
            "parent_key": self.parent_key or None,
            "metadata": self.metadata,
        }

    def serialized_document(self) -> dict[str, str] | None:
        """``{"type", "data"}`` with ``data`` the serialized bytes in base64 (RFC 4648), or ``None``."""
        if self.serialized is None:
            return None
        return {
            "type": self.serialized_type,
            "data": base64.b64encode(bytes(self.serialized)).decode("ascii"),
        }

    def document(self, *, channels: dict[str, Any] | None = None) -> dict[str, Any]:
        """The checkpoint as the API shows it and Redis caches it: ``summary()`` plus state, plan and
        the serialized payload (``serialized_document()``), and ``channels`` when given and not
        empty (its channel values by version, as ``memory_checkpoint_channels`` gives them; a
        checkpoint saved whole has none, and its document has no ``channels``)."""
        found = {
            **self.summary(),
            "state": self.state,
            "plan": self.plan,
            "serialized": self.serialized_document(),
        }
        return {**found, "channels": channels} if channels else found

    def document_json(
        self, *, state_json: str | None = None, plan_json: str | None = None, channels_json: str = "{}"
    ) -> bytes:
        """``document()`` as compact UTF-8 JSON, the bytes cached in Redis and served as they are.

        ``state_json`` / ``plan_json``: ``state`` and ``plan`` already as JSON text (a save's
        canonical form, PostgreSQL's ``jsonb`` text), spliced in as they are instead of serialising
        the values again (~30 µs for a 2 KiB state); ``channels_json``: its channels as JSON text. See
        ``document_json``.
        """
        if state_json is None:
            state_json = compact_json(self.state)
        if plan_json is None:
            plan_json = compact_json(self.plan)
        return document_json(
            pk=self.pk,
            session_id=self.session_id,
            step_index=self.step_index,
            idempotency_key=self.idempotency_key,
            schema_version=self.schema_version,
            agent_name=self.agent.name,
            created_at=self.created_at,
            checkpoint_ns=self.checkpoint_ns,
            parent_key=self.parent_key,
            metadata_json=compact_json(self.metadata),
            state_json=state_json,
            plan_json=plan_json,
            serialized_type=self.serialized_type,
            serialized=self.serialized,
            channels_json=channels_json,
        )


def document_json(
    *,
    pk: int,
    session_id: str,
    step_index: int,
    idempotency_key: str,
    schema_version: int,
    agent_name: str,
    created_at: datetime,
    checkpoint_ns: str,
    parent_key: str,
    metadata_json: str,
    state_json: str,
    plan_json: str,
    serialized_type: str,
    serialized: bytes | memoryview | None,
    channels_json: str,
) -> bytes:
    """``Checkpoint.document(channels=...)`` as compact UTF-8 JSON from a checkpoint's column values,
    with ``metadata``, ``state``, ``plan`` and ``channels`` given as JSON text and spliced in as
    they are: a restore
    from PostgreSQL builds the document from its row without a model instance (~40 µs of
    ``Model.__init__``) or parsing and serialising its ``jsonb`` again. Same keys, order and
    values as ``document(channels=...)``: the summary's, then ``state``, ``plan``, ``serialized``,
    ``channels`` (left out when ``{}``).
    """
    head = json.dumps(
        {
            "id": pk,
            "session_id": session_id,
            "step_index": step_index,
            "idempotency_key": idempotency_key,
            "schema_version": schema_version,
            "agent": agent_name,
            "created_at": created_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "checkpoint_ns": checkpoint_ns,
            "parent_key": parent_key or None,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )
    payload = (
        "null"
        if serialized is None
        else json.dumps(
            {"type": serialized_type, "data": base64.b64encode(bytes(serialized)).decode("ascii")},
            separators=(",", ":"),
        )
    )
    channels = "" if channels_json == "{}" else f',"channels":{channels_json}'
    return (
        f'{head[:-1]},"metadata":{metadata_json},"state":{state_json},"plan":{plan_json},'
        f'"serialized":{payload}{channels}}}'
    ).encode()


class CheckpointWrite(models.Model):
    """A pending write of a LangGraph task against a checkpoint: ``(task_id, channel, value)``.

    It names its checkpoint by ``(session_id, agent, checkpoint_ns, checkpoint_key)``, not by a
    foreign key: LangGraph may send a task's writes before the put of their checkpoint has landed
    (its puts run in the background). ``idx`` is the write's position in the task's list, or for a
    special channel (``SPECIAL_WRITE_CHANNELS``) that channel's fixed negative index, so a task
    writes each special channel at most once per checkpoint. The value is the serializer's opaque
    ``(type, bytes)``. The writes go with their checkpoint (a thread delete, an erasure).
    """

    session_id = models.CharField(max_length=200)
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="checkpoint_writes")
    checkpoint_ns = models.CharField(max_length=MAX_NAMESPACE_LENGTH, blank=True, default="")
    checkpoint_key = models.CharField(max_length=255, help_text="the checkpoint's idempotency key")
    task_id = models.CharField(max_length=200)
    task_path = models.CharField(max_length=500, blank=True, default="")
    idx = models.IntegerField()
    channel = models.CharField(max_length=200)
    value_type = models.CharField(max_length=MAX_SERIALIZED_TYPE_LENGTH, blank=True, default="")
    value = models.BinaryField()
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["session_id", "checkpoint_key", "task_path", "task_id", "idx"]
        constraints = [
            # also the index of every read: a checkpoint's writes, a stream's (session, agent prefix)
            models.UniqueConstraint(
                fields=["session_id", "agent", "checkpoint_ns", "checkpoint_key", "task_id", "idx"],
                name="checkpoint_write_task_idx_uniq",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id} {self.channel} #{self.idx}"

    def document(self) -> dict[str, Any]:
        """``{"task_id", "task_path", "channel", "idx", "value": {"type", "data" (base64)}}``."""
        return {
            "task_id": self.task_id,
            "task_path": self.task_path,
            "channel": self.channel,
            "idx": self.idx,
            "value": {"type": self.value_type, "data": base64.b64encode(bytes(self.value)).decode("ascii")},
        }


class CheckpointBlob(models.Model):
    """One channel value of an agent's checkpoint stream at one version (LangGraph's
    ``checkpoint_blobs``): the serializer's opaque ``(type, bytes)``, never decoded here (type
    ``empty``: the channel had no value at that version).

    A save writes the blobs of the channels its ``newVersions`` names only (a blob already stored
    under its version is kept); a checkpoint's channel values are the blobs of its stream whose
    ``(channel, version)`` its ``channel_versions`` names. A blob lives as long as a checkpoint of
    its stream names it: a thread delete, an erasure or retention removes it with the last one
    (``services.delete``). ``data_subject``: that of the save that wrote it (what erasures and
    holds target, as for ``Checkpoint``).
    """

    session_id = models.CharField(max_length=200)
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="checkpoint_blobs")
    checkpoint_ns = models.CharField(max_length=MAX_NAMESPACE_LENGTH, blank=True, default="")
    channel = models.CharField(max_length=200)
    version = models.CharField(max_length=MAX_VERSION_LENGTH)
    value_type = models.CharField(max_length=MAX_SERIALIZED_TYPE_LENGTH)
    value = models.BinaryField()
    data_subject = models.CharField(
        max_length=200, blank=True, default="", help_text="the person it is about"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["session_id", "checkpoint_ns", "channel", "version"]
        constraints = [
            # also the index of every read (a checkpoint's channel values) and a stream's delete
            models.UniqueConstraint(
                fields=["session_id", "agent", "checkpoint_ns", "channel", "version"],
                name="checkpoint_blob_version_uniq",
            ),
        ]
        indexes = [
            models.Index(
                fields=["data_subject"],
                condition=~models.Q(data_subject=""),
                name="checkpoint_blob_subject_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel} @ {self.version}"
