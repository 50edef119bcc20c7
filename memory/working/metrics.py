"""Hit/miss counters per tenant, agent and layer, exported in Prometheus text format.

Layers: ``blackboard``, ``scratchpad``, ``window`` (a read finds data: hit; finds nothing: miss) and
``checkpoint`` (restore served from Redis: hit; from PostgreSQL: miss). Counts are per process, as
usual with prometheus_client; a multi-process server sets ``PROMETHEUS_MULTIPROC_DIR``.
"""

from __future__ import annotations

from typing import Literal

from django.db import connection
from prometheus_client import Counter

Layer = Literal["blackboard", "scratchpad", "window", "checkpoint"]

LOOKUPS = Counter(
    "engram_working_memory_lookups",
    "Reads of working memory and checkpoint restores, by outcome (hit: found in Redis; miss: not found "
    "or served from PostgreSQL).",
    ["tenant", "agent", "layer", "result"],
)


def record_lookup(*, agent: str, layer: Layer, hit: bool) -> None:
    """Count one read of ``layer`` by ``agent`` in the current tenant."""
    LOOKUPS.labels(connection.schema_name, agent, layer, "hit" if hit else "miss").inc()


def tenant_samples(schema_name: str) -> list[dict[str, object]]:
    """The counters of one tenant as rows ``{agent, layer, result, count}``, for the admin page."""
    rows = []
    for metric in LOOKUPS.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.labels.get("tenant") == schema_name:
                rows.append(
                    {**{k: v for k, v in sample.labels.items() if k != "tenant"}, "count": int(sample.value)}
                )
    return sorted(rows, key=lambda r: (r["agent"], r["layer"], r["result"]))
