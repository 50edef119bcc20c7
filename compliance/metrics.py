"""``/metrics`` for what an operator watches per tenant: the trail's checks and anchors, the graph
outbox and the erasures waiting, read from PostgreSQL at scrape time (two small indexed queries per
tenant), so every web process reports the same numbers whichever process did the work.

- ``engram_chain_check_last_success_timestamp_seconds{tenant}``: when the latest intact check of
  the episodic chain finished (Unix time; no sample before the first).
- ``engram_chain_check_last_broken{tenant}``: 1 when the latest finished check found the chain
  broken or could not run, else 0.
- ``engram_anchor_last_timestamp_seconds{tenant}``: when the chain head was last anchored (signed);
  ``engram_chain_unanchored_events{tenant}``: events appended since (anchors are made only when the
  head moved, so an idle tenant's last anchor ages harmlessly: alert on both together).
- ``engram_graph_outbox_pending{tenant}`` and ``engram_graph_outbox_lag_seconds{tenant}``: facts
  waiting for their Neo4j projection, and the age of the oldest (0 when none wait).
- ``engram_erasures_waiting{tenant, status}``: erasure requests ``requested`` (awaiting a second
  person's approval), ``approved`` (queued) or ``running``; ``engram_erasure_oldest_waiting_timestamp_seconds
  {tenant}``: when the oldest of them was requested.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from django.db import connection
from django_tenants.utils import schema_context
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from core.tasks import tenant_schemas

logger = logging.getLogger(__name__)

_STATE_SQL = """
SELECT
  (SELECT extract(epoch FROM max(finished_at)) FROM compliance_chaincheck WHERE status = 'intact'),
  (SELECT status IN ('broken', 'failed') FROM compliance_chaincheck
     WHERE status IN ('intact', 'broken', 'failed') ORDER BY finished_at DESC NULLS LAST, id DESC LIMIT 1),
  (SELECT extract(epoch FROM anchored_at) FROM compliance_anchor ORDER BY seq DESC, id DESC LIMIT 1),
  (SELECT last_seq FROM memory_chainhead WHERE id = 1) - coalesce((SELECT max(seq) FROM compliance_anchor), 0),
  (SELECT count(*) FROM memory_graphoutbox WHERE processed_at IS NULL),
  (SELECT extract(epoch FROM clock_timestamp() - min(created_at)) FROM memory_graphoutbox
     WHERE processed_at IS NULL)
"""
_ERASURES_SQL = """
SELECT status, count(*), extract(epoch FROM min(requested_at)) FROM compliance_erasurerequest
WHERE status IN ('requested', 'approved', 'running') GROUP BY status
"""
WAITING = ("requested", "approved", "running")


def _families() -> dict[str, GaugeMetricFamily]:
    tenant = ["tenant"]
    families = [
        GaugeMetricFamily(
            "engram_chain_check_last_success_timestamp_seconds",
            "When the latest intact check of the episodic chain finished (Unix time).",
            labels=tenant,
        ),
        GaugeMetricFamily(
            "engram_chain_check_last_broken",
            "1 when the latest finished chain check found the chain broken or failed to run.",
            labels=tenant,
        ),
        GaugeMetricFamily(
            "engram_anchor_last_timestamp_seconds",
            "When the chain head was last anchored (Unix time).",
            labels=tenant,
        ),
        GaugeMetricFamily(
            "engram_chain_unanchored_events",
            "Events appended to the chain after its last anchor (the whole chain before the first).",
            labels=tenant,
        ),
        GaugeMetricFamily(
            "engram_graph_outbox_pending", "Facts waiting for their Neo4j projection.", labels=tenant
        ),
        GaugeMetricFamily(
            "engram_graph_outbox_lag_seconds",
            "Age of the oldest fact waiting for its Neo4j projection (0 when none waits).",
            labels=tenant,
        ),
        GaugeMetricFamily(
            "engram_erasures_waiting",
            "Erasure requests not yet done, by status (requested, approved, running).",
            labels=["tenant", "status"],
        ),
        GaugeMetricFamily(
            "engram_erasure_oldest_waiting_timestamp_seconds",
            "When the oldest erasure request not yet done was made (Unix time).",
            labels=tenant,
        ),
    ]
    return {f.name: f for f in families}


def _tenant_samples(schema: str, families: dict[str, GaugeMetricFamily]) -> None:
    with schema_context(schema), connection.cursor() as cursor:
        cursor.execute(_STATE_SQL)
        checked, broken, anchored, unanchored, pending, lag = cursor.fetchone()
        cursor.execute(_ERASURES_SQL)
        erasures = cursor.fetchall()
    if checked is not None:
        families["engram_chain_check_last_success_timestamp_seconds"].add_metric([schema], float(checked))
    if broken is not None:
        families["engram_chain_check_last_broken"].add_metric([schema], 1.0 if broken else 0.0)
    if anchored is not None:
        families["engram_anchor_last_timestamp_seconds"].add_metric([schema], float(anchored))
    families["engram_chain_unanchored_events"].add_metric([schema], float(max(unanchored or 0, 0)))
    families["engram_graph_outbox_pending"].add_metric([schema], float(pending))
    families["engram_graph_outbox_lag_seconds"].add_metric([schema], float(lag or 0.0))
    counts = {status: count for status, count, _ in erasures}
    for status in WAITING:
        families["engram_erasures_waiting"].add_metric([schema, status], float(counts.get(status, 0)))
    oldest = [float(first) for _, _, first in erasures if first is not None]
    if oldest:
        families["engram_erasure_oldest_waiting_timestamp_seconds"].add_metric([schema], min(oldest))


class OperationsCollector(Collector):
    """The gauges of the module docstring, for every tenant."""

    def describe(self) -> Iterator[Metric]:
        """The families without samples (registering queries nothing)."""
        yield from _families().values()

    def collect(self) -> Iterator[Metric]:
        families = _families()
        try:
            for schema in tenant_schemas():
                _tenant_samples(schema, families)
        except Exception:  # a scrape must not fail for this: the other metrics still answer
            logger.exception("the operations metrics could not be read")
        yield from families.values()
