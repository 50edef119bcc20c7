"""Checkpoints (state hydration): an agent's serialised state at one step of a session.

Checkpoints are per agent within a session: a session is shared by the agents of a multi-agent
system, and each of them has its own checkpoint stream in it (private state, like a scratchpad).
PostgreSQL holds every checkpoint; Redis holds a copy of the latest one per (session, agent) (see
``memory.checkpoints.services``).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC
from typing import Any

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

# JSON clients (JavaScript, Lua inside Redis) hold integers exactly only up to 2**53 - 1.
MAX_STEP_INDEX = 2**53 - 1
MAX_SCHEMA_VERSION = 2**31 - 1


def checkpoint_fingerprint(
    *, step_index: int, state: dict[str, Any], plan: list[Any], schema_version: int
) -> str:
    """Hex SHA-256 (64 chars) of the checkpoint body in canonical JSON (sorted keys, no spaces, UTF-8).

    Two bodies with the same content but another key order have the same fingerprint; the session id
    and idempotency key are not part of it (they select the row the fingerprint is compared with).
    """
    doc = {"step_index": step_index, "state": state, "plan": plan, "schema_version": schema_version}
    data = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class Checkpoint(models.Model):
    """The working state and active plan of ``agent`` in a session after step ``step_index``.

    Rows are written once (``checkpoint_save``) and never changed. Within one agent's stream of a
    session, step indexes strictly increase and each idempotency key names one checkpoint; another
    agent's stream in the same session is independent (its own steps and keys).
    """

    session_id = models.CharField(max_length=200)
    step_index = models.BigIntegerField(validators=[MinValueValidator(0), MaxValueValidator(MAX_STEP_INDEX)])
    idempotency_key = models.CharField(max_length=255)
    state = models.JSONField(help_text="the agent's working state (a JSON object)")
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
        """The checkpoint without ``state`` and ``plan``: JSON-ready, times in UTC with ``Z``.

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
        }

    def document(self) -> dict[str, Any]:
        """The checkpoint as the API shows it and Redis caches it: ``summary()`` plus state and plan."""
        return {**self.summary(), "state": self.state, "plan": self.plan}

    def document_json(self) -> bytes:
        """``document()`` as compact UTF-8 JSON, the bytes cached in Redis and served as they are."""
        return json.dumps(self.document(), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
