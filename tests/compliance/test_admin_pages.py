"""The admin as people see it: "Engram" and the tenant's name on every tenant page, refusals in the
admin's style, the public tenant undeletable from the platform admin, the public key downloadable,
and every state of an export shown as it is."""

from __future__ import annotations

import re
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from django_tenants.utils import schema_context, tenant_context

from compliance import services, signing
from compliance.models import Export, ExportStatus
from memory.episodic.models import EventKind
from memory.episodic.services import EventData, events_append
from tenants.models import Tenant
from tests.factories import PASSWORD, Caller, admin_client


def test_every_tenant_page_says_engram_and_the_tenant(alice: Caller) -> None:
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    for url in ("/admin/", "/admin/memory/event/", "/admin/compliance/chaincheck/", "/admin/sessions/"):
        html = officer.get(url).content.decode()
        assert (
            '<div id="site-name"><a href="/admin/">Engram <span class="engram-tenant">· Alpha</span>' in html
        ), url
        assert "Engram · Alpha</title>" in html, url
        assert "Django administration" not in html
    login = Client(HTTP_HOST="alpha.localhost").get("/admin/login/").content.decode()
    assert 'Engram <span class="engram-tenant">· Alpha</span>' in login


def test_a_refusal_renders_in_the_admins_style(alice: Caller) -> None:
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    for url in ("/admin/agents/agent/add/", "/admin/memory/predicate/add/"):
        response = officer.get(url)
        assert response.status_code == 403, url
        html = response.content.decode()
        assert "Permission denied" in html and 'id="site-name"' in html and "officer" in html
        assert 'id="user-tools"' in html  # the admin's header, with the user's links


def test_the_public_tenant_cannot_be_deleted_from_the_platform_admin(tenant_a: Tenant) -> None:
    with schema_context("public"):
        User.objects.create_superuser("platform", "p@example.com", PASSWORD)
        public = Tenant.objects.get(schema_name="public")
    client = Client(HTTP_HOST="localhost")
    client.post("/admin/login/", {"username": "platform", "password": PASSWORD})
    assert client.get(f"/admin/tenants/tenant/{public.pk}/delete/").status_code == 403
    assert client.post(f"/admin/tenants/tenant/{public.pk}/delete/", {"post": "yes"}).status_code == 403
    bulk = client.post(
        "/admin/tenants/tenant/",
        {"action": "delete_selected", "_selected_action": [public.pk], "post": "yes"},
        follow=True,
    )
    assert bulk.status_code in (200, 403)
    with schema_context("public"):
        assert Tenant.objects.filter(schema_name="public").exists()
    page = client.get(f"/admin/tenants/tenant/{public.pk}/change/").content.decode()
    assert "deletelink" not in page
    assert "Engram platform" in page


def test_the_public_key_downloads_for_who_may_see_anchors(alice: Caller) -> None:
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    response = officer.get("/admin/compliance/anchor/public-key/")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-pem-file"
    key = serialization.load_pem_public_key(response.content)
    assert signing.key_id_of(key) == signing.key_id()  # type: ignore[arg-type]
    assert admin_client(alice.tenant, "nobody").get("/admin/compliance/anchor/public-key/").status_code == 403


def test_the_officer_reads_every_layer(alice: Caller) -> None:
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    for url in (
        "/admin/memory/semanticmemory/?forgotten_at__isempty=0",
        "/admin/memory/checkpoint/",
        "/admin/memory/storeitem/",
        "/admin/agents/agent/",
        "/admin/agents/apikey/",
        "/admin/admin/logentry/",
        "/admin/auth/user/",
        "/admin/compliance/export/",
        "/admin/compliance/anchor/",
    ):
        assert officer.get(url).status_code == 200, url


# --- exports: every state rendered as it is (issue 28, item 11) -------------------------------------------------


def _export_in(state: str, alice: Caller) -> Export:
    """An export of alice's tenant in ``state`` (call inside the tenant): the states of the model
    and ``done, archive missing`` (its file removed from the server since). ``withdrawn`` comes
    from a real erasure of a subject whose event the archive holds."""
    export = services.export_request(username="officer", scope="all")
    if state == "queued":
        return export
    if state == "running":
        Export.objects.filter(pk=export.pk).update(status="running", events_total=10, events_done=4)
    elif state == "failed":
        Export.objects.filter(pk=export.pk).update(status="failed", error="RuntimeError: the disk is full")
    elif state in ("done", "done, archive missing"):
        export = services.export_run(export_id=str(export.pk))
        if state == "done, archive missing":
            Path(export.path).unlink()
    elif state == "withdrawn":
        subject = f"cust-{export.pk}"[:40]
        events_append(
            agent=alice.agent,
            events=[
                EventData(
                    session_id="s-export-state",
                    kind=EventKind.MESSAGE,
                    content="the customer's address",
                    occurred_at=timezone.now(),
                    data_subject=subject,
                )
            ],
        )
        export = services.export_request(username="officer", scope="all")
        services.export_run(export_id=str(export.pk))
        request = services.erasure_request(
            kind="subject", value=subject, legal_basis="GDPR Art. 17", note="", username="olga"
        )
        services.erasure_approve(request_id=request.pk, username="pavel")
        done = services.erasure_run(request_id=request.pk)
        assert done.status == "done", done.error
    export.refresh_from_db()
    return export


# what each state says in the list and on its page; the download works only for "done"
EXPORT_STATES = {
    "withdrawn": "withdrawn: archive withdrawn by erasure",
    "done, archive missing": "done, but the archive is no longer on the server",
    "failed": "failed: RuntimeError: the disk is full",
    "queued": "queued",
    "running": "running",
    "done": "done",
}


def _list_row(html: str, export: Export) -> str:
    for row in re.findall(r"<tr[^>]*>.*?</tr>", html, flags=re.S):
        if str(export.pk)[:8] in row:
            return row
    raise AssertionError(f"export {export.pk} not in the list")


def test_every_state_of_an_export_is_shown_as_it_is(alice: Caller) -> None:
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    with tenant_context(alice.tenant):
        exports = {state: _export_in(state, alice) for state in EXPORT_STATES}
    listed = officer.get("/admin/compliance/export/").content.decode()
    for state, words in EXPORT_STATES.items():
        export = exports[state]
        row = _list_row(listed, export)
        assert words in row, (state, row)
        if state != "done":
            assert '<td class="field-state_text">done</td>' not in row, state
        detail = officer.get(f"/admin/compliance/export/{export.pk}/change/").content.decode()
        assert words in detail, state
        page = officer.get(f"/admin/compliance/export/{export.pk}/progress/").content.decode()
        download = officer.get(f"/admin/compliance/export/{export.pk}/download/")
        if state == "done":
            assert 'id="export-download"' in page
            assert download.status_code == 200 and download["X-Archive-SHA256"] == export.sha256
            continue
        assert 'id="export-download"' not in page, f"{state}: a download button with nothing behind it"
        body = download.content.decode()
        assert download.status_code == (409 if state in ("queued", "running", "failed") else 410), state
        assert "There is no archive to download" in body and 'id="site-name"' in body, state
    # every status the model has is among the states walked
    assert set(ExportStatus.values) <= set(EXPORT_STATES)
