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
from pgvector.django import SparseVectorField, VectorField

# Dimensions that get an HNSW index (see migration 0002). A vector column without a fixed dimension
# cannot be indexed as a whole, so each dimension has a partial expression index on
# ``embedding::vector(d)`` — the pattern pgvector documents for mixed dimensions.
INDEXED_DIMENSIONS = (256, 384, 768, 1024, 1536)
# The lexical vector's space: lexemes hashed into pgvector's largest sparsevec dimension
# (memory/sql/memory_lexeme_index.sql hashes lexemes into 1 .. LEXICAL_DIMENSIONS - 1).
LEXICAL_DIMENSIONS = 1_000_000_000


class MemoryType(models.TextChoices):
    FACT = "fact"
    PREFERENCE = "preference"
    OBSERVATION = "observation"
    EXPERIENCE = "experience"
    INSTRUCTION = "instruction"
    SUMMARY = "summary"
    # the linked row of an indexed item of the LangGraph store (``memory.store``): its text and
    # vector serve the store's search through this table's index, postings and scoring, and it is
    # kept out of every memory read, job and lifecycle pass (``visibility_q``, consolidation, the
    # semantic layer of ``compliance.lifecycle``); agents never write this type
    STORE = "store"


# the types an agent may write or filter on through the memory API (not the store's rows)
AGENT_MEMORY_TYPES = [(value, label) for value, label in MemoryType.choices if value != MemoryType.STORE]


class MemoryScope(models.TextChoices):
    PRIVATE = "private", "private (its agent only)"
    SHARED = "shared", "shared (every agent of the tenant)"
    HIERARCHICAL = "hierarchical", "hierarchical (its agent and the agents or roles it names)"


