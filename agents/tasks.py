"""Periodic upkeep for API state, per tenant (the schema comes from the task's headers)."""

from __future__ import annotations

from celery import shared_task

from core.tasks import TenantTask

from .services import idempotency_records_purge


@shared_task(base=TenantTask, requires_tenant=True, ignore_result=True)
def purge_expired_idempotency_keys() -> int:
    """Delete the tenant's idempotency records past their TTL; returns the number deleted (hourly for
    every tenant through ``core.tasks.each_tenant``)."""
    return idempotency_records_purge()
