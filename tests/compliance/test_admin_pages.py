"""The admin as people see it: "Engram" and the tenant's name on every tenant page, refusals in the
admin's style, the public tenant undeletable from the platform admin, the public key downloadable,
every state of an export shown as it is, and legal holds released with a reason (and a second
officer where the hold was placed so)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone
from django_tenants.utils import schema_context, tenant_context

from compliance import lifecycle, services, signing
from compliance.models import Export, ExportStatus, LegalHold
from core.errors import Conflict, InvalidInput
from core.errors import PermissionDenied as DomainPermissionDenied
from memory.episodic.models import Event, EventKind
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


# --- legal holds: released with a reason, by a second officer where placed with four eyes -----------------------


def _hold_events(tenant: Tenant, action: str) -> list[Event]:
    with tenant_context(tenant):
        return list(Event.objects.filter(payload_index__action=action).order_by("seq"))


def test_a_hold_is_released_with_a_reason_and_by_a_second_officer(alice: Caller) -> None:
    olga = admin_client(alice.tenant, "olga", group="compliance officer")
    pavel = admin_client(alice.tenant, "pavel", group="compliance officer")
    placed = olga.post(
        "/admin/compliance/legalhold/add/",
        {"kind": "session", "value": "s-court", "reason": "case 12/2026", "four_eyes": "on"},
    )
    assert placed.status_code == 302, placed.content.decode()[:3000]
    with tenant_context(alice.tenant):
        hold = LegalHold.objects.get()
    # no one-click release from the list
    olga.post("/admin/compliance/legalhold/", {"action": "release", "_selected_action": [hold.pk]})
    with tenant_context(alice.tenant):
        hold.refresh_from_db()
    assert hold.released_at is None, "released with one click, no reason, no second officer"
    assert hold.four_eyes
    page = f"/admin/compliance/legalhold/{hold.pk}/release/"
    # no reason: refused, the hold stays
    refused = olga.post(page, {"step": "request", "reason": "  "})
    assert refused.status_code == 400 and "This field is required" in refused.content.decode()
    with tenant_context(alice.tenant):
        hold.refresh_from_db()
        assert hold.active and not hold.release_waiting
    # the first officer asks, with the reason: the hold still holds
    assert olga.post(page, {"step": "request", "reason": "the case is closed"}).status_code == 302
    with tenant_context(alice.tenant):
        hold.refresh_from_db()
        assert hold.active and hold.release_requested_by == "user:olga"
        assert lifecycle.holds_meeting("session", "s-court") == [hold]
    waiting = olga.get(page).content.decode()
    assert 'id="hold-waiting"' in waiting and 'id="hold-confirm"' not in waiting
    # ... and cannot confirm it herself
    own = olga.post(page, {"step": "confirm"})
    assert own.status_code == 403 and "second officer" in own.content.decode()
    with tenant_context(alice.tenant):
        hold.refresh_from_db()
        assert hold.active
    # a second officer confirms: released, recorded with the reason and both names
    assert 'id="hold-confirm"' in pavel.get(page).content.decode()
    assert pavel.post(page, {"step": "confirm"}).status_code == 302
    with tenant_context(alice.tenant):
        hold.refresh_from_db()
        assert not hold.active and hold.released_by == "user:pavel"
        assert hold.release_reason == "the case is closed"
        assert lifecycle.holds_meeting("session", "s-court") == []
    asked = _hold_events(alice.tenant, "legal_hold_release_request")
    assert [(e.actor, e.payload["reason"]) for e in asked] == [("user:olga", "the case is closed")]
    released = _hold_events(alice.tenant, "legal_hold_release")
    assert [(e.actor, e.payload["reason"], e.payload["requested_by"]) for e in released] == [
        ("user:pavel", "the case is closed", "user:olga")
    ]
    # released: nothing more to do on it
    assert pavel.post(page, {"step": "confirm"}).status_code == 409
    assert olga.post(page, {"step": "request", "reason": "again"}).status_code == 409


def test_a_hold_placed_without_four_eyes_is_released_by_one_officer_with_a_reason(alice: Caller) -> None:
    olga = admin_client(alice.tenant, "olga", group="compliance officer")
    placed = olga.post(
        "/admin/compliance/legalhold/add/", {"kind": "agent", "value": "alice", "reason": "internal review"}
    )
    assert placed.status_code == 302
    with tenant_context(alice.tenant):
        hold = LegalHold.objects.get()
    assert not hold.four_eyes
    page = f"/admin/compliance/legalhold/{hold.pk}/release/"
    assert olga.post(page, {"step": "request"}).status_code == 400
    assert olga.post(page, {"step": "request", "reason": "review done"}).status_code == 302
    with tenant_context(alice.tenant):
        hold.refresh_from_db()
    assert not hold.active and hold.released_by == "user:olga" and hold.release_reason == "review done"
    released = _hold_events(alice.tenant, "legal_hold_release")
    assert [(e.actor, e.payload["reason"]) for e in released] == [("user:olga", "review done")]
    # who may only look cannot release
    with tenant_context(alice.tenant):
        other = services.hold_place(kind="tenant", value="", reason="regulator", username="olga")
    viewer = admin_client(alice.tenant, "viewer")
    with tenant_context(alice.tenant):
        User.objects.get(username="viewer").user_permissions.add(
            Permission.objects.get(codename="view_legalhold")
        )
    release = f"/admin/compliance/legalhold/{other.pk}/release/"
    assert viewer.get(release).status_code == 200
    assert viewer.post(release, {"step": "request", "reason": "x"}).status_code == 403
    with tenant_context(alice.tenant):
        other.refresh_from_db()
    assert other.active


def test_the_release_services_refuse_without_a_reason_or_a_second_officer(alice: Caller) -> None:
    with tenant_context(alice.tenant):
        hold = services.hold_place(kind="subject", value="cust-1", reason="litigation", username="olga")
        with pytest.raises(InvalidInput, match="reason"):
            services.hold_release(hold=hold, username="olga", reason=" ")
        with pytest.raises(Conflict, match="Nobody asked"):
            services.hold_release_confirm(hold=hold, username="pavel")
        services.hold_release(hold=hold, username="olga", reason="settled")
        with pytest.raises(Conflict, match="asked for the release"):
            services.hold_release(hold=hold, username="pavel", reason="settled too")
        with pytest.raises(DomainPermissionDenied, match="second officer"):
            services.hold_release_confirm(hold=hold, username="olga")
        assert LegalHold.objects.get(pk=hold.pk).active
        released = services.hold_release_confirm(hold=hold.pk, username="pavel")
        assert not released.active and released.released_by == "user:pavel"
