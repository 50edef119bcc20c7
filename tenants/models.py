"""Tenants (one PostgreSQL schema each), their domains and their retrieval policy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models, transaction
from django_tenants.models import DomainMixin, TenantMixin
from django_tenants.utils import get_public_schema_name, schema_exists

from core.holds import holds_refuse_tenant_delete
from core.tenancy import maintenance, roles_enabled

from . import roles

unit_interval = [MinValueValidator(0.0), MaxValueValidator(1.0)]
schema_name_validator = RegexValidator(
    r"^[a-z][a-z0-9_]{0,62}$", "Use lowercase letters, digits and underscores, starting with a letter."
)


@dataclass(frozen=True)
class RetrievalPolicy:
    """How semantic recall ranks memories for one tenant.

    ``score = w_similarity * relevance + w_recency * exp(-lambda * hours) + w_importance * importance``
    with ``lambda = ln 2 / recency_half_life_hours`` (Park et al. 2023, "Generative Agents", §4.1).
    Writes whose cosine similarity to an existing memory is at least ``near_duplicate_threshold``
    reinforce that memory instead of inserting a new one, when they say the same thing (no negation,
    number, date or name differs: ``memory.semantic.differences``).
    """

    w_similarity: float
    w_recency: float
    w_importance: float
    recency_half_life_hours: float
    near_duplicate_threshold: float


@dataclass(frozen=True)
class WorkingMemoryPolicy:
    """Limits of the Redis-backed working memory for one tenant (seconds, turns, bytes)."""

    blackboard_ttl_seconds: int
    scratchpad_ttl_seconds: int
    window_ttl_seconds: int
    window_max_turns: int
    value_max_bytes: int
    checkpoint_cache_ttl_seconds: int
    window_log_trimmed: bool = True


@dataclass(frozen=True)
class ConsolidationPolicy:
    """How one tenant's memories are consolidated (see ``memory.consolidation``).

    Forgetting curve: recall probability ``p = exp(-t / S)`` with ``t`` the hours since last access
    and ``S`` the memory's stability in hours, starting at ``initial_stability_hours`` and raised on
    every recall by ``stability_growth`` (``memory.semantic.forgetting``). A memory older than
    ``archive_min_age_hours`` whose ``p`` is below ``archive_below_recall`` is archived. Memories
    with confidence above ``promote_min_confidence`` and at least ``promote_min_accesses`` accesses
    are promoted to facts. Summary leaves hold ``summary_leaf_events`` events or
    ``summary_leaf_tokens`` tokens, whichever comes first; each summary of summaries covers
    ``summary_fanout`` nodes of the level below. ``window_log_trimmed``: turns trimmed from a
    conversation window go to the episodic log. ``interval_hours``: the consolidation schedule.
    """

    interval_hours: float
    initial_stability_hours: float
    stability_growth: float
    archive_below_recall: float
    archive_min_age_hours: float
    promote_min_confidence: float
    promote_min_accesses: int
    summary_leaf_events: int
    summary_leaf_tokens: int
    summary_fanout: int
    window_log_trimmed: bool


class Tenant(TenantMixin):
    """A customer organisation. ``schema_name`` doubles as its slug (``demo`` → ``demo.localhost``)."""

    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    is_active = models.BooleanField(default=True)
    # the PostgreSQL server holding the schema: "default" (DATABASE_URL's) or an alias of
    # ENGRAM["DB_SERVERS"]; a tenant's units of work connect there (decision 0071)
    database = models.CharField(max_length=63, default="default", editable=False)
    # a move to another server is copying the schema: the tenant's requests answer 503 meanwhile
    moving = models.BooleanField(default=False, editable=False)

    w_similarity = models.FloatField(default=0.7, validators=unit_interval)
    w_recency = models.FloatField(default=0.15, validators=unit_interval)
    w_importance = models.FloatField(default=0.15, validators=unit_interval)
    recency_half_life_hours = models.FloatField(default=72.0, validators=[MinValueValidator(0.01)])
    near_duplicate_threshold = models.FloatField(default=0.97, validators=unit_interval)

    blackboard_ttl_seconds = models.PositiveIntegerField(default=24 * 3600, validators=[MinValueValidator(1)])
    scratchpad_ttl_seconds = models.PositiveIntegerField(default=3600, validators=[MinValueValidator(1)])
    window_ttl_seconds = models.PositiveIntegerField(default=3600, validators=[MinValueValidator(1)])
    window_max_turns = models.PositiveIntegerField(default=50, validators=[MinValueValidator(1)])
    working_value_max_bytes = models.PositiveIntegerField(
        default=10 * 1024, validators=[MinValueValidator(1)]
    )
    checkpoint_cache_ttl_seconds = models.PositiveIntegerField(
        default=24 * 3600, validators=[MinValueValidator(1)]
    )

    json_max_depth = models.PositiveSmallIntegerField(
        default=64,
        validators=[MinValueValidator(2), MaxValueValidator(200)],
        help_text="How deeply a JSON value sent to the API may nest (event payloads, memory metadata, "
        "checkpoint state, working-memory values); deeper is a 400 naming the field.",
    )

    default_predicate_cardinality = models.CharField(
        max_length=4,
        choices=[("one", "one"), ("many", "many")],
        default="one",
        help_text="Cardinality given to a predicate the first time an agent uses it.",
    )

    context_tokenizer = models.CharField(
        max_length=100,
        blank=True,
        help_text="The tokenizer context assembly counts tokens with: a name from the ENGRAM_TOKENIZERS "
        "setting (blank: the default, the WordPiece tokenizer of all-MiniLM-L6-v2).",
    )
    # --- consolidation (memory.consolidation; see ConsolidationPolicy) ---
    consolidation_interval_hours = models.FloatField(
        default=12.0,
        validators=[MinValueValidator(1.0), MaxValueValidator(168.0)],
        help_text="Hours between two consolidation passes (forgetting, promotion, summaries).",
    )
    initial_stability_hours = models.FloatField(
        default=168.0,
        validators=[MinValueValidator(0.01)],
        help_text="Stability S of a new memory, in hours: its recall probability is exp(-t/S).",
    )
    stability_growth = models.FloatField(
        default=2.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(100.0)],
        help_text="How much a recall raises S: S' = S·(1 + g·max(1 - p, 0.1)) (spacing effect).",
    )
    archive_below_recall = models.FloatField(
        default=0.05,
        validators=unit_interval,
        help_text="Memories whose recall probability is below this are archived (hidden from recall).",
    )
    archive_min_age_hours = models.FloatField(
        default=30 * 24.0,
        validators=[MinValueValidator(0.0)],
        help_text="Memories younger than this are never archived.",
    )
    promote_min_confidence = models.FloatField(
        default=0.9, validators=unit_interval, help_text="Memories with a higher confidence may become facts."
    )
    promote_min_accesses = models.PositiveIntegerField(
        default=3, help_text="…once recalled or reinforced at least this often."
    )
    summary_leaf_events = models.PositiveIntegerField(
        default=20, validators=[MinValueValidator(1), MaxValueValidator(1000)]
    )
    summary_leaf_tokens = models.PositiveIntegerField(
        default=2000, validators=[MinValueValidator(50), MaxValueValidator(100_000)]
    )
    summary_fanout = models.PositiveIntegerField(
        default=8, validators=[MinValueValidator(2), MaxValueValidator(100)]
    )
    window_log_trimmed = models.BooleanField(
        default=True, help_text="Turns trimmed from a conversation window are written to the episodic log."
    )

    auto_create_schema = True
    auto_drop_schema = False

    class Meta:
        ordering = ["schema_name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.schema_name})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """django-tenants' save; a new tenant's row, schema, tables, role and grants commit in one
        transaction (``create_schema`` runs inside it). Until then no other connection sees the
        tenant: a sweep listing tenants, a key naming it, a task queued for it would otherwise find
        the row while its role does not exist yet (``role ... does not exist``), for as long as the
        tenant migrations run."""
        with transaction.atomic():
            super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        """django-tenants' delete (role, schema when asked, then the row) in one transaction: the
        row never outlives its role for another connection either. Refused (``Conflict``) while a
        legal hold in the tenant's schema is active (``core.holds.holds_refuse_tenant_delete``)."""
        with transaction.atomic():
            holds_refuse_tenant_delete(schema_name=self.schema_name)
            return super().delete(*args, **kwargs)

    def create_schema(
        self, check_if_exists: bool = False, sync_schema: bool = True, verbosity: int = 1
    ) -> bool:
        """django-tenants' schema creation (the schema, then the tenant migrations in it), as the
        maintenance role, followed by the tenant's role (``tenants.roles.tenant_role_ensure``).
        Every way of creating a tenant goes through here (``tenant_create``, the platform admin),
        inside ``save``'s transaction. A savepoint of its own: when a step fails, django-tenants'
        clean-up (``delete``) can still run its statements before the error goes on."""
        with transaction.atomic(), maintenance():
            created = super().create_schema(
                check_if_exists=check_if_exists, sync_schema=sync_schema, verbosity=verbosity
            )
            if (
                roles_enabled()
                and self.schema_name != get_public_schema_name()
                and schema_exists(self.schema_name)
            ):
                roles.tenant_role_ensure(self.schema_name)
        return created is not False

    def _drop_schema(self, force_drop: bool = False) -> None:
        """Drop the tenant's role, then what django-tenants drops (the schema when ``force_drop`` or
        ``auto_drop_schema``), as the maintenance role. The role goes first: if it cannot be
        dropped (someone granted it more), nothing has been dropped yet."""
        with maintenance():
            if roles_enabled() and self.schema_name != get_public_schema_name():
                roles.tenant_role_drop(self.schema_name)
            super()._drop_schema(force_drop)

    @property
    def slug(self) -> str:
        return self.schema_name

    @property
    def retrieval_policy(self) -> RetrievalPolicy:
        """The tenant's ranking weights and thresholds as an immutable value."""
        return RetrievalPolicy(
            w_similarity=self.w_similarity,
            w_recency=self.w_recency,
            w_importance=self.w_importance,
            recency_half_life_hours=self.recency_half_life_hours,
            near_duplicate_threshold=self.near_duplicate_threshold,
        )

    @property
    def working_memory_policy(self) -> WorkingMemoryPolicy:
        """The tenant's working-memory TTLs and size limit as an immutable value."""
        return WorkingMemoryPolicy(
            blackboard_ttl_seconds=self.blackboard_ttl_seconds,
            scratchpad_ttl_seconds=self.scratchpad_ttl_seconds,
            window_ttl_seconds=self.window_ttl_seconds,
            window_max_turns=self.window_max_turns,
            value_max_bytes=self.working_value_max_bytes,
            checkpoint_cache_ttl_seconds=self.checkpoint_cache_ttl_seconds,
            window_log_trimmed=self.window_log_trimmed,
        )

    @property
    def consolidation_policy(self) -> ConsolidationPolicy:
        """The tenant's forgetting, promotion and summary settings as an immutable value."""
        return ConsolidationPolicy(
            interval_hours=self.consolidation_interval_hours,
            initial_stability_hours=self.initial_stability_hours,
            stability_growth=self.stability_growth,
            archive_below_recall=self.archive_below_recall,
            archive_min_age_hours=self.archive_min_age_hours,
            promote_min_confidence=self.promote_min_confidence,
            promote_min_accesses=self.promote_min_accesses,
            summary_leaf_events=self.summary_leaf_events,
            summary_leaf_tokens=self.summary_leaf_tokens,
            summary_fanout=self.summary_fanout,
            window_log_trimmed=self.window_log_trimmed,
        )


class Domain(DomainMixin):
    """A host name that routes browser (admin) requests to a tenant, e.g. ``demo.localhost``."""

    def __str__(self) -> str:
        return self.domain


class ErasureLedgerEntry(models.Model):
    """An erasure a tenant completed, kept in the public schema (outside the tenant's schema and
    its backups): ``tenant_restore`` re-applies every entry of the tenant that the restored data
    does not hold as done, so a backup made before an erasure never brings its target back
    (decision 0091). Names the target by its keyed digest only (``compliance.lifecycle.value_digest``),
    like the request once done; keyed by the schema name, not the tenant's row, so it outlives a
    tenant dropped to be restored."""

    schema_name = models.CharField(max_length=63, db_index=True)
    erasure_id = models.UUIDField(unique=True)
    kind = models.CharField(max_length=8)
    value_digest = models.CharField(max_length=64)
    finished_at = models.DateTimeField()
    receipt_sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["finished_at"]
        verbose_name_plural = "erasure ledger entries"

    def __str__(self) -> str:
        return f"erasure {str(self.erasure_id)[:8]} of {self.schema_name}"
