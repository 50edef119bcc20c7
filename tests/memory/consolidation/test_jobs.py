"""The jobs in real workers: scheduled per tenant by beat, resumed after a worker process is killed
mid-run, each run counted in /metrics."""

from __future__ import annotations

import signal
import time
import uuid
from datetime import UTC, datetime, timedelta

import psutil
from django.db import connection
from django.test import Client
from django_tenants.utils import tenant_context
from kombu import Connection

from agents.services import agent_create
from memory.consolidation.models import ConsolidationRun, Job, RunStatus
from memory.consolidation.services.schedule import consolidate as consolidate_pass
from memory.consolidation.tasks import consolidate
from memory.episodic.models import Event
from memory.semantic.models import SemanticMemory
from memory.semantic.selectors import consolidation_policy
from tenants.models import Tenant
from tests.factories import Caller
from tests.memory.knowledge.test_background_work import CONVERGENCE_BOUND, own_broker, wait_until, worker

CLOCK = datetime(2027, 6, 1, 12, 0, tzinfo=UTC)
ROWS = 20_000


def stale_memories(tenant: Tenant, count: int) -> None:
    """``count`` embedded memories, 60 days old and unused for 40 (SQL: test set-up at speed)."""
    with tenant_context(tenant):
        agent = agent_create(by=None, name=f"bulk-{uuid.uuid4().hex[:6]}")
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO memory_semanticmemory (id, agent_id, scope, memory_type, tags, visible_to_agents, "
                "visible_to_roles, content, content_hash, metadata, importance, confidence, embedding, "
                "embedding_model, embedding_dimensions, created_at, data_subject) "
                "SELECT gen_random_uuid(), %s, 'private', 'fact', '{}', '{}', '{}', 'memory ' || i, "
                "md5('memory ' || i), '{}', 0.5, 1.0, array_fill(0.05, ARRAY[384])::vector, 'test-model', 384, %s, '' "
                "FROM generate_series(1, %s) i",
                [agent.pk, CLOCK - timedelta(days=60), count],
            )
            cursor.execute(
                "INSERT INTO memory_memoryaccess (memory_id, last_accessed_at, access_count, stability_hours) "
                "SELECT id, %s, 0, 168 FROM memory_semanticmemory",
                [CLOCK - timedelta(days=40)],
            )


def runs_shown(tenant: Tenant) -> list[tuple[str, str, dict, str]]:
    with tenant_context(tenant):
        return [(r.job, r.status, r.counts, r.error) for r in ConsolidationRun.objects.order_by("id")]


def forgetting_run(tenant: Tenant) -> ConsolidationRun | None:
    with tenant_context(tenant):
        return ConsolidationRun.objects.filter(job=Job.FORGETTING).order_by("-id").first()


def test_a_worker_killed_mid_run_resumes_and_archives_each_memory_once(
    scratch_tenant: Tenant, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    stale_memories(scratch_tenant, ROWS)
    with own_broker(tmp_path / "redis") as redis:
        url = redis.start()
        with worker(url, ENGRAM_CONSOLIDATION_BATCH="100") as process:
            with Connection(url) as broker:  # the test's own broker, not the suite's
                consolidate.apply_async(
                    kwargs={"now": CLOCK.isoformat(), "force": True},
                    connection=broker,
                    headers={"_schema_name": scratch_tenant.schema_name},
                )

            def midway() -> bool:
                run = forgetting_run(scratch_tenant)
                return run is not None and run.status == RunStatus.RUNNING and bool(run.cursor)

            try:
                wait_until(midway, CONVERGENCE_BOUND, "the forgetting run to be half way")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; runs: {runs_shown(scratch_tenant)}") from None
            children = psutil.Process(process.pid).children()
            for child in children:
                child.send_signal(signal.SIGKILL)
            psutil.wait_procs(children, timeout=10)
            killed_at = forgetting_run(scratch_tenant)
            assert killed_at is not None and killed_at.status == RunStatus.RUNNING
            assert 0 < killed_at.counts["examined"] < ROWS

            def done() -> bool:
                run = forgetting_run(scratch_tenant)
                return run is not None and run.status == RunStatus.DONE

            wait_until(done, 3 * CONVERGENCE_BOUND, "the requeued task to finish the run")
    run = forgetting_run(scratch_tenant)
    assert run is not None and run.pk == killed_at.pk and run.attempts == 2
    assert run.counts == {"examined": ROWS, "archived": ROWS}
    with tenant_context(scratch_tenant):
        assert SemanticMemory.objects.filter(archived_at=CLOCK).count() == ROWS
        ids = [
            i
            for e in Event.objects.filter(payload_index__action="memories_archive")
            for i in e.payload["memory_ids"]
        ]
        assert len(ids) == ROWS == len(set(ids))  # each archived (and recorded) exactly once


def test_a_pass_is_due_again_once_the_tenants_interval_has_passed(alice: Caller) -> None:
    """The schedule's rule without waiting for it: the pass is asked at moments given as ``now``
    (beat asks every hour; the real beat below asks every second)."""
    with tenant_context(alice.tenant):
        interval = timedelta(hours=consolidation_policy().interval_hours)
        first = consolidate_pass(force=True)
        assert sorted(r.job for r in first) == sorted(Job.values)
        started = max(r.started_at for r in first)
        assert consolidate_pass(now=started + interval - timedelta(seconds=1)) == []
        again = consolidate_pass(now=started + interval)
        assert sorted(r.job for r in again) == sorted(Job.values)
        assert consolidate_pass(now=started + interval) == []  # ran again: not due until the next interval


def test_beat_runs_each_tenants_pass_and_metrics_count_it(scratch_tenant: Tenant, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with own_broker(tmp_path / "redis") as redis:
        url = redis.start()
        with worker(url, beat_schedule=tmp_path / "beat-schedule", ENGRAM_CONSOLIDATION_BEAT_SECONDS="1"):

            def ran() -> bool:
                with tenant_context(scratch_tenant):
                    return ConsolidationRun.objects.filter(status=RunStatus.DONE).count() == len(Job.values)

            wait_until(ran, 2 * CONVERGENCE_BOUND, "beat to run the tenant's consolidation pass")
            # the pass is not due again before the tenant's interval (12 h): beat asks every second,
            # and a window of its asks is a wall-clock wait (beat and the worker are other processes;
            # the rule itself is held with a moved clock above)
            with tenant_context(scratch_tenant):
                first = set(ConsolidationRun.objects.values_list("pk", flat=True))
            time.sleep(3)
            with tenant_context(scratch_tenant):
                assert set(ConsolidationRun.objects.values_list("pk", flat=True)) == first
    text = Client().get("/metrics").content.decode()
    line = f'engram_consolidation_runs_total{{job="forgetting",status="done",tenant="{scratch_tenant.schema_name}"}} 1.0'
    assert line in text, [row for row in text.splitlines() if "consolidation" in row][:20]
