"""Tenant tasks in a real Celery worker, and the one fan-out of per-tenant work."""

from __future__ import annotations

from django.db import connection
from django.utils import timezone
from django_tenants.utils import tenant_context

from agents.models import Agent
from agents.services import agent_create
from memory.episodic.services import EventData, events_append
from memory.episodic.tasks import verify_chain
from tests.factories import behind_the_triggers


def test_verify_chain_task_runs_in_a_real_worker(celery_worker, scratch_tenant) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(scratch_tenant):
        agent = Agent.objects.first() or agent_create(by=None, name="worker-test")
        events_append(
            agent=agent,
            events=[
                EventData(session_id="s", kind="message", content=f"turn {i}", occurred_at=timezone.now())
                for i in range(3)
            ],
        )
    with tenant_context(scratch_tenant):  # the task takes its tenant from the message headers
        result = verify_chain.delay().get(timeout=90)
    assert result == {
        "tenant": scratch_tenant.schema_name,
        "ok": True,
        "checked": 3,
        "broken_seq": None,
        "reason": "",
    }

    with tenant_context(scratch_tenant), behind_the_triggers() as cursor:
        cursor.execute("UPDATE memory_event SET content = 'forged' WHERE seq = 2")
    with tenant_context(scratch_tenant):
        result = verify_chain.delay().get(timeout=90)
    assert result["ok"] is False and result["broken_seq"] == 2


def test_per_tenant_work_is_queued_once_per_tenant_by_one_fan_out(scratch_tenant) -> None:  # type: ignore[no-untyped-def]
    from core.tasks import each_tenant, for_each_tenant, tenant_schemas
    from memory.episodic.tasks import verify_chain

    schemas = tenant_schemas()
    assert "public" not in schemas and {"alpha", "beta", scratch_tenant.schema_name} <= set(schemas)
    assert (
        for_each_tenant(verify_chain, when=lambda: connection.schema_name == scratch_tenant.schema_name) == 1
    )
    assert each_tenant.apply(args=["memory.episodic.tasks.verify_chain"]).result == len(schemas)


def test_a_moving_tenants_tasks_wait_for_the_move(celery_worker, scratch_tenant, django_db_blocker) -> None:  # type: ignore[no-untyped-def]
    """While a tenant's schema is copied to another server (decision 0071) its tasks do not run
    (they would write into the copy's source); once the move ends they do."""
    import pytest
    from celery.exceptions import TimeoutError as CeleryTimeout

    from tenants.services import tenant_move_mark

    with django_db_blocker.unblock():
        tenant_move_mark(tenant=scratch_tenant, moving=True)
        try:
            with tenant_context(scratch_tenant):
                pending = verify_chain.delay()
            with pytest.raises(CeleryTimeout):
                pending.get(timeout=8)
        finally:
            tenant_move_mark(tenant=scratch_tenant, moving=False)
        assert pending.get(timeout=90)["ok"] is True
