"""The data lifecycle's map of the stores: how each layer finds the rows of a target (a data
subject, a session, an agent, a tag, an entity), how long it keeps them and from when, and how it
removes them. Retention, legal holds and erasure all read this one table (``LAYERS``, in
``layers``): a new layer (procedural skills, say) takes part in all three by adding its ``Layer``
there. What a legal hold keeps is ``unheld`` (``holds``), which every hard delete asks (the layers
through ``core.holds``).

``STORES`` (``stores``) is the wider map: every place the tenant's data lives (the layers' tables
and those removed with them, the replay cache, export archives, Redis's copies and files, task
results, the planner's statistics, and what no erasure reaches at once), each with its erasure and
its check in the verification pass (``checks``); every model of the project is in a store or in
``NO_PERSONAL_DATA``.

Also here: retention's rules in effect (``retention``), the erasure's steps over the layers
(``erasure``), the cleanup of what PostgreSQL keeps of removed rows (``cleanup``), the
verification pass and the receipt it signs (``stores``). ``compliance.services`` runs them and
records them in the trail. This package re-exports the names callers use.
"""

from __future__ import annotations

from .checks import Counts, Target
from .cleanup import gin_indexes, gin_rebuild, statistics_forget, statistics_naming, touched_tables, vacuum
from .erasure import (
    ERASE_ROUND,
    WORKING_MEMORY_RECORDS,
    entity_ids_of,
    erase_candidates,
    erase_entity_rows,
    erase_q,
    erase_rows,
    erase_working_memory,
    erase_working_memory_records,
    keyed_digest,
    target_value_find,
    value_digest,
)
from .holds import active_holds, held_q, holds_meeting, tenant_holds, unheld
from .layers import (
    AGENT_TYPES,
    DAY,
    LAYER_NAMES,
    LAYERS,
    SEMANTIC_DAYS,
    Layer,
    Removed,
    layer_get,
    normalise_value,
    stored_layers,
    target_q,
)
from .retention import RuleInEffect, retention_candidates, retention_preview, rules_in_effect
from .stores import NO_PERSONAL_DATA, STORES, Store, receipt_bytes, verification_clean, verification_pass

__all__ = [
    "AGENT_TYPES",
    "DAY",
    "ERASE_ROUND",
    "LAYERS",
    "LAYER_NAMES",
    "NO_PERSONAL_DATA",
    "SEMANTIC_DAYS",
    "STORES",
    "WORKING_MEMORY_RECORDS",
    "Counts",
    "Layer",
    "Removed",
    "RuleInEffect",
    "Store",
    "Target",
    "active_holds",
    "entity_ids_of",
    "erase_candidates",
    "erase_entity_rows",
    "erase_q",
    "erase_rows",
    "erase_working_memory",
    "erase_working_memory_records",
    "gin_indexes",
    "gin_rebuild",
    "held_q",
    "holds_meeting",
    "keyed_digest",
    "layer_get",
    "normalise_value",
    "receipt_bytes",
    "retention_candidates",
    "retention_preview",
    "rules_in_effect",
    "statistics_forget",
    "statistics_naming",
    "stored_layers",
    "target_q",
    "target_value_find",
    "tenant_holds",
    "touched_tables",
    "unheld",
    "vacuum",
    "value_digest",
    "verification_clean",
    "verification_pass",
]
