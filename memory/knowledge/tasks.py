"""Celery task that drains the knowledge outbox into Neo4j (thin: takes the tenant id)."""

from __future__ import annotations

from celery import shared_task
from django_tenants.utils import get_tenant_model, tenant_context

from .projection import outbox_drain


@shared_task(autoretry_for=(Exception,), retry_backoff=True, max_retries=8)
def project_facts(tenant_id: int) -> int:
    """Project the tenant's pending fact changes into Neo4j; returns how many were processed."""
    tenant = get_tenant_model().objects.get(pk=tenant_id)
    with tenant_context(tenant):
        return outbox_drain()
