"""Compliance's Celery tasks (per tenant: the schema comes from the message headers; thin, given ids)."""

from __future__ import annotations

from celery import shared_task

from core.tasks import TenantTask

from . import services


@shared_task(base=TenantTask, requires_tenant=True)
def chain_check(check_id: int) -> str:
    """Run the queued chain check ``check_id``; returns its status."""
    return services.chain_check_run(check_id=check_id).status


@shared_task(base=TenantTask, requires_tenant=True)
def chain_check_nightly() -> str:
    """The nightly verification of the tenant's trail (queued for every tenant by Celery beat)."""
    check = services.chain_check_request(requested_by="job:nightly-verify")
    return services.chain_check_run(check_id=check.pk).status


@shared_task(base=TenantTask, requires_tenant=True)
def anchor_head() -> int | None:
    """Sign the tenant's chain head if it moved since the last anchor; returns the anchored seq."""
    anchor = services.anchor_head()
    return None if anchor is None else anchor.seq


@shared_task(base=TenantTask, requires_tenant=True)
def export_run(export_id: str) -> str:
    """Write the archive of the queued export ``export_id``; returns its status."""
    return services.export_run(export_id=export_id).status
