"""An erasure or a retention pass whose worker process is killed midway (SIGKILL, as the OOM killer
would) is redelivered (late acks, ``reject_on_worker_lost``), resumes from the progress its
committed batches saved, and finishes: everything in scope removed exactly once, counted once in
the receipt or the run, and nothing else touched. Each test runs its own broker and a prefork
worker with small batches (``ENGRAM_LIFECYCLE_BATCH``), as in test_background_work."""

from __future__ import annotations

import json
import signal
from datetime import timedelta
from pathlib import Path

import psutil
from django.utils import timezone
from django_tenants.utils import tenant_context

from agents.services import agent_create
from compliance import services
from compliance.models import ErasureRequest, ErasureStatus, RetentionRun, RunStatus
from memory.episodic.models import Event
from memory.episodic.selectors import chain_verify
from memory.episodic.services import EventData, events_append
from tenants.models import Tenant
from tests.memory.knowledge.test_background_work import CONVERGENCE_BOUND, own_broker, wait_until, worker

SUBJECT = "cust-killed"


def fill(tenant: Tenant, *, in_scope: int, others: int, age: timedelta) -> list[tuple[int, str]]:
    """``in_scope`` events of the subject (``age`` old) and ``others`` of nobody (new); returns the
    others' (seq, content)."""
    with tenant_context(tenant):
        agent = agent_create(by=None, name="writer")
        for start in range(0, in_scope, 500):
            events_append(
                agent=agent,
                events=[
                    EventData(
                        session_id="s-doomed",
                        kind="message",
                        content=f"secret {i}",
                        occurred_at=timezone.now() - age,
                        data_subject=SUBJECT,
                    )
                    for i in range(start, min(in_scope, start + 500))
                ],
            )
        events_append(
            agent=agent,
            events=[
                EventData(
                    session_id="s-kept", kind="message", content=f"keep {i}", occurred_at=timezone.now()
                )
                for i in range(others)
            ],
        )
        return list(Event.objects.filter(session_id="s-kept").values_list("seq", "content"))


def kill_pool(process: psutil.Process) -> None:
    children = process.children()
    assert children
    for child in children:
        child.send_signal(signal.SIGKILL)
    psutil.wait_procs(children, timeout=10)


def test_a_killed_erasure_resumes_and_finishes_without_loss(scratch_tenant: Tenant, tmp_path: Path) -> None:
    others = fill(scratch_tenant, in_scope=3000, others=50, age=timedelta(0))
    with tenant_context(scratch_tenant):
        request = services.erasure_request(
            kind="subject", value=SUBJECT, legal_basis="Art. 17", note="", username="a"
        )
    with own_broker(tmp_path / "redis") as redis:
        url = redis.start()
        with worker(url, ENGRAM_LIFECYCLE_BATCH="10") as process:
            with tenant_context(scratch_tenant):
                # approved as services.erasure_approve does, its task queued on this test's broker
                ErasureRequest.objects.filter(pk=request.pk).update(
                    status=ErasureStatus.APPROVED, approved_by="user:b", approved_at=timezone.now()
                )
                publish_to(url, "compliance.tasks.erasure_run", scratch_tenant.schema_name, str(request.pk))

                def partly_done() -> bool:
                    row = ErasureRequest.objects.get(pk=request.pk)
                    return 100 <= len(row.progress.get("episodic", {}).get("ids", [])) < 3000

                wait_until(partly_done, CONVERGENCE_BOUND, "the erasure to be under way")
                kill_pool(psutil.Process(process.pid))
                wait_until(
                    lambda: ErasureRequest.objects.get(pk=request.pk).is_done,
                    CONVERGENCE_BOUND * 2,
                    "the redelivered erasure to finish",
                )
    with tenant_context(scratch_tenant):
        request.refresh_from_db()
        assert request.status == ErasureStatus.DONE, request.error
        receipt = json.loads(request.receipt)
        seqs = receipt["stores"]["postgres"]["event_seqs"]
        assert receipt["stores"]["postgres"]["events_redacted"] == 3000 == len(set(seqs))
        assert Event.objects.filter(redacted_at__isnull=False).count() == 3000
        assert not Event.objects.filter(content__startswith="secret").exists()
        assert list(Event.objects.filter(session_id="s-kept").values_list("seq", "content")) == others
        report = chain_verify()
        assert report.ok and report.redacted == 3000


def test_a_killed_retention_pass_resumes_and_logs_the_whole_of_it(
    scratch_tenant: Tenant, tmp_path: Path
) -> None:
    others = fill(scratch_tenant, in_scope=3000, others=50, age=timedelta(days=8 * 365))
    with own_broker(tmp_path / "redis") as redis:
        url = redis.start()
        with worker(url, ENGRAM_LIFECYCLE_BATCH="10") as process:
            publish_to(url, "compliance.tasks.retention_daily", scratch_tenant.schema_name)
            with tenant_context(scratch_tenant):

                def partly_done() -> bool:
                    run = RetentionRun.objects.first()
                    return run is not None and 100 <= run.removed.get("episodic", 0) < 3000

                wait_until(partly_done, CONVERGENCE_BOUND, "the pass to be under way")
                kill_pool(psutil.Process(process.pid))
                wait_until(
                    lambda: RetentionRun.objects.filter(status=RunStatus.DONE).exists(),
                    CONVERGENCE_BOUND * 2,
                    "the redelivered pass to finish",
                )
    with tenant_context(scratch_tenant):
        run = RetentionRun.objects.get()  # the redelivered task resumed the same run
        assert run.removed == {"episodic": 3000}
        purge = Event.objects.get(payload_index__action="retention_purge")
        assert purge.payload["removed"]["episodic"] == 3000
        assert list(Event.objects.filter(session_id="s-kept").values_list("seq", "content")) == others
        assert chain_verify().redacted == 3000


def publish_to(url: str, task_name: str, schema: str, *args: object) -> None:
    """Queue ``task_name`` for ``schema`` on the broker at ``url`` (this test's own)."""
    from celery import current_app

    current_app.loader.import_default_modules()
    task = current_app.tasks[task_name]
    with current_app.connection_for_write(url) as conn:
        task.apply_async(args, headers={"_schema_name": schema}, connection=conn)
