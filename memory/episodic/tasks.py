"""Background checks of the episodic log (per tenant; the schema comes from the task's headers)."""

from __future__ import annotations

import logging

from celery import shared_task

from core.tasks import TenantTask
from core.tenancy import current_schema
from memory.episodic.selectors import chain_verify

logger = logging.getLogger(__name__)


@shared_task(base=TenantTask, requires_tenant=True)
def verify_chain() -> dict[str, object]:
    """Verify the tenant's hash chain; logs an error on a broken link. Returns the report as a dict
    (nightly for every tenant through ``core.tasks.each_tenant``)."""
    report = chain_verify()
    if not report.ok:
        logger.error(
            "episodic chain of tenant %s broken at #%s: %s",
            current_schema(),
            report.broken_seq,
            report.reason,
        )
    return {
        "tenant": current_schema(),
        "ok": report.ok,
        "checked": report.checked,
        "broken_seq": report.broken_seq,
        "reason": report.reason,
    }
