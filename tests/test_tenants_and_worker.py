"""Tenant provisioning, and the Celery worker running tenant-aware tasks for real."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from django_tenants.utils import tenant_context

from agents.models import Agent
from agents.services import agent_create
from memory.episodic.services import EventData, events_append
from memory.episodic.tasks import verify_chain
from tenants.models import Tenant

BASE_DIR = Path(__file__).resolve().parent.parent


def test_create_tenant_command_is_idempotent(django_db_setup, django_db_blocker) -> None:  # type: ignore[no-untyped-def]
    with django_db_blocker.unblock():
        try:
            out = io.StringIO()
            call_command("create_tenant", "gamma", "--domain", "gamma.localhost", stdout=out)
            call_command("create_tenant", "gamma", "--domain", "gamma.localhost", stdout=out)
            assert out.getvalue().splitlines() == ["tenant gamma: created", "tenant gamma: already exists"]
            tenant = Tenant.objects.get(schema_name="gamma")
            assert list(tenant.domains.values_list("domain", flat=True)) == ["gamma.localhost"]
            assert tenant.retrieval_policy.near_duplicate_threshold == 0.97
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
                )
                assert cursor.fetchone() == ("public",)
        finally:
            connection.set_schema_to_public()
            Tenant.objects.filter(schema_name="gamma").first().delete(force_drop=True)


@pytest.mark.parametrize("slug", ["public", "Bad-Slug", "1abc", ""])
def test_bad_tenant_slugs_are_refused(db, slug: str) -> None:  # type: ignore[no-untyped-def]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("create_tenant", slug, stdout=io.StringIO())


def test_verify_chain_task_runs_in_a_real_worker(celery_worker, scratch_tenant) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(scratch_tenant):
        agent = Agent.objects.first() or agent_create(name="worker-test")
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

    with tenant_context(scratch_tenant), connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        cursor.execute("UPDATE memory_event SET content = 'forged' WHERE seq = 2")
        cursor.execute("SET session_replication_role = origin")
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
