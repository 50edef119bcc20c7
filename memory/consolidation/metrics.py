"""``/metrics`` for consolidation: runs and their counts per tenant, read from the runs table.

The jobs run in Celery workers, whose in-process counters a web process cannot see; the runs are
kept in PostgreSQL (the system of record), so this collector reads them at scrape time (one small
aggregate query per tenant) and every web process reports the same numbers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from django.db import connection
from django_tenants.utils import schema_context
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from core.tasks import tenant_schemas

logger = logging.getLogger(__name__)

_RUNS_SQL = """
SELECT job, status, count(*), max(extract(epoch FROM started_at)),
       max(extract(epoch FROM finished_at - started_at)) FILTER (WHERE status <> 'running')
FROM memory_consolidationrun GROUP BY job, status
"""
_COUNTS_SQL = """
SELECT r.job, c.key, sum(c.value::numeric) FROM memory_consolidationrun r, jsonb_each_text(r.counts) c
GROUP BY r.job, c.key
"""


Families = tuple[CounterMetricFamily, CounterMetricFamily, GaugeMetricFamily, GaugeMetricFamily]


def _families() -> Families:
    return (
        CounterMetricFamily(
            "engram_consolidation_runs", "Consolidation runs, by outcome.", labels=["tenant", "job", "status"]
        ),
        CounterMetricFamily(
            "engram_consolidation_items",
            "What consolidation runs counted (examined, archived, created, skipped_no_hint, nodes, ...).",
            labels=["tenant", "job", "count"],
        ),
        GaugeMetricFamily(
            "engram_consolidation_last_run_timestamp_seconds",
            "When the latest run of a job started (Unix time).",
            labels=["tenant", "job"],
        ),
        GaugeMetricFamily(
            "engram_consolidation_longest_run_seconds",
            "The longest finished run of a job.",
            labels=["tenant", "job"],
        ),
    )


class ConsolidationCollector(Collector):
    """``engram_consolidation_runs_total{tenant, job, status}``, ``engram_consolidation_items_total
    {tenant, job, count}`` (sums of the runs' counts: archived, created, ...),
    ``engram_consolidation_last_run_timestamp_seconds{tenant, job}`` and
    ``engram_consolidation_longest_run_seconds{tenant, job}``."""

    def describe(self) -> Iterator[Metric]:
        """The families without samples (``REGISTRY.register`` calls this instead of ``collect``, so
        registering queries nothing)."""
        yield from _families()

    def collect(self) -> Iterator[Metric]:
        runs, items, last, longest = _families()
        try:
            for schema in tenant_schemas():
                with schema_context(schema), connection.cursor() as cursor:
                    cursor.execute(_RUNS_SQL)
                    latest: dict[str, float] = {}
                    slowest: dict[str, float] = {}
                    for job, status, count, started, took in cursor.fetchall():
                        runs.add_metric([schema, job, status], count)
                        latest[job] = max(latest.get(job, 0.0), float(started))
                        if took is not None:
                            slowest[job] = max(slowest.get(job, 0.0), float(took))
                    for job, value in latest.items():
                        last.add_metric([schema, job], value)
                    for job, value in slowest.items():
                        longest.add_metric([schema, job], value)
                    cursor.execute(_COUNTS_SQL)
                    for job, key, total in cursor.fetchall():
                        items.add_metric([schema, job, key], float(total))
        except Exception:  # a scrape must not fail for this: the other metrics still answer
            logger.exception("consolidation metrics could not be read")
        yield from (runs, items, last, longest)