class SemanticMemory(models.Model):
    """One memory. ``embedding`` is L2-normalised, from ``embedding_model``, of ``embedding_dimensions``.

    Forgetting sets ``forgotten_at``: the row stays for audit but is never recalled again.
    Archiving (the forgetting curve, ``memory.consolidation``) sets ``archived_at``: hidden from
    default recall, found with ``include_archived``, restored by a recall, a reinforcement or an
    operator. A memory written with ``"write": "async"`` is *pending* until the worker embeds it
    (``embedding`` null, ``embedding_dimensions`` 0: no search reaches it); a pending memory the
    worker finds to be a near duplicate is merged (``merged_into`` the memory it reinforced, and
    hidden like a forgotten one). ``fact_hint`` is an optional ``{"subject", "predicate", "object"}``
    the promotion to facts uses; ``source_event`` the event the memory came from.

    An update supersedes a memory: ``superseded_by`` the newer version, at ``superseded_at``; the
    row stays (history: ``include_superseded``, ``as_of``, the versions of a memory) and leaves
    default recall, listing and every job.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="memories")
    scope = models.CharField(max_length=12, choices=MemoryScope.choices, default=MemoryScope.PRIVATE)
    memory_type = models.CharField(max_length=16, choices=MemoryType.choices, default=MemoryType.FACT)
    session_id = models.CharField(max_length=200, null=True, blank=True)
    data_subject = models.CharField(
        max_length=200, blank=True, default="", help_text="the person it is about"
    )
    tags = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    # hierarchical scope: who else may recall it, by agent id and by agent role (empty otherwise)
    visible_to_agents = ArrayField(models.BigIntegerField(), default=list, blank=True)
    visible_to_roles = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    content = models.TextField()
    content_hash = models.CharField(max_length=64, editable=False)
    metadata = models.JSONField(default=dict, blank=True)
    importance = models.FloatField(default=0.5)
    confidence = models.FloatField(default=1.0)
    embedding = VectorField(null=True, blank=True)
    embedding_model = models.CharField(max_length=200)
    embedding_dimensions = models.PositiveSmallIntegerField()
    search = models.GeneratedField(
        expression=SearchVector("content", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    # BM25 term saturations of ``search`` by hashed lexeme (``memory_lexical_vector``), set by a
    # database trigger from ``content`` (memory/sql/memory_lexical_set.sql): search scores a candidate's words with one
    # sparse dot product against the query's IDFs, without reading ``search`` back (decision 0042)
    lexical = SparseVectorField(dimensions=LEXICAL_DIMENSIONS, null=True, blank=True, editable=False)
    # The share of ``content``'s words in its questions (sentences ending in '?'), in [0, 1], set by
    # the same trigger (``memory_asked_share``): search counts the asked part of a text at
    # ``ASKED_WEIGHT`` on its dense side as ``lexical`` does on its lexical side (decision 0121)
    asked_share = models.FloatField(db_default=0.0, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    archived_at = models.DateTimeField(null=True, blank=True)
    fact_hint = models.JSONField(null=True, blank=True)
    source_event = models.ForeignKey(
        "memory.Event", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    merged_into = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    # an update: the memory that replaced this one and when (``services.supersede``); set together,
    # never cleared but by erasure of the newer version (``superseded_at`` then stays: still history)
    superseded_by = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    superseded_at = models.DateTimeField(null=True, blank=True)
    forgotten_at = models.DateTimeField(null=True, blank=True)
    forgotten_by = models.ForeignKey(
        "agents.Agent", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        verbose_name = "semantic memory"
        verbose_name_plural = "semantic memories"
        ordering = ["-created_at"]
        permissions = [("restore_semanticmemory", "Can restore archived memories to recall")]
        constraints = [
            # one live, current row per (agent, scope, end user, normalised text): concurrent identical
            # writes meet here; two end users' same sentence stays two memories (decision 0078); a
            # superseded version leaves it (the text may become current again)
            models.UniqueConstraint(
                fields=["agent", "scope", "data_subject", "content_hash"],
                condition=Q(forgotten_at__isnull=True, superseded_at__isnull=True),
                name="semantic_live_content_uniq",
            ),
            models.CheckConstraint(
                condition=Q(importance__gte=0) & Q(importance__lte=1), name="semantic_importance_unit"
            ),
            models.CheckConstraint(
                condition=Q(confidence__gte=0) & Q(confidence__lte=1), name="semantic_confidence_unit"
            ),
            # only a hierarchical memory names who else may see it
            models.CheckConstraint(
                condition=Q(scope="hierarchical") | (Q(visible_to_agents=[]) & Q(visible_to_roles=[])),
                name="semantic_visible_to_hierarchical",
            ),
        ]
        indexes = [
            # no index on ``search``: nothing reads the tsvector by index since the lexical arm
            # moved to ``LexicalPosting`` (migration 0024 dropped it)
            GinIndex(fields=["tags"], name="semantic_tags_gin"),
            models.Index(fields=["agent", "created_at"], name="semantic_agent_idx"),
            # a session's memories of one agent and scope in time order: a memory's neighbours
            # (``MemoryContext``) are two ordered scans of it, LIMIT 2 each
            models.Index(
                fields=["session_id", "agent_id", "scope", "created_at", "id"],
                name="semantic_session_order_idx",
            ),
            # the embedding worker's queue: pending (not yet embedded) live memories, oldest first
            models.Index(
                fields=["created_at"],
                name="semantic_pending_idx",
                condition=Q(embedding_dimensions=0, forgotten_at__isnull=True),
            ),
            models.Index(fields=["data_subject"], condition=~Q(data_subject=""), name="semantic_subject_idx"),
            # a memory's older versions (the chain read backwards; erasure clears pointers to a row)
            models.Index(
                fields=["superseded_by"],
                name="semantic_superseded_by_idx",
                condition=Q(superseded_by__isnull=False),
            ),
            # promotion's candidates (memory.consolidation): the few live embedded memories above a
            # confidence, found without reading the whole table (1% of 1M memories: a bitmap scan of
            # 10k entries instead of a walk of the primary key filtering every row). No
            # ``archived_at`` in it: archiving would then have to update this index too.
            models.Index(
                fields=["confidence"],
                name="semantic_promotable_idx",
                condition=Q(forgotten_at__isnull=True, embedding_dimensions__gt=0)
                & ~Q(memory_type="summary"),
            ),
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

    @property
    def pending(self) -> bool:
        """Written asynchronously and not embedded yet (not searchable yet)."""
        return self.embedding_dimensions == 0


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
    # hours; recall probability exp(-t/S) (memory.semantic.forgetting); raised on every access
    stability_hours = models.FloatField(default=168.0)

    class Meta:
        verbose_name = "memory access"

    def __str__(self) -> str:
        return f"{self.memory_id}: {self.access_count} at {self.last_accessed_at:%Y-%m-%d %H:%M}"


# BM25 (Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework: BM25 and Beyond", eq. 3.15)
# term saturation. The document length is the number of distinct lexemes of ``search``; AVG_DOC_LEXEMES
# stands in for the corpus mean: a fixed value keeps every stored impact valid as the corpus grows.
# Memories are short texts whose length says little about their topicality, so the length
# normalisation is soft (b = 0.3, as found for short documents; Lucene's 0.75 suits articles):
# with b = 0.75 and a mean of 8 lexemes, a 20-lexeme memory holding every word of a question lost
# to a 5-lexeme one holding half of them (LoCoMo dev, locomo_eval: MRR 0.498 -> 0.54 with this
# alone; memories there hold 20 lexemes on average, benchmarks/corpus.py's 8).
# The SQL side: memory/sql/memory_bm25_saturation.sql (these constants, written into it).
BM25_K1 = 1.2
BM25_B = 0.3
AVG_DOC_LEXEMES = 16.0

# What a memory asks counts half of what it states (decision 0121): its sentences ending in '?' are a
# field of their own in ``lexical`` (memory/sql/memory_lexical_weights.sql, this value written into
# it), weighed ASKED_WEIGHT, and search scales its cosine by ``1 - (1 - ASKED_WEIGHT) * asked_share``.
# A question names what its answer is about and says nothing of it: in a conversation the turn that
# asks "What kind of counseling do you want to pursue?" echoes the words of a question about it, the
# turn that answers holds the answer. Half, not fitted: LoCoMo dev is flat from 0.25 to 0.75
# (hit@10 0.853-0.855, MRR 0.603-0.606); MADial's memories ask nothing.
ASKED_WEIGHT = 0.5


class LexicalPosting(models.Model):
    """One (lexeme, memory) posting of the lexical index: the BM25 term saturation of the lexeme in
    the memory's ``search`` vector, ``tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))`` (no IDF: that
    is the query's side, from the table's statistics, see ``selectors.lexeme_idf``).

    Maintained by a database trigger on ``SemanticMemory`` (memory/sql/memory_lexical_postings.sql): every insert, content
    change (erasure) and delete keeps the postings equal to ``search``, whatever wrote the row (the
    services, bulk loads, the admin). Read by the lexical arm of search through the index
    ``(lexeme, impact DESC)``: the best ``n`` memories for a word cost ``n`` index entries however
    many memories hold it, so the lexical arm does not grow with the corpus (decision 0042).
    """

    pk = models.CompositePrimaryKey("memory_id", "lexeme")
    # no database constraint: the trigger deletes postings with their memory, and a TRUNCATE of the
    # memory table (test flushes) need not name this one
    memory = models.ForeignKey(
        SemanticMemory, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    lexeme = models.TextField()
    impact = models.FloatField()

    class Meta:
        verbose_name = "lexical posting"
        indexes = [
            models.Index("lexeme", models.F("impact").desc(), "memory", name="lexical_posting_rank_idx")
        ]

    def __str__(self) -> str:
        return f"{self.lexeme} in {self.memory_id}: {self.impact:.3f}"


# How many memories on each side of a memory, in its session's order, make up its context.
# The SQL side: memory/sql/memory_context_around.sql (LIMIT 2 on each side).
CONTEXT_NEIGHBOURS = 2


class MemoryContext(models.Model):
    """The lexical context of a memory: the text of its neighbours, as a second, weaker signal of
    search credited to the memory itself (in a conversation the answer often sits in the turn next
    to the one that names the subject: "What did you buy?" / "A bike, a year ago").

    The neighbours are the ``CONTEXT_NEIGHBOURS`` live memories just before and just after it in
    the order ``(created_at, id)`` among the memories of the same agent, scope, audience and
    ``session_id`` (none without a session; never the store's rows). ``lexical`` is, per lexeme,
    the largest BM25 saturation the lexeme has in any neighbour, in the space of
    ``SemanticMemory.lexical``, so search scores it with the same sparse dot product against the
    query's IDFs; ``sources`` names the neighbours it was built from.

    Maintained by database triggers on ``SemanticMemory``
    (memory/sql/memory_context_{inserted,deleted,updated}.sql), whatever wrote the row:
    an insert (also out of time order), a content change (erasure, redaction), forgetting, merging
    (which forgets), a move to another session or scope, and a delete rebuild the context of every
    memory whose neighbours changed, so no context ever holds text of a memory that is gone or
    forgotten. A narrow table of its own, like ``MemoryAccess``: rebuilding a context must not
    rewrite the memory row (and its HNSW entry).
    """

    memory = models.OneToOneField(
        SemanticMemory,
        on_delete=models.DO_NOTHING,
        db_constraint=False,  # the trigger deletes it with its memory (as the postings)
        primary_key=True,
        related_name="context",
    )
    lexical = SparseVectorField(dimensions=LEXICAL_DIMENSIONS, editable=False)
    sources = ArrayField(models.UUIDField(), default=list, editable=False)

    class Meta:
        verbose_name = "memory context"

    def __str__(self) -> str:
        return f"{self.memory_id}: {len(self.sources)} neighbours"
