"""Procedural memory: tools as JSON Schema contracts, skills as versioned, validated step lists.

A tool's versions and a skill's published or retired versions never change: triggers in migration
``0010_procedural`` reject any UPDATE of their content (and their DELETE), so an audit of what an
agent ran can always be answered from the row it ran. One version per skill is published at a time
(a partial unique index). Run reports are rows of their own; the counters the matcher reads are kept
in a narrow table beside the (immutable) version rows.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from pgvector.django import VectorField

# Skills and tools are named like identifiers in a URL: ``reset-password``, ``send_email``.
NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
name_validator = RegexValidator(
    NAME_PATTERN, "A lowercase letter, then lowercase letters, digits, '-' or '_'."
)

# Dimensions that get an HNSW index on ``Skill.embedding`` (the pattern of ``semantic.models``).
INDEXED_DIMENSIONS = (256, 384, 768, 1024, 1536)


class Tool(models.Model):
    """A tool agents call, by name. Its contracts live in its versions; ``ToolVersion`` rows are
    immutable, so a skill version pinned to one keeps the contract it was validated against."""

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ToolVersion(models.Model):
    """One contract of a tool: input and output JSON Schemas (2020-12, object schemas)."""

    tool = models.ForeignKey(Tool, on_delete=models.PROTECT, related_name="versions")
    version = models.PositiveIntegerField()
    description = models.TextField(blank=True)
    input_schema = models.JSONField()
    output_schema = models.JSONField()
    author = models.CharField(max_length=200, help_text="agent:<name> or user:<name>")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["tool__name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["tool", "version"], name="toolversion_tool_version_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.tool.name} v{self.version}"


class Skill(models.Model):
    """How an agent does a recurring task. Title, description and intents are what requests match
    (embedded together, and full-text indexed); steps and the input schema live in the versions.

    ``embedding`` is L2-normalised, of ``embedding_dimensions``, from ``embedding_model`` (the
    tenant's embedder, as for semantic memory).
    """

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    intents = ArrayField(models.CharField(max_length=300), default=list, blank=True)
    tags = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    owner = models.CharField(max_length=200, blank=True, help_text="who answers for it (a team or a person)")
    intents_text = models.TextField(blank=True, editable=False)  # intents joined: the full-text input
    search = models.GeneratedField(
        expression=SearchVector("title", "intents_text", config="english", weight="A")
        + SearchVector("description", config="english", weight="B"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    embedding = VectorField(null=True)
    embedding_model = models.CharField(max_length=200, blank=True)
    embedding_dimensions = models.PositiveSmallIntegerField(null=True)
    created_by = models.CharField(max_length=200, help_text="agent:<name> or user:<name>")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        # fastupdate off: new entries go straight into the index instead of a pending list that
        # every search scans linearly until a vacuum merges it; skills are written rarely and
        # matched often (decision record 0020)
        indexes = [
            GinIndex(fields=["search"], name="skill_search_gin", fastupdate=False),
            GinIndex(fields=["tags"], name="skill_tags_gin", fastupdate=False),
        ]

    def __str__(self) -> str:
        return self.name

    def match_text(self) -> str:
        """What the embedding is computed from: title, intents and description."""
        return "\n".join([self.title, *self.intents, self.description]).strip()


class VersionStatus(models.TextChoices):
    DRAFT = "draft"
    PUBLISHED = "published"
    RETIRED = "retired"


class SkillVersion(models.Model):
    """One version of a skill's steps and input schema.

    A ``draft`` is edited in place (``revision`` counts the saves: a save naming an older revision
    is refused, so two operators never overwrite each other). Publishing freezes it: from then on
    only ``status``, ``status_changed_at`` and ``retired_at`` may change (a trigger enforces it),
    and ``tool_versions`` records the tool contracts it was validated against (``{name: version}``).
    ``proposed_by`` is the agent whose proposal it was (None: an operator's draft).
    """

    skill = models.ForeignKey(Skill, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=VersionStatus.choices, default=VersionStatus.DRAFT)
    steps = models.JSONField(default=list)
    input_schema = models.JSONField(default=dict)
    change_note = models.TextField(blank=True)
    author = models.CharField(max_length=200, help_text="agent:<name> or user:<name>")
    proposed_by = models.ForeignKey(
        "agents.Agent", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    source_session_id = models.CharField(max_length=200, blank=True, help_text="the run it was learned from")
    based_on = models.PositiveIntegerField(null=True, blank=True, help_text="the version it started from")
    revision = models.PositiveIntegerField(default=1)
    tool_versions = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    published_at = models.DateTimeField(null=True, blank=True)
    published_by = models.CharField(max_length=200, blank=True)
    status_changed_at = models.DateTimeField(default=timezone.now)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["skill__name", "-number"]
        permissions = [
            ("publish_skillversion", "Can publish, retire and roll back skill versions"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["skill", "number"], name="skillversion_skill_number_uniq"),
            # exactly one published version per skill (the matcher and GET skills/{name} read it)
            models.UniqueConstraint(
                fields=["skill"], condition=Q(status="published"), name="skillversion_one_published"
            ),
        ]
        indexes = [models.Index(fields=["status", "skill"], name="skillversion_status_idx")]

    def __str__(self) -> str:
        return f"{self.skill.name} v{self.number} ({self.status})"

    @property
    def is_draft(self) -> bool:
        return self.status == VersionStatus.DRAFT


class SkillRun(models.Model):
    """An agent's report of one run of a skill version: outcome, failed step, duration."""

    version = models.ForeignKey(SkillVersion, on_delete=models.PROTECT, related_name="runs")
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="+")
    success = models.BooleanField()
    failed_step = models.CharField(max_length=64, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    session_id = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    reported_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-reported_at"]
        indexes = [
            models.Index(fields=["version", "reported_at"], name="skillrun_version_idx"),
            # a session's runs on its timeline
            models.Index(fields=["session_id", "reported_at"], name="skillrun_session_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.version} {'ok' if self.success else 'failed'}"


class SkillRunStats(models.Model):
    """Run counters of one version, what the admin and the matcher read (the ``SkillRun`` rows summed).

    Kept apart from the version row, which is immutable once published, and updated in place with
    ``runs = runs + 1`` by ``skill_run_report``, so concurrent reports never lose a count.
    """

    version = models.OneToOneField(
        SkillVersion, on_delete=models.CASCADE, primary_key=True, related_name="stats"
    )
    runs = models.PositiveIntegerField(default=0)
    successes = models.PositiveIntegerField(default=0)
    last_run_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "skill run statistics"
        verbose_name_plural = "skill run statistics"

    def __str__(self) -> str:
        return f"{self.version_id}: {self.successes}/{self.runs}"

    @property
    def success_rate(self) -> float | None:
        """Successes / runs, or None before the first run."""
        return self.successes / self.runs if self.runs else None
