"""The item store: LangGraph's ``BaseStore`` (long-term memory shared by a graph's runs) over Engram.

Why a layer of its own, and why it sits above semantic memory: an item is a JSON document an
application names by ``(namespace, key)`` and reads back whole, not a memory an agent recalls by
meaning, so its system of record is this table (exact reads, upserts, namespace listing, filters on
the document). What it shares with semantic memory is search: an indexed item owns one linked
``SemanticMemory`` row of type ``store`` (``memory_type = MemoryType.STORE``) holding the item's
indexed text and its vector, so the one HNSW index, the one lexical index (BM25 postings kept by
its trigger) and the one hybrid scoring statement (``memory.semantic.selectors.hybrid_search``)
rank items too; no second ranking exists. Those rows are kept out of everything else semantic
memory does (recall, listing, forgetting curve, promotion, near-duplicate merging, the semantic
layer of the data lifecycle): ``visibility_q`` and the jobs leave the type out, and the store's own
lifecycle layer removes a row with its item. The store therefore imports semantic memory and the
episodic log (where its changes are recorded) and nothing imports it but the app's registries,
the API and compliance: it sits with consolidation and context assembly in the import contract.

Sharing: the store is tenant-wide, like the blackboard is execution-wide: every agent of the
tenant with the ``read`` scope reads every item, and with ``write`` puts and deletes any; the item
remembers who created it and who changed it last. Namespaces are how a graph separates what it
keeps (``("memories", user_id)``). Another tenant's store is another schema.
"""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from django.utils import timezone

# LangGraph gives no bounds; these keep an index entry of (namespace, key) well under PostgreSQL's
# B-tree limit (a third of a page, ~2.7 kB)
MAX_LABEL_LENGTH = 200
MAX_NAMESPACE_DEPTH = 10
MAX_KEY_LENGTH = 500
# LangGraph's own root label: ``BaseStore.put`` refuses a namespace starting with it
RESERVED_ROOT = "langgraph"


class StoreItem(models.Model):
    """One item: ``value`` (a JSON object) under ``key`` in ``namespace`` (1 to
    ``MAX_NAMESPACE_DEPTH`` labels, none empty nor holding "."), unique per tenant.

    ``index_paths``: the JSON paths of ``value`` whose text is indexed (``["$"]``: the whole
    document; empty: not indexed), the text and vector living in ``memory`` (a ``SemanticMemory``
    of type ``store``, None when nothing is indexed). ``ttl_minutes``: LangGraph's TTL, the item
    expiring ``ttl_minutes`` after its last write or refreshing read (``expires_at``); reads leave
    expired items out and the sweep deletes them. ``data_subject``: the person the item is about
    (erasure and legal holds target it). ``created_at`` / ``updated_at`` are UTC.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    namespace = ArrayField(models.CharField(max_length=MAX_LABEL_LENGTH))
    key = models.CharField(max_length=MAX_KEY_LENGTH)
    value = models.JSONField()
    index_paths = ArrayField(models.TextField(), default=list, blank=True)
    memory = models.OneToOneField(
        "memory.SemanticMemory", on_delete=models.PROTECT, null=True, blank=True, related_name="store_item"
    )
    data_subject = models.CharField(
        max_length=200, blank=True, default="", help_text="the person it is about"
    )
    created_by = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="+")
    updated_by = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    ttl_minutes = models.FloatField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "store item"
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(fields=["namespace", "key"], name="store_item_namespace_key_uniq"),
            models.CheckConstraint(
                condition=Q(ttl_minutes__isnull=True) | Q(ttl_minutes__gt=0), name="store_item_ttl_positive"
            ),
        ]
        indexes = [
            # namespace prefixes and listings: ``namespace @> prefix`` narrows through it
            GinIndex(fields=["namespace"], name="store_item_namespace_gin"),
            models.Index(fields=["updated_at"], name="store_item_updated_idx"),
            models.Index(
                fields=["expires_at"], condition=Q(expires_at__isnull=False), name="store_item_expiry_idx"
            ),
            models.Index(
                fields=["data_subject"], condition=~Q(data_subject=""), name="store_item_subject_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{'.'.join(self.namespace)} / {self.key}"
