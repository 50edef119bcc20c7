"""The console's background work in a real Celery worker: "verify now" from the admin runs as a
task whose progress the panel polls, an export requested in the admin is written by the worker and
downloaded, the nightly check and the anchoring job run per tenant."""

from __future__ import annotations

import time
from pathlib import Path

from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django_tenants.utils import tenant_context

from agents.services import agent_create
from compliance import tasks, verify_export
from compliance.models import Anchor, ChainCheck, CheckStatus, Export, ExportStatus
from memory.episodic.models import Event
from tenants.models import Domain, Tenant
from tests.compliance.conftest import append, behind_the_triggers
from tests.factories import HTMX, PASSWORD


def officer_client(tenant: Tenant) -> Client:
    host = f"{tenant.schema_name.replace('_', '-')}.localhost"
    Domain.objects.get_or_create(domain=host, defaults={"tenant": tenant, "is_primary": True})
    with tenant_context(tenant):
        user = User.objects.create_user("officer", "o@example.com", PASSWORD, is_staff=True)
        user.groups.add(Group.objects.get(name="compliance officer"))
    connection.set_schema_to_public()
    client = Client(HTTP_HOST=host)
    assert client.post("/admin/login/", {"username": "officer", "password": PASSWORD}).status_code == 302
    return client


def wait_for(predicate, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the worker did not finish in time"
        time.sleep(0.2)


def test_verify_now_runs_in_the_worker_and_the_panel_follows_it(
    celery_worker, scratch_tenant: Tenant
) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(scratch_tenant):
        append(agent_create(by=None, name="worker-agent"), 30)
    client = officer_client(scratch_tenant)
    panel = client.post("/admin/compliance/chaincheck/run/", **HTMX).content.decode()
    assert "Verifying" in panel and 'hx-trigger="every 1s"' in panel
    with tenant_context(scratch_tenant):
        check = ChainCheck.objects.get()
        assert check.requested_by == "user:officer"
    done = lambda: ChainCheck.objects.get(pk=check.pk).is_done  # noqa: E731
    with tenant_context(scratch_tenant):
        wait_for(done)
    progress = client.get(f"/admin/compliance/chaincheck/{check.pk}/progress/", **HTMX).content.decode()
    assert "Chain intact up to #" in progress and "hx-trigger" not in progress  # polling stops

    with tenant_context(scratch_tenant), behind_the_triggers() as cursor:
        cursor.execute("UPDATE memory_event SET kind = 'decision' WHERE seq = 12")
    client.post("/admin/compliance/chaincheck/run/", **HTMX)
    with tenant_context(scratch_tenant):
        wait_for(lambda: ChainCheck.objects.filter(status=CheckStatus.BROKEN).exists())
    page = client.get("/admin/").content.decode()
    assert "Trail BROKEN" in page and "first broken link at #12" in page and "fields_altered" in page


def test_an_export_requested_in_the_admin_is_written_by_the_worker(
    celery_worker, scratch_tenant: Tenant, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(scratch_tenant):
        agent = agent_create(by=None, name="worker-agent")
        append(agent, 5, session_id="s-export")
        append(agent, 5, session_id="s-noise")
    client = officer_client(scratch_tenant)
    form = client.get("/admin/compliance/export/new/", {"session": "s-export"}).content.decode()
    assert 'value="s-export"' in form
    response = client.post("/admin/compliance/export/new/", {"scope": "session", "session_id": "s-export"})
    assert response.status_code == 302
    progress_url = response["Location"]
    with tenant_context(scratch_tenant):
        export = Export.objects.get()
        wait_for(lambda: Export.objects.get(pk=export.pk).is_done)
        export.refresh_from_db()
    assert export.status == ExportStatus.DONE, export.error
    page = client.get(progress_url).content.decode()
    assert export.sha256 in page and "Download the archive" in page
    download = client.get(f"/admin/compliance/export/{export.pk}/download/")
    assert download.status_code == 200 and download["X-Archive-SHA256"] == export.sha256
    archive = tmp_path / "export.tar"
    archive.write_bytes(b"".join(download.streaming_content))  # type: ignore[attr-defined]
    report = verify_export.verify(str(archive))
    assert report.ok, report.failures
    with tenant_context(scratch_tenant):
        actions = list(
            Event.objects.filter(actor="user:officer").values_list("payload_index__action", flat=True)
        )
    assert {"login", "export", "export_download"} <= set(actions)
    bad = client.post("/admin/compliance/export/new/", {"scope": "agent", "agent_name": "nobody"})
    assert bad.status_code == 400 and "Select a valid choice" in bad.content.decode()


def test_the_beat_jobs_run_per_tenant_in_the_worker(celery_worker, scratch_tenant: Tenant) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(scratch_tenant):
        append(agent_create(by=None, name="worker-agent"), 3)
        assert tasks.anchor_head.delay().get(timeout=90) == 3
        assert tasks.anchor_head.delay().get(timeout=90) is None  # nothing new to sign
        assert tasks.chain_check_nightly.delay().get(timeout=90) == CheckStatus.INTACT
        assert Anchor.objects.count() == 1
        assert ChainCheck.objects.get().requested_by == "job:nightly-verify"
