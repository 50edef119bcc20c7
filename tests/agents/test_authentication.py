"""API keys: one authentication path, 401 for bad keys, 403 for a missing scope, tenant from the key."""

from __future__ import annotations

import pytest
from django.utils import timezone
from django_tenants.utils import tenant_context
from rest_framework.test import APIClient

from agents.models import Agent, ApiKey, Scope
from agents.services import api_key_revoke
from tests.factories import Caller, make_caller, requires_model


def client_with(header: str | None) -> APIClient:
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    return client


def test_me_names_agent_tenant_and_scopes(alice: Caller) -> None:
    response = alice.get("/api/v1/me")
    assert response.status_code == 200
    assert response.json() == {
        "agent": "alice",
        "role": None,  # absent optional values are null, never ""
        "tenant": "alpha",
        "key_id": alice.key.split(".")[2],
        "scopes": ["read", "write"],
        "data_subject": None,  # the key is bound to no end user
    }


def test_missing_malformed_and_unknown_keys_are_401(alice: Caller) -> None:
    prefix, schema, key_id, secret = alice.key.split(".")
    for header in [
        None,
        "Bearer",
        "Basic abc",
        "Bearer nonsense",
        f"Bearer {prefix}.{schema}.{key_id}.wrong",
        f"Bearer {prefix}.nosuchtenant.{key_id}.{secret}",
        f"Bearer {prefix}.public.{key_id}.{secret}",
    ]:
        response = client_with(header).get("/api/v1/events")
        assert response.status_code == 401, header
        assert response["WWW-Authenticate"] == "Bearer"


def test_revoked_key_is_401_and_last_used_is_recorded(alice: Caller) -> None:
    assert alice.get("/api/v1/me").status_code == 200
    key_id = alice.key.split(".")[2]
    with tenant_context(alice.tenant):
        key = ApiKey.objects.get(key_id=key_id)
        assert key.last_used_at is not None
        assert key.secret_hash not in alice.key  # only the hash is stored, never the secret
        api_key_revoke(by=None, api_key=key)
    response = alice.get("/api/v1/me")
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


def test_a_key_only_opens_its_own_tenant(alice: Caller, mallory: Caller) -> None:
    # mallory's key id and secret, presented as if they belonged to tenant alpha
    _, _, key_id, secret = mallory.key.split(".")
    response = client_with(f"Bearer egm.alpha.{key_id}.{secret}").get("/api/v1/me")
    assert response.status_code == 401


@requires_model  # a search is answered, so the embedder must be there
def test_missing_scope_is_403(tenant_a) -> None:  # type: ignore[no-untyped-def]
    reader = make_caller(tenant_a, "reader", scopes=(Scope.READ,))
    writer = make_caller(tenant_a, "writer", scopes=(Scope.WRITE,))
    event = {"session_id": "s", "kind": "message", "content": "hi", "occurred_at": "2026-01-01T00:00:00Z"}
    assert reader.post("/api/v1/events", event).status_code == 403
    assert reader.post("/api/v1/memories/search", {"query": "hi"}).status_code == 200  # search is a read
    assert writer.get("/api/v1/events").status_code == 403
    denied = writer.post("/api/v1/memories/search", {"query": "hi"})
    assert denied.status_code == 403
    assert "'read'" in denied.json()["detail"]


def test_deactivated_agent_is_401(alice: Caller) -> None:
    with tenant_context(alice.tenant):
        alice.agent.is_active = False
        alice.agent.save()
    assert alice.get("/api/v1/me").status_code == 401


@pytest.mark.parametrize("how", ["wrong secret", "unknown key id", "revoked", "deactivated agent"])
def test_a_rejected_key_leaves_the_connection_on_the_public_schema(alice: Caller, how: str) -> None:
    from django.db import connection
    from rest_framework import exceptions

    from agents.authentication import resolve_api_key
    from agents.models import ApiKey

    prefix, schema, key_id, secret = alice.key.split(".")
    raw = alice.key
    if how == "wrong secret":
        raw = ".".join([prefix, schema, key_id, "x" * len(secret)])
    elif how == "unknown key id":
        raw = ".".join([prefix, schema, "0" * len(key_id), secret])
    with tenant_context(alice.tenant):
        if how == "revoked":
            ApiKey.objects.filter(key_id=key_id).update(revoked_at=timezone.now())
        elif how == "deactivated agent":
            Agent.objects.filter(pk=alice.agent.pk).update(is_active=False)
    connection.set_schema_to_public()
    with pytest.raises(exceptions.AuthenticationFailed):
        resolve_api_key(raw)
    assert connection.schema_name == "public"


def test_an_authenticated_request_sends_one_statement(alice: Caller) -> None:
    """The key and its agent are one prepared statement (``EXECUTE``); nothing else is sent for
    ``/me`` once the tenant is cached and ``last_used_at`` is fresh."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    assert alice.get("/api/v1/me").status_code == 200  # prepares, caches the tenant, records last use
    for _ in range(2):
        with CaptureQueriesContext(connection) as captured:
            assert alice.get("/api/v1/me").status_code == 200
        statements = [q["sql"] for q in captured.captured_queries]
        assert len(statements) == 1, statements
        assert statements[0].startswith("EXECUTE engram_"), statements


def test_the_key_lookup_loads_what_the_orm_loads(alice: Caller) -> None:
    from agents.authentication import _api_key_get

    key_id = alice.key.split(".")[2]
    with tenant_context(alice.tenant):
        ApiKey.objects.filter(key_id=key_id).update(last_used_at=timezone.now(), name="ci")
        want = ApiKey.objects.select_related("agent").get(key_id=key_id)
        got = _api_key_get(key_id)
        assert _api_key_get("0" * len(key_id)) is None
    assert got is not None
    fields = [f.attname for f in ApiKey._meta.concrete_fields]
    assert {f: getattr(got, f) for f in fields} == {f: getattr(want, f) for f in fields}
    agent_fields = [f.attname for f in Agent._meta.concrete_fields]
    assert {f: getattr(got.agent, f) for f in agent_fields} == {
        f: getattr(want.agent, f) for f in agent_fields
    }
    assert got._state.adding is False and got._state.db == "default"
