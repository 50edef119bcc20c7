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
def chain_check_scheduled() -> str | None:
    """The frequent incremental verification of the tenant's trail (queued for every tenant by
    Celery beat every ``ENGRAM_CHAIN_CHECK_SECONDS``); returns its status, or None when another
    check was still running."""
    check = services.chain_check_scheduled()
    return None if check is None else check.status


@shared_task(base=TenantTask, requires_tenant=True)
def anchor_head() -> int | None:
    """Sign the tenant's chain head if it moved since the last anchor; returns the anchored seq."""
    anchor = services.anchor_head()
    return None if anchor is None else anchor.seq


@shared_task(base=TenantTask, requires_tenant=True)
def export_run(export_id: str) -> str:
    """Write the archive of the queued export ``export_id``; returns its status."""
    return services.export_run(export_id=export_id).status


@shared_task(base=TenantTask, requires_tenant=True)
def retention_daily() -> dict[str, int]:
    """Apply the tenant's retention rules (queued for every tenant by Celery beat): resumes an
    interrupted run, else starts one; returns what it removed per layer."""
    run = services.retention_run_start(requested_by=f"job:{services.RETENTION_JOB}")
    return services.retention_run(run_id=run.pk).removed


@shared_task(base=TenantTask, requires_tenant=True)
def retention_apply(run_id: int) -> str:
    """Apply the retention rules for the run ``run_id`` (started from the admin); returns its status."""
    return services.retention_run(run_id=run_id).status


@shared_task(base=TenantTask, requires_tenant=True)
def erasure_run(request_id: str) -> str:
    """Execute the approved erasure ``request_id`` (resumes one that was interrupted); returns its
    status."""
    return services.erasure_run(request_id=request_id).status
