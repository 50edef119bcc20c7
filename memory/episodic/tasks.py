"""Background checks of the episodic log."""

from __future__ import annotations

import logging

from celery import shared_task
from django_tenants.utils import get_tenant_model, tenant_context

from core.tasks import TenantTask
from memory.episodic.selectors import chain_verify

logger = logging.getLogger(__name__)


@shared_task(base=TenantTask)
def verify_chain(tenant_id: int) -> dict[str, object]:
    """Verify one tenant's hash chain; logs an error on a broken link. Returns the report as a dict."""
    tenant = get_tenant_model().objects.get(pk=tenant_id)
    with tenant_context(tenant):
        report = chain_verify()
    if not report.ok:
        logger.error(
            "episodic chain of tenant %s broken at #%s: %s",
            tenant.schema_name,
            report.broken_seq,
            report.reason,
        )
    return {
        "tenant": tenant.schema_name,
        "ok": report.ok,
        "checked": report.checked,
        "broken_seq": report.broken_seq,
        "reason": report.reason,
    }


@shared_task(base=TenantTask)
def verify_chains_all() -> int:
    """Queue ``verify_chain`` for every tenant (nightly, from Celery beat)."""
    tenants = get_tenant_model().objects.exclude(schema_name="public").values_list("pk", flat=True)
    for tenant_id in tenants:
        verify_chain.delay(tenant_id)
    return len(tenants)
