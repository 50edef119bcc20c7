"""A task for the tenant-role proof (tests/core/test_tenant_roles.py), loaded by the test worker
(``celery worker --include``): it runs raw SQL naming another tenant's schema from inside a task."""

from __future__ import annotations

from celery import shared_task

from core.tasks import TenantTask
from tests.core.role_probe import probe_sql


@shared_task(base=TenantTask, requires_tenant=True)
def cross_schema_probe(other_schema: str) -> dict[str, object]:
    """What a task of the current tenant sees: its role, and what naming ``other_schema`` gives."""
    return probe_sql(other_schema)
