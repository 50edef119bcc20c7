"""Engram's Prometheus counters, ``/metrics`` in Prometheus text format, and the tenant admin's page
of working-memory counters.

Lookup counters: ``blackboard``, ``scratchpad``, ``window`` (a read finds data: hit; finds nothing:
miss) and ``checkpoint`` (restore served from Redis: hit; from PostgreSQL: miss). Counts are per
process, as usual with prometheus_client; a multi-process server sets ``PROMETHEUS_MULTIPROC_DIR``.

``/metrics`` shows every tenant's counters, labelled with the tenant's schema and its agents'
names, so it is not public: with ``ENGRAM["METRICS_TOKEN"]`` set (env ``ENGRAM_METRICS_TOKEN`` or
``ENGRAM_METRICS_TOKEN_FILE``; ``./engram up`` makes one) every scraper, loopback included, must
send ``Authorization: Bearer <token>``. Without a token, loopback clients (``127.0.0.0/8``, ``::1``)
may read it where ``ENGRAM["METRICS_LOOPBACK"]`` allows (tests, a bare development server; never in
production settings): behind a reverse proxy on the same host every client looks local. Anything
else gets 403.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
from collections import defaultdict
from typing import Any, Literal, cast

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from core.tenancy import current_schema

logger = logging.getLogger(__name__)

Layer = Literal["blackboard", "scratchpad", "window", "checkpoint"]

LOOKUPS = Counter(
    "engram_working_memory_lookups",
    "Reads of working memory and checkpoint restores, by outcome (hit: found in Redis; miss: not found "
    "or served from PostgreSQL).",
    ["tenant", "agent", "layer", "result"],
)


CONTEXT_TOKENS = Counter(
    "engram_context_tokens",
    "Tokens of assembled contexts (kind=used) against what sending the session's whole history "
    "would have cost on the same calls (kind=full_history): the saving of context assembly.",
    ["tenant", "kind"],
)
CONTEXT_BUILDS = Counter(
    "engram_context_builds", "Contexts assembled (POST /api/v1/context, MCP).", ["tenant"]
)


def record_context(*, used: int, full_history: int) -> None:
    """Count one assembled context of ``used`` tokens whose session history held ``full_history``."""
    schema = current_schema()
    CONTEXT_BUILDS.labels(schema).inc()
    CONTEXT_TOKENS.labels(schema, "used").inc(used)
    CONTEXT_TOKENS.labels(schema, "full_history").inc(full_history)


# LOOKUPS' children by labels: prometheus_client's ``labels()`` checks and joins the values under a
# lock on every call (~5 µs, as much as the rest of a checkpoint's Redis hit in Python); a child,
# once made, stays the metric's child (nothing here removes one), so it is looked up once
_lookup_children: dict[tuple[str, str, str, bool], Any] = {}


def record_lookup(*, agent: str, layer: Layer, hit: bool) -> None:
    """Count one read of ``layer`` by ``agent`` in the current tenant."""
    labels = (current_schema(), agent, layer, hit)
    child = _lookup_children.get(labels)
    if child is None:
        child = _lookup_children[labels] = LOOKUPS.labels(labels[0], agent, layer, "hit" if hit else "miss")
    child.inc()


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


def _is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1 from a dual-stack socket
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def metrics_allowed(request: HttpRequest) -> bool:
    """True for the configured bearer token or, when no token is configured and
    ``ENGRAM["METRICS_LOOPBACK"]`` allows it, a loopback client."""
    token = settings.ENGRAM.get("METRICS_TOKEN") or ""
    if token:
        scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token.encode())
    return bool(settings.ENGRAM.get("METRICS_LOOPBACK", False)) and _is_loopback(
        request.META.get("REMOTE_ADDR", "")
    )


@require_safe
def prometheus_metrics(request: HttpRequest) -> HttpResponse:
    """GET ``/metrics``: every collector of this process (or, with ``PROMETHEUS_MULTIPROC_DIR``, of all
    worker processes) in the Prometheus text exposition format 0.0.4. 403 when not allowed.
    """
    if not metrics_allowed(request):
        return HttpResponse(
            "Forbidden: send the metrics bearer token, or scrape from this host.\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        for collector in _scrape_collectors:  # they read shared stores, not this process's counters
            registry.register(collector)
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


_scrape_collectors: list[Collector] = []


def scrape_collector_register(collector: Collector) -> None:
    """Serve ``collector`` on ``/metrics`` (once per type, whatever ``ready()`` runs twice): a
    collector that reads a shared store at scrape time (PostgreSQL, Redis), so every web process
    reports the same numbers and, with ``PROMETHEUS_MULTIPROC_DIR``, it joins the per-process
    counters, which the multiprocess registry alone would not show."""
    if any(type(c) is type(collector) for c in _scrape_collectors):
        return
    _scrape_collectors.append(collector)
    REGISTRY.register(collector)


class CeleryQueueCollector(Collector):
    """``engram_celery_queue_length{queue}``: tasks waiting in the broker (Redis) per queue, read at
    scrape time (``LLEN`` of the queue's lists: kombu keeps one per priority step). No sample when
    the broker does not answer within half a second (the scrape still answers)."""

    def describe(self) -> list[Metric]:
        return [self._family()]

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "engram_celery_queue_length", "Tasks waiting in the broker, by queue.", labels=["queue"]
        )

    def collect(self) -> list[Metric]:
        import redis
        from celery import current_app

        family = self._family()
        conf = current_app.conf
        prefix = (conf.broker_transport_options or {}).get("global_keyprefix", "")
        steps = (conf.broker_transport_options or {}).get("priority_steps", [0, 3, 6, 9])
        queues = {conf.task_default_queue}  # every task goes there: no task_routes
        try:
            client = redis.Redis.from_url(conf.broker_url, socket_timeout=0.5, socket_connect_timeout=0.5)
            try:
                for queue in sorted(queues):
                    # kombu's names: the queue itself for priority 0, "<queue>\x06\x16<n>" for the others
                    keys = [f"{prefix}{queue}"] + [f"{prefix}{queue}\x06\x16{n}" for n in steps if n]
                    pipe = client.pipeline(transaction=False)
                    for key in keys:
                        pipe.llen(key)
                    family.add_metric([queue], float(sum(pipe.execute())))
            finally:
                client.close()
        except (redis.RedisError, OSError) as exc:
            logger.warning("the Celery queue length could not be read: %s", exc)
        return [family]


def metric_rows(schema_name: str) -> list[dict[str, object]]:
    """The tenant's lookup counters as one row per (agent, layer): ``hits``, ``misses``, ``total``,
    ``hit_ratio`` (0-1, ``None`` without lookups), sorted by agent then layer.
    """
    table: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: {"hit": 0, "miss": 0})
    for sample in tenant_samples(schema_name):
        counts = table[(str(sample["agent"]), str(sample["layer"]))]
        counts[str(sample["result"])] += cast(int, sample["count"])
    rows: list[dict[str, object]] = []
    for (agent, layer), counts in sorted(table.items()):
        total = counts["hit"] + counts["miss"]
        rows.append(
            {
                "agent": agent,
                "layer": layer,
                "hits": counts["hit"],
                "misses": counts["miss"],
                "total": total,
                "hit_ratio": counts["hit"] / total if total else None,
            }
        )
    return rows


# the page lists the tenant's agents with their counters: whoever may look at the agents may look
# at it (templates/admin/index.html shows the link on the same condition)
METRICS_PERMISSION = "agents.view_agent"


@require_safe
def tenant_metrics_admin(request: HttpRequest) -> TemplateResponse:
    """The admin page of the current tenant's hit/miss counters (wrap in ``admin.site.admin_view``,
    which checks login and staff status). GET only; 403 without ``METRICS_PERMISSION``."""
    if not request.user.has_perm(METRICS_PERMISSION):
        raise PermissionDenied
    context = {
        **admin.site.each_context(request),
        "title": "Working-memory metrics",
        "rows": metric_rows(current_schema()),
        "schema_name": current_schema(),
        "pid": os.getpid(),
    }
    return TemplateResponse(request, "admin/engram/metrics.html", context)
