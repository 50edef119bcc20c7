"""What the consolidation jobs keep: their runs, the promotions of memories to facts, and the
episodic summary tree."""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.utils import timezone


class Job(models.TextChoices):
    FORGETTING = "forgetting", "forgetting curve (archive)"
    PROMOTION = "promotion", "promotion to facts"
    SUMMARIES = "summaries", "episodic summary tree"


class RunStatus(models.TextChoices):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class ConsolidationRun(models.Model):
    """One run of one job in the tenant: when, how long, what it counted, how it ended.

    ``clock`` is the moment the job reasons about (now, or a controlled clock in tests); ``cursor``
    its progress, committed with each batch, so a run whose worker was killed resumes where its last
    batch ended (``attempts`` counts the starts); ``counts`` maps a counter name to its value.
    """

    job = models.CharField(max_length=16, choices=Job.choices)
    status = models.CharField(max_length=8, choices=RunStatus.choices, default=RunStatus.RUNNING)
    clock = models.DateTimeField()
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    cursor = models.JSONField(default=dict, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["job", "status", "started_at"], name="consolidation_run_idx")]

    def __str__(self) -> str:
        return f"{self.job} run #{self.pk} ({self.status})"

    @property
    def duration(self) -> timedelta | None:
        return self.finished_at - self.started_at if self.finished_at else None


class PromotionOutcome(models.TextChoices):
    CREATED = "created"
    REINFORCED = "reinforced"
    DISPUTED = "disputed"
    REFUSED = "refused", "refused (the fact was retracted)"
    INVALID = "invalid", "invalid hint"


class Promotion(models.Model):
    """A memory promoted to a fact, once (the memory is unique here): the fact and the provenance
    row its assert added (``provenance.source_event`` is the memory's source event), or why not."""

    memory = models.OneToOneField("memory.SemanticMemory", on_delete=models.PROTECT, related_name="promotion")
    outcome = models.CharField(max_length=10, choices=PromotionOutcome.choices)
    fact = models.ForeignKey("memory.Fact", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    provenance = models.ForeignKey(
        "memory.FactProvenance", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    contradiction = models.ForeignKey(
        "memory.Contradiction", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    source_event = models.ForeignKey(
        "memory.Event", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    detail = models.TextField(blank=True)
    run = models.ForeignKey(ConsolidationRun, on_delete=models.PROTECT, related_name="promotions")
    promoted_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-promoted_at", "-id"]

    def __str__(self) -> str:
        return f"memory {self.memory_id} → {self.outcome} fact {self.fact_id}"


class SummaryNode(models.Model):
    """One node of a session's summary tree. Level 1 summarises consecutive events of the session
    (a leaf); level ``k + 1`` summarises ``fanout`` consecutive nodes of level ``k``; the one node of
    the top level is the root. Every level partitions the session's events: a node covers the
    events of the session with ``first_seq <= seq <= last_seq`` (``event_count`` of them), and
    ``last_event_hash`` is the chain hash of the last, so an auditor can check the summary against
    its sources (``GET /api/v1/events?session_id=…``). ``memory`` is the searchable copy (a semantic
    memory of type ``summary``)."""

    session_id = models.CharField(max_length=200)
    level = models.PositiveSmallIntegerField()
    position = models.PositiveIntegerField()
    first_seq = models.BigIntegerField()
    last_seq = models.BigIntegerField()
    event_count = models.PositiveIntegerField()
    child_count = models.PositiveIntegerField(default=0)
    tokens = models.PositiveIntegerField(default=0)
    last_event_hash = models.CharField(max_length=64)
    content = models.TextField()
    method = models.CharField(max_length=12, default="extractive")
    memory = models.OneToOneField(
        "memory.SemanticMemory", on_delete=models.PROTECT, null=True, blank=True, related_name="summary_node"
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["session_id", "-level", "position"]
        constraints = [
            models.UniqueConstraint(fields=["session_id", "level", "position"], name="summary_node_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} L{self.level}#{self.position} (#{self.first_seq}-#{self.last_seq})"
