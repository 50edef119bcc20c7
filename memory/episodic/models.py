"""The episodic log: an append-only, hash-chained record of what agents did and saw.

Chain format 2 (every event written now) hashes RFC 8785 canonical JSON of the event's header
fields and of a *body digest*, an HMAC-SHA256 of the content and the payload keyed with a random
per-event salt. The payload is stored as its canonical text (``payload_json``), so the hashed form
is exactly what is stored and read back. The salted digest lets a later redaction remove content,
payload and salt while the chain still verifies, and the digest cannot be brute-forced back into a
short text without the salt. Format 1 (events written before) hashed Python's ``json.dumps`` of the
fields and keeps verifying as it always did.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import hmac
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models.functions import Cast

from core.canonical_json import canonical_flat

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


CHAIN_VERSION = 2


def iso_utc(moment: datetime) -> str:
    """An aware datetime as the chain hashes it: ISO 8601 in UTC with microseconds
    (``2026-01-31T12:00:00.000000+00:00``)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


_iso = iso_utc


def chain_hash_v1(*, seq: int, prev_hash: str, fields: dict[str, Any]) -> str:
    """Format 1: SHA-256 (hex) of ``json.dumps`` (sorted keys, no spaces, UTF-8) of ``fields`` (the
    payload as a parsed object) plus ``seq`` and ``prev_hash``; datetimes ISO 8601 in UTC with
    microseconds. Kept to verify events written before format 2."""
    doc = dict(fields, seq=seq, prev_hash=prev_hash)
    for name in ("occurred_at", "recorded_at"):
        doc[name] = _iso(doc[name])
    data = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def hashed_header(
    *,
    session_id: str,
    execution_id: str | None,
    agent_id: int,
    actor: str,
    role: str,
    kind: str,
    occurred_at: datetime | str,
    recorded_at: datetime | str,
) -> dict[str, Any]:
    """The fields the format-2 hash covers besides the body digest, as JSON values (the one
    definition: ``Event.hashed_header``, the appender and the verifier all use it). The times are
    datetimes, or strings already in that form (``ISO_SQL`` has PostgreSQL write them)."""
    return {
        "session_id": session_id,
        "execution_id": execution_id,
        "agent_id": agent_id,
        "actor": actor,
        "role": role,
        "kind": kind,
        "occurred_at": occurred_at if isinstance(occurred_at, str) else _iso(occurred_at),
        "recorded_at": recorded_at if isinstance(recorded_at, str) else _iso(recorded_at),
    }


# A timestamp column as the chain hashes it (``_iso``: ISO 8601 in UTC with microseconds), written by
# PostgreSQL: readers of many rows (the verifier, exports) skip parsing each into a datetime and
# formatting it back, a third of their time. ``ISO_SQL.format("occurred_at")``.
ISO_SQL = "to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"


def body_digest(*, salt: str, content: str, payload_json: str) -> str:
    """HMAC-SHA256 (RFC 2104; hex, 64 chars) keyed with the event's salt (32 hex characters, 128
    random bits) over the RFC 8785 text of ``{"content": content, "payload": payload_json}`` (the
    payload as its stored canonical text, a string)."""
    message = canonical_flat({"content": content, "payload": payload_json})
    # one-shot C HMAC: the verifier computes it for every row
    return hmac.digest(bytes.fromhex(salt), message, "sha256").hex()


def chain_hash(*, seq: int, prev_hash: str, header: dict[str, Any], digest: str) -> str:
    """Format 2: SHA-256 (hex, 64 chars) of the RFC 8785 text of ``header`` (the event's fields other
    than content and payload, datetimes as ISO 8601 UTC strings with microseconds) with ``v``,
    ``seq``, ``prev_hash`` and ``body_digest``. Changing any field, the order or a predecessor
    changes every later hash (a hash chain, as in RFC 6962's log)."""
    doc = {**header, "v": CHAIN_VERSION, "seq": seq, "prev_hash": prev_hash, "body_digest": digest}
    # canonical_flat: rfc8785.dumps's text by a path for flat documents (the verifier hashes every row)
    return hashlib.sha256(canonical_flat(doc)).hexdigest()


# The ``action`` of the decision event that redacts events: its payload names them (``redacts``, runs
# of seqs), and each event it redacts points back at it (``Event.redacted_by``).
REDACTION_ACTION = "events_redact"


def seq_runs(seqs: Iterable[int]) -> list[list[int]]:
    """``seqs`` as sorted runs of consecutive numbers, ``[[first, last], ...]`` (``[4, 5, 6, 9]`` ->
    ``[[4, 6], [9, 9]]``): how a redaction decision names the events it redacts."""
    runs: list[list[int]] = []
    for seq in sorted(set(seqs)):
        if runs and runs[-1][1] == seq - 1:
            runs[-1][1] = seq
        else:
            runs.append([seq, seq])
    return runs


