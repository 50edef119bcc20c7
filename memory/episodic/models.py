"""The episodic log: an append-only, hash-chained record of what agents did and saw."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC
from typing import Any

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models

GENESIS_HASH = "0" * 64


class EventKind(models.TextChoices):
    MESSAGE = "message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    DECISION = "decision"
    OBSERVATION = "observation"


class EventRole(models.TextChoices):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


def chain_hash(*, seq: int, prev_hash: str, fields: dict[str, Any]) -> str:
    """SHA-256 (hex, 64 chars) of one event's content and its predecessor's hash.

    The input is canonical JSON (sorted keys, no spaces, UTF-8) of ``fields`` plus ``seq`` and
    ``prev_hash``; datetimes are ISO 8601 in UTC with microseconds. Changing any hashed field, the
    order or a predecessor changes every later hash (a hash chain, as in RFC 6962's log).
    """
    doc = dict(fields, seq=seq, prev_hash=prev_hash)
    for name in ("occurred_at", "recorded_at"):
        doc[name] = doc[name].astimezone(UTC).isoformat(timespec="microseconds")
    data = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class Event(models.Model):
    """One thing that happened in a session. Rows are never updated or deleted (a trigger enforces it).

    ``seq`` is the event's position in the tenant's chain (1, 2, ...); ``hash`` covers the row's
    content and ``prev_hash``, the hash of event ``seq - 1``.
    """

    seq = models.BigIntegerField(unique=True, editable=False)
    session_id = models.CharField(max_length=200)
    execution_id = models.CharField(max_length=200, null=True, blank=True)
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="events")
    role = models.CharField(max_length=16, choices=EventRole.choices)
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    content = models.TextField(blank=True)
    payload = models.JSONField(default=dict, blank=True)
    occurred_at = models.DateTimeField()
    recorded_at = models.DateTimeField(editable=False)
    prev_hash = models.CharField(max_length=64, editable=False)
    hash = models.CharField(max_length=64, unique=True, editable=False)
    search = models.GeneratedField(
        expression=SearchVector("content", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        ordering = ["occurred_at", "seq"]
        indexes = [
            models.Index(fields=["occurred_at", "seq"], name="event_occurred_idx"),
            models.Index(fields=["session_id", "occurred_at", "seq"], name="event_session_idx"),
            models.Index(fields=["agent", "occurred_at"], name="event_agent_idx"),
            models.Index(fields=["kind", "occurred_at"], name="event_kind_idx"),
            GinIndex(fields=["search"], name="event_search_gin"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.kind} in {self.session_id}"

    def hashed_fields(self) -> dict[str, Any]:
        """The fields the chain hash covers, as plain JSON-able values."""
        return {
            "session_id": self.session_id,
            "execution_id": self.execution_id,
            "agent_id": self.agent_id,
            "role": self.role,
            "kind": self.kind,
            "content": self.content,
            "payload": self.payload,
            "occurred_at": self.occurred_at,
            "recorded_at": self.recorded_at,
        }

    def compute_hash(self) -> str:
        return chain_hash(seq=self.seq, prev_hash=self.prev_hash, fields=self.hashed_fields())


class ChainHead(models.Model):
    """The tip of the tenant's chain (one row, id 1): appenders lock it, so the chain stays linear."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    last_seq = models.BigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default=GENESIS_HASH)

    def __str__(self) -> str:
        return f"chain head #{self.last_seq}"
