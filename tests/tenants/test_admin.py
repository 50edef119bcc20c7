"""The platform admin."""

from __future__ import annotations


def test_platform_admin_lists_tenants_only_on_the_public_host(tenant_a, client) -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_superuser("root", "root@example.com", "pw-123456789")
    client.post("/admin/login/", {"username": "root", "password": "pw-123456789"}, HTTP_HOST="localhost")
    page = client.get("/admin/tenants/tenant/", HTTP_HOST="localhost")
    assert page.status_code == 200 and "alpha" in page.content.decode()
    # the platform superuser is not a user of tenant alpha
    assert client.get("/admin/", HTTP_HOST="alpha.localhost").status_code == 302
