"""What a conversation's extraction job keeps: the messages it reads, the model's prompt and raw
answer, and the decisions applied (the audit record of what a language model made of them)."""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.utils import timezone


class JobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class ExtractionJob(models.Model):
    """One extraction of memories and facts from the messages (``event_ids``, events of ``session_id``)
    an agent added in one call, for the end user ``data_subject`` ("" when none).

    The worker fills ``prompt`` (the system and user text sent), ``answer`` (the model's text as
    received) and ``decisions`` (one object per extracted item: ``{"kind": "memory" | "fact",
    "action": "add" | "update" | "noop" | "assert", ...ids}``), then ends ``done``, or ``failed`` with
    the ``error`` (nothing of the answer applied). ``scope`` and ``tags`` are those of the memories it
    writes. Holds personal data (the messages' text is in the prompt): erased with the subject,
    session or agent (``compliance.lifecycle``)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="+")
    session_id = models.CharField(max_length=200)
    data_subject = models.CharField(max_length=200, blank=True, default="")
    event_ids = ArrayField(models.BigIntegerField())
    scope = models.CharField(max_length=16)
    tags = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    status = models.CharField(max_length=8, choices=JobStatus.choices, default=JobStatus.QUEUED)
    model = models.CharField(max_length=200, blank=True)
    prompt = models.TextField(blank=True)
    answer = models.TextField(blank=True)
    decisions = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["session_id"], name="extraction_session_idx"),
            models.Index(
                fields=["data_subject"], condition=~Q(data_subject=""), name="extraction_subject_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"extraction {self.pk} ({self.status})"
