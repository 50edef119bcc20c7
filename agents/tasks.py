"""Periodic upkeep for API state. Tasks are thin: they take ids and call services."""

from __future__ import annotations

from celery import shared_task
from django_tenants.utils import get_tenant_model, tenant_context

from core.tasks import TenantTask

from .services import idempotency_records_purge


@shared_task(base=TenantTask)
def purge_expired_idempotency_keys(tenant_id: int) -> int:
    """Delete idempotency records past their TTL in one tenant; returns the number deleted."""
    tenant = get_tenant_model().objects.get(pk=tenant_id)
    with tenant_context(tenant):
        return idempotency_records_purge()


@shared_task(base=TenantTask)
def purge_expired_idempotency_keys_all() -> int:
    """Queue ``purge_expired_idempotency_keys`` for every tenant; returns how many were queued."""
    tenants = get_tenant_model().objects.exclude(schema_name="public").values_list("pk", flat=True)
    for tenant_id in tenants:
        purge_expired_idempotency_keys.delay(tenant_id)
    return len(tenants)
