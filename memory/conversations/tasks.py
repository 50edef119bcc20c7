"""Celery tasks of conversations (per tenant: the schema comes from the message headers)."""

from __future__ import annotations

from celery import shared_task

from core.tasks import TenantTask

from .models import ExtractionJob
from .services import extraction_run


@shared_task(base=TenantTask, requires_tenant=True, ignore_result=True)
def extract(job_id: str) -> str:
    """Run the extraction job ``job_id`` (``services.extraction_run``); returns its status, or
    ``"missing"`` for a job erased before it ran."""
    try:
        return str(extraction_run(job_id=job_id).status)
    except ExtractionJob.DoesNotExist:
        return "missing"
