"""The knowledge layer: entities, predicates, facts with provenance and validity time, contradictions.

PostgreSQL is the system of record; ``GraphOutbox`` rows, written in the same transaction as every
fact change, are drained by a Celery task into the Neo4j projection (see ``projection.py``).
"""

from __future__ import annotations

import re
import unicodedata

from django.contrib.postgres.fields import ArrayField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.db.models.functions import MD5
from django.utils import timezone

_SPACES = re.compile(r"\s+")
PREDICATE_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
# Other spellings an entity records (the first ones seen; later ones still find it by its key, they
# are just not listed). Bounded: every assert with a new spelling rewrites the array
# (docs/decisions/0016-knowledge-writes-in-bounded-statements.md).
MAX_ALIASES = 16
#: ``Fact.object_key``'s length: 600 characters of four UTF-8 bytes each (2400) would still fit a
#: B-tree entry (at most 2704 bytes) if an index held the key itself
OBJECT_KEY_MAX_LENGTH = 600


def entity_key(name: str) -> str:
    """The normalised key entities are matched by: Unicode NFKC, case-folded, whitespace collapsed,
    and invisible format characters (category Cf: zero-width spaces, bidi overrides) removed, so
    ``"Al\u200bice"`` cannot pose as a second "Alice"."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return _SPACES.sub(" ", text).strip()


class Cardinality(models.TextChoices):
    ONE = "one", "one (a subject has one object at a time)"
    MANY = "many", "many"


class Entity(models.Model):
    """A thing facts are about. ``key`` (see ``entity_key``) is unique; ``name`` is shown as given;
    ``aliases``: up to ``MAX_ALIASES`` other spellings seen, in order."""

    name = models.CharField(max_length=300)
    key = models.CharField(max_length=1200, unique=True, editable=False)
    entity_type = models.CharField(max_length=64, blank=True)
    aliases = ArrayField(models.CharField(max_length=300), default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name_plural = "entities"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Predicate(models.Model):
    """A relation name in snake_case. ``one``: a subject holds one object at a time, so a different
    object contradicts; ``many``: objects accumulate."""

    name = models.CharField(max_length=64, unique=True)
    cardinality = models.CharField(max_length=4, choices=Cardinality.choices, default=Cardinality.ONE)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]
        permissions = [("change_cardinality", "Can change a predicate's cardinality")]

    def __str__(self) -> str:
        return self.name


class LiteralType(models.TextChoices):
    STRING = "string"
    NUMBER = "number"
    DATE = "date"
    BOOLEAN = "boolean"


class FactStatus(models.TextChoices):
    ACTIVE = "active"
    DISPUTED = "disputed"
    SUPERSEDED = "superseded"
    RETRACTED = "retracted"


LIVE_STATUSES = (FactStatus.ACTIVE, FactStatus.DISPUTED)

#: the most facts a neighbourhood page's walk follows from one entity per hop (the lowest fact ids):
#: a rule of the graph reads (``graph``) that the Neo4j projection's heads hold (``projection``)
GRAPH_FANOUT = 50


class Fact(models.Model):
    """(subject, predicate, object) where the object is an entity or a typed literal.

    ``object_key`` is a canonical text of the object (``e:<entity id>``, ``string:<text>``,
    ``number:<repr>``, ``date:<ISO>``, ``boolean:true``) used to tell "the same fact" from "another
    object". ``valid_from`` / ``valid_to`` are valid time (when it held in the world);
    ``recorded_at`` is when Engram learned it.
    """

    subject = models.ForeignKey(Entity, on_delete=models.PROTECT, related_name="facts_as_subject")
    predicate = models.ForeignKey(Predicate, on_delete=models.PROTECT, related_name="facts")
    object_entity = models.ForeignKey(
        Entity, on_delete=models.PROTECT, null=True, blank=True, related_name="facts_as_object"
    )
    literal_type = models.CharField(max_length=8, choices=LiteralType.choices, blank=True)
    literal_value = models.JSONField(null=True, blank=True)
    object_key = models.CharField(max_length=OBJECT_KEY_MAX_LENGTH, editable=False)
    confidence = models.FloatField(validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    status = models.CharField(max_length=10, choices=FactStatus.choices, default=FactStatus.ACTIVE)
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True, blank=True)
    recorded_at = models.DateTimeField(default=timezone.now)
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="facts")
    session_id = models.CharField(max_length=200, blank=True)
    source_event = models.ForeignKey(
        "memory.Event", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # the person the fact is about (``subject`` is the triple's subject entity)
    data_subject = models.CharField(max_length=200, blank=True, default="")
    # when it stopped being live (retracted or superseded): the clock of its retention
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["recorded_at", "id"]
        indexes = [
            models.Index(fields=["subject", "predicate", "status"], name="fact_subject_pred_idx"),
            models.Index(fields=["object_entity", "status"], name="fact_object_idx"),
            models.Index(fields=["agent"], name="fact_agent_idx"),
            models.Index(fields=["session_id"], name="fact_session_idx"),
            models.Index(fields=["data_subject"], condition=~Q(data_subject=""), name="fact_subject_idx"),
            # the graph's edges from and to an entity in fact id order, the other end included: a
            # neighbourhood page reads each entity's first facts from the index alone, without
            # visiting (or sorting) the rows of a hub's thousands (memory/knowledge/graph.py)
            models.Index(
                fields=["subject", "id"],
                include=["object_entity"],
                condition=Q(status__in=["active", "disputed"], object_entity__isnull=False),
                name="fact_graph_out_idx",
            ),
            models.Index(
                fields=["object_entity", "id"],
                include=["subject"],
                condition=Q(status__in=["active", "disputed"], object_entity__isnull=False),
                name="fact_graph_in_idx",
            ),
            # an entity's live facts in ``selectors.fact_list`` order (valid_from, id), one index per
            # end: a recall reads a hub's page of direct facts in order instead of sorting its
            # thousands (``selectors.entity_recall``)
            models.Index(
                fields=["subject", "valid_from", "id"],
                condition=Q(status__in=["active", "disputed"]),
                name="fact_live_subject_page_idx",
            ),
            models.Index(
                fields=["object_entity", "valid_from", "id"],
                condition=Q(status__in=["active", "disputed"], object_entity__isnull=False),
                name="fact_live_object_page_idx",
            ),
        ]
        constraints = [
            # one live row per (subject, predicate, object, end user): a repeat reinforces it instead
            # (services.rule.assert_judge); the key's digest, so the longest key and subject fit a
            # B-tree entry together
            models.UniqueConstraint(
                "subject",
                "predicate",
                "data_subject",
                MD5("object_key"),
                condition=Q(status__in=["active", "disputed"]),
                name="fact_live_uniq",
            ),
            models.CheckConstraint(
                condition=(Q(object_entity__isnull=False) & Q(literal_type=""))
                | (Q(object_entity__isnull=True) & ~Q(literal_type="")),
                name="fact_object_xor_literal",
            ),
            models.CheckConstraint(
                condition=Q(valid_to__isnull=True) | Q(valid_to__gte=models.F("valid_from")),
                name="fact_valid_interval",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.subject} {self.predicate} {self.object_display}"

    @property
    def object_display(self) -> str:
        if self.object_entity_id is not None:
            return str(self.object_entity)
        return f"{self.literal_value!r} ({self.literal_type})"


class FactProvenance(models.Model):
    """One assertion of a fact: who, in which session, from which event, with what confidence."""

    fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="provenance")
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="+")
    session_id = models.CharField(max_length=200, blank=True)
    source_event = models.ForeignKey(
        "memory.Event", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    confidence = models.FloatField()
    asserted_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["asserted_at", "id"]
        indexes = [models.Index(fields=["session_id", "asserted_at"], name="provenance_session_idx")]

    def __str__(self) -> str:
        return f"{self.agent} asserted #{self.fact_id} at {self.asserted_at:%Y-%m-%d %H:%M}"


class ContradictionStatus(models.TextChoices):
    OPEN = "open"
    RESOLVED = "resolved"
    DISMISSED = "dismissed"


class Resolution(models.TextChoices):
    ACCEPT_NEW = "accept_new", "accept the new fact (the existing one is superseded)"
    KEEP_EXISTING = "keep_existing", "keep the existing fact (the new one is retracted)"
    BOTH_VALID = "both_valid", "both are valid (the predicate becomes 'many')"
    DISMISS = "dismiss", "dismiss (not a contradiction: the new fact stands beside the existing one)"


class Contradiction(models.Model):
    """Two facts with the same subject and ``one`` predicate but different objects. While it is open
    its new fact is ``disputed``; once closed (resolved, dismissed, or by a retraction)
    ``decision_event`` is the ``decision`` in the trail that closed it."""

    existing_fact = models.ForeignKey(
        Fact, on_delete=models.PROTECT, related_name="contradictions_as_existing"
    )
    new_fact = models.ForeignKey(Fact, on_delete=models.PROTECT, related_name="contradictions_as_new")
    status = models.CharField(
        max_length=10, choices=ContradictionStatus.choices, default=ContradictionStatus.OPEN
    )
    resolution = models.CharField(max_length=16, choices=Resolution.choices, blank=True)
    reviewer = models.CharField(max_length=150, blank=True, help_text="username of the person who decided")
    resolved_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    decision_event = models.ForeignKey(
        "memory.Event",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="the decision in the trail that closed it",
    )

    class Meta:
        ordering = ["created_at", "id"]
        permissions = [("resolve_contradiction", "Can resolve contradictions")]
        constraints = [
            models.UniqueConstraint(fields=["existing_fact", "new_fact"], name="contradiction_pair_uniq"),
        ]
        indexes = [models.Index(fields=["status", "created_at"], name="contradiction_status_idx")]

    def __str__(self) -> str:
        return f"contradiction #{self.pk} ({self.status})"


class GraphOutbox(models.Model):
    """A fact whose projection in Neo4j must be brought up to date (transactional outbox)."""

    fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["id"], condition=Q(processed_at__isnull=True), name="outbox_pending_idx"),
        ]

    def __str__(self) -> str:
        return f"outbox #{self.pk} for fact #{self.fact_id}"
