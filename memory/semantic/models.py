"""Semantic memory: what agents learned, with embeddings (pgvector), importance and confidence."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from django.utils import timezone
from pgvector.django import VectorField

# Dimensions that get an HNSW index (see migration 0002). A vector column without a fixed dimension
# cannot be indexed as a whole, so each dimension has a partial expression index on
# ``embedding::vector(d)`` — the pattern pgvector documents for mixed dimensions.
INDEXED_DIMENSIONS = (256, 384, 768, 1024, 1536)


class MemoryType(models.TextChoices):
    FACT = "fact"
    PREFERENCE = "preference"
    OBSERVATION = "observation"
    EXPERIENCE = "experience"
    INSTRUCTION = "instruction"
    SUMMARY = "summary"


class MemoryScope(models.TextChoices):
    PRIVATE = "private", "private (its agent only)"
    SHARED = "shared", "shared (every agent of the tenant)"


class SemanticMemory(models.Model):
    """One memory. ``embedding`` is L2-normalised, from ``embedding_model``, of ``embedding_dimensions``.

    Forgetting sets ``forgotten_at``: the row stays for audit but is never recalled again.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="memories")
    scope = models.CharField(max_length=10, choices=MemoryScope.choices, default=MemoryScope.PRIVATE)
    memory_type = models.CharField(max_length=16, choices=MemoryType.choices, default=MemoryType.FACT)
    session_id = models.CharField(max_length=200, null=True, blank=True)
    data_subject = models.CharField(
        max_length=200, blank=True, default="", help_text="the person it is about"
    )
    tags = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    content = models.TextField()
    content_hash = models.CharField(max_length=64, editable=False)
    metadata = models.JSONField(default=dict, blank=True)
    importance = models.FloatField(default=0.5)
    confidence = models.FloatField(default=1.0)
    embedding = VectorField()
    embedding_model = models.CharField(max_length=200)
    embedding_dimensions = models.PositiveSmallIntegerField()
    search = models.GeneratedField(
        expression=SearchVector("content", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(default=timezone.now)
    forgotten_at = models.DateTimeField(null=True, blank=True)
    forgotten_by = models.ForeignKey(
        "agents.Agent", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        verbose_name = "semantic memory"
        verbose_name_plural = "semantic memories"
        ordering = ["-created_at"]
        constraints = [
            # one live row per (agent, scope, normalised text): concurrent identical writes meet here
            models.UniqueConstraint(
                fields=["agent", "scope", "content_hash"],
                condition=Q(forgotten_at__isnull=True),
                name="semantic_live_content_uniq",
            ),
            models.CheckConstraint(
                condition=Q(importance__gte=0) & Q(importance__lte=1), name="semantic_importance_unit"
            ),
            models.CheckConstraint(
                condition=Q(confidence__gte=0) & Q(confidence__lte=1), name="semantic_confidence_unit"
            ),
        ]
        indexes = [
            GinIndex(fields=["search"], name="semantic_search_gin"),
            GinIndex(fields=["tags"], name="semantic_tags_gin"),
            models.Index(fields=["agent", "created_at"], name="semantic_agent_idx"),
            models.Index(fields=["session_id"], name="semantic_session_idx"),
            models.Index(fields=["data_subject"], condition=~Q(data_subject=""), name="semantic_subject_idx"),
        ]

    def __str__(self) -> str:
        return self.content[:80]

    # The recency clock lives in MemoryAccess (see there); these read it through ``access``, which
    # queries should load with ``select_related("access")``.
    @property
    def last_accessed_at(self) -> datetime:
        return self.access.last_accessed_at

    @property
    def access_count(self) -> int:
        return self.access.access_count


class MemoryAccess(models.Model):
    """When a memory was last recalled or reinforced, and how often: the Ebbinghaus clock.

    Kept out of the memory row on purpose: every recall updates it, and an update of the wide memory
    row is not a HOT update there (it inserts into the HNSW, GIN and B-tree indexes again: ~1.3 ms
    per row for HNSW alone at 100k memories). This narrow table has only its primary key and a low
    fillfactor, so recalls update it in place.
    """

    memory = models.OneToOneField(
        SemanticMemory, on_delete=models.CASCADE, primary_key=True, related_name="access"
    )
    last_accessed_at = models.DateTimeField(default=timezone.now)
    access_count = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = "memory access"

    def __str__(self) -> str:
        return f"{self.memory_id}: {self.access_count} at {self.last_accessed_at:%Y-%m-%d %H:%M}"
