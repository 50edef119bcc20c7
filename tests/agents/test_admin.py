"""The agents admin: keys are shown once and revoked."""

from __future__ import annotations

from django_tenants.utils import tenant_context

from agents.models import ApiKey
from tests.factories import Caller


def _login(client, tenant, username: str = "op") -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model

    with tenant_context(tenant):
        get_user_model().objects.create_superuser(username, f"{username}@example.com", "pw-123456789")
    host = f"{tenant.schema_name}.localhost"
    client.post("/admin/login/", {"username": username, "password": "pw-123456789"}, HTTP_HOST=host)


def test_admin_mints_a_key_shown_once_and_revokes_it(alice: Caller, client) -> None:  # type: ignore[no-untyped-def]
    _login(client, alice.tenant)
    host = {"HTTP_HOST": "alpha.localhost"}
    response = client.post(
        "/admin/agents/agent/",
        {"action": "mint_read_only_key", "_selected_action": [alice.agent.pk]},
        follow=True,
        **host,
    )
    page = response.content.decode()
    assert "it will not be shown again" in page
    raw = page.split("shown again): ")[1].split("<")[0].strip()
    assert raw.startswith("egm.alpha.")
    alice.client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert alice.get("/api/v1/me").json()["scopes"] == ["read"]
    with tenant_context(alice.tenant):
        key = ApiKey.objects.get(key_id=raw.split(".")[2])
    client.post("/admin/agents/apikey/", {"action": "revoke", "_selected_action": [key.pk]}, **host)
    assert alice.get("/api/v1/me").status_code == 401
    # the key list never shows a secret
    assert raw.split(".")[3] not in client.get("/admin/agents/apikey/", **host).content.decode()


def test_the_admin_binds_a_new_key_to_an_end_user(alice: Caller, client) -> None:  # type: ignore[no-untyped-def]
    """The add form takes the key's data subject; it is fixed once the key exists."""
    _login(client, alice.tenant)
    host = {"HTTP_HOST": "alpha.localhost"}
    form = {"agent": alice.agent.pk, "name": "for ana", "scopes": ["read"], "data_subject": " ana "}
    page = client.post("/admin/agents/apikey/add/", form, follow=True, **host).content.decode()
    raw = page.split("shown again): ")[1].split("<")[0].strip()
    alice.client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert alice.get("/api/v1/me").json()["data_subject"] == "ana"
    with tenant_context(alice.tenant):
        key = ApiKey.objects.get(key_id=raw.split(".")[2])
    change = client.get(f"/admin/agents/apikey/{key.pk}/change/", **host).content.decode()
    assert 'name="data_subject"' not in change  # read-only once made
