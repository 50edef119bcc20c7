"""Background work of the item store: deleting the items whose TTL ran out."""

from __future__ import annotations

from celery import shared_task

from core.tasks import TenantTask

from .services import items_expire


@shared_task(base=TenantTask, requires_tenant=True, ignore_result=True)
def expire_items() -> int:
    """Delete the tenant's items past their TTL (``items_expire``, recorded); returns how many.
    Queued for every tenant by beat (``ENGRAM_STORE_SWEEP_SECONDS``, through
    ``core.tasks.each_tenant``); reads leave expired items out meanwhile."""
    return items_expire()