def runs_hold(runs: list[list[int]], seq: int) -> bool:
    """Whether sorted, disjoint ``runs`` (``seq_runs``) hold ``seq``; a binary search."""
    at = bisect.bisect_right(runs, seq, key=lambda run: run[0]) - 1
    return at >= 0 and runs[at][0] <= seq <= runs[at][1]


def runs_text(runs: list[list[int]], *, limit: int = 12) -> str:
    """``#4-#6, #9`` (the first ``limit`` runs, then how many more)."""
    parts = [f"#{lo}" if lo == hi else f"#{lo}-#{hi}" for lo, hi in runs[:limit]]
    if len(runs) > limit:
        parts.append(f"and {len(runs) - limit} more runs")
    return ", ".join(parts)


class Event(models.Model):
    """One thing that happened in a session. Rows are never updated or deleted (a trigger enforces it).

    ``seq`` is the event's position in the tenant's chain (1, 2, ...); ``hash`` covers the row's
    fields, its ``body_digest`` (content and payload) and ``prev_hash``, the hash of event
    ``seq - 1``. A redacted event (``redacted_at``) has lost its content, payload and salt; its
    ``body_digest`` still commits to what they were, and ``redacted_by`` names the decision that
    redacted it. ``payload_json`` is the payload's RFC 8785 canonical text, the record; ``payload``
    (a property) is that text parsed, and ``payload_index`` a ``jsonb`` copy PostgreSQL derives from
    it for queries (``payload_index__action="..."``), never hashed or returned. ``actor`` names who
    acted when it was not the agent itself (``user:<username>`` for a person in the admin).
    """

    seq = models.BigIntegerField(unique=True, editable=False)
    session_id = models.CharField(max_length=200)
    execution_id = models.CharField(max_length=200, null=True, blank=True)
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="events")
    role = models.CharField(max_length=16, choices=EventRole.choices)
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    actor = models.CharField(max_length=200, blank=True)
    # the person the event is about (an id the agent gives, e.g. a customer number): what erasures
    # and holds target; not hashed, and cleared when the event is redacted
    data_subject = models.CharField(max_length=200, blank=True, default="")
    content = models.TextField(blank=True)
    payload_json = models.TextField(default="{}", editable=False)
    payload_index = models.GeneratedField(
        expression=Cast("payload_json", models.JSONField()),
        output_field=models.JSONField(),
        db_persist=True,
    )
    occurred_at = models.DateTimeField()
    recorded_at = models.DateTimeField(editable=False)
    hash_version = models.PositiveSmallIntegerField(default=CHAIN_VERSION, editable=False)
    body_salt = models.CharField(max_length=32, blank=True, editable=False)
    body_digest = models.CharField(max_length=64, blank=True, editable=False)
    prev_hash = models.CharField(max_length=64, editable=False)
    hash = models.CharField(max_length=64, unique=True, editable=False)
    # set when an erasure or retention removed content, payload and salt for good (the one update
    # the append-only trigger allows); the hash and body digest stay, so the chain still verifies
    redacted_at = models.DateTimeField(null=True, blank=True, editable=False)
    # the seq of the decision event that redacted it (``REDACTION_ACTION``, later in the chain, naming
    # this event); the trigger refuses a redaction without one, the chain check verifies it
    redacted_by = models.BigIntegerField(null=True, blank=True, editable=False)
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
            models.Index(
                fields=["data_subject"], condition=~models.Q(data_subject=""), name="event_subject_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.kind} in {self.session_id}"

    @functools.cached_property
    def payload(self) -> dict[str, Any]:
        """The payload as stored: ``payload_json`` parsed."""
        return json.loads(self.payload_json)

    def hashed_header(self) -> dict[str, Any]:
        """The fields the format-2 hash covers besides the body digest (see ``hashed_header``)."""
        return hashed_header(
            session_id=self.session_id,
            execution_id=self.execution_id,
            agent_id=self.agent_id,
            actor=self.actor,
            role=self.role,
            kind=self.kind,
            occurred_at=self.occurred_at,
            recorded_at=self.recorded_at,
        )

    def compute_body_digest(self) -> str:
        """The digest of the stored content and payload under the stored salt."""
        return body_digest(salt=self.body_salt, content=self.content, payload_json=self.payload_json)

    def compute_hash(self) -> str:
        """The chain hash of the row as stored, in its own format; format 2 takes the stored
        ``body_digest`` (``compute_body_digest`` checks the digest against the body)."""
        if self.hash_version == 1:
            fields = {
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
            return chain_hash_v1(seq=self.seq, prev_hash=self.prev_hash, fields=fields)
        return chain_hash(
            seq=self.seq, prev_hash=self.prev_hash, header=self.hashed_header(), digest=self.body_digest
        )


class ChainHead(models.Model):
    """The tip of the tenant's chain (one row, id 1): appenders lock it, so the chain stays linear."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    last_seq = models.BigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default=GENESIS_HASH)

    def __str__(self) -> str:
        return f"chain head #{self.last_seq}"
