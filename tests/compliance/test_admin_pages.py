"""The admin as people see it: "Engram" and the tenant's name on every tenant page, refusals in the
admin's style, the public tenant undeletable from the platform admin, the public key downloadable."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from django.contrib.auth.models import User
from django.test import Client
from django_tenants.utils import schema_context

from compliance import signing
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
