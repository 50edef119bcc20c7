"""The one place where an API key becomes (tenant, agent): DRF authentication for ``/api/v1/``."""

from __future__ import annotations

import functools
import time
from datetime import timedelta

from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone
from django_tenants.utils import tenant_context
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from core.db.base import fetch_prepared
from core.errors import TENANT_CACHE_SECONDS, TenantMoving
from core.tenancy import activate_tenant, quote_ident
from tenants.models import Tenant
from tenants.selectors import tenant_get

from .models import Agent, ApiKey

KEY_PREFIX = "egm"
LAST_USED_RESOLUTION = timedelta(seconds=60)
_tenant_cache: dict[str, tuple[float, Tenant | None]] = {}


def _tenant_for_schema(schema_name: str) -> Tenant | None:
    """Active tenant by schema name (``tenants.selectors.tenant_get``, which reads it in the public
    schema whatever schema the connection is in), cached per process for a few seconds (one query
    saved per call)."""
    now = time.monotonic()
    hit = _tenant_cache.get(schema_name)
    # a moving tenant's row is read again on each request: its agents see the switch at once
    if hit and now - hit[0] < TENANT_CACHE_SECONDS and not (hit[1] is not None and hit[1].moving):
        return hit[1]
    tenant = tenant_get(schema_name=schema_name, active_only=True)
    _tenant_cache[schema_name] = (now, tenant)
    return tenant


def clear_tenant_cache(schema_name: str | None = None) -> None:
    """Forget the cached row of ``schema_name`` (every cached row without it): tests, after
    deactivating a tenant, and when the database refused a unit of a tenant whose row this process
    read before a move (``core.errors.TenantMoving``)."""
    if schema_name is None:
        _tenant_cache.clear()
    else:
        _tenant_cache.pop(schema_name, None)


@functools.cache
def _key_lookup() -> tuple[str, list[str], list[str]]:
    """The key lookup's statement (a key and its agent by ``key_id``, one row or none) and the
    attribute names of its columns: the key's, then the agent's. Built from the models' metadata
    once, so it selects exactly the columns the ORM's ``select_related("agent")`` did."""
    key_fields = ApiKey._meta.concrete_fields
    agent_fields = Agent._meta.concrete_fields
    key_cols = {f.name: quote_ident(str(f.column)) for f in key_fields}
    agent_cols = {f.name: quote_ident(str(f.column)) for f in agent_fields}
    columns = [f"k.{c}" for c in key_cols.values()] + [f"a.{c}" for c in agent_cols.values()]
    sql = (
        f"SELECT {', '.join(columns)} FROM {quote_ident(ApiKey._meta.db_table)} k "
        f"JOIN {quote_ident(Agent._meta.db_table)} a ON a.{agent_cols['id']} = k.{key_cols['agent']} "
        f"WHERE k.{key_cols['key_id']} = %s"
    )
    return sql, [f.attname for f in key_fields], [f.attname for f in agent_fields]


def _api_key_get(key_id: str) -> ApiKey | None:
    """The key ``key_id`` of the current tenant's schema with its agent loaded (``api_key.agent``
    needs no query), or ``None``. One prepared statement (``core.db.base.fetch_prepared``): the
    ORM's query for the same row cost ~0.4 ms of CPU per request to compile, plan and load."""
    sql, key_names, agent_names = _key_lookup()
    row = fetch_prepared(sql, [key_id])
    if row is None:
        return None
    api_key = ApiKey.from_db(DEFAULT_DB_ALIAS, key_names, row[: len(key_names)])
    api_key.agent = Agent.from_db(DEFAULT_DB_ALIAS, agent_names, row[len(key_names) :])
    return api_key


def parse_bearer(header: bytes | str | None) -> str | None:
    """The key in ``Authorization: Bearer <key>``; ``None`` without a header.

    Raises ``AuthenticationFailed`` for another scheme or a malformed header.
    """
    if not header:
        return None
    if isinstance(header, str):
        header = header.encode("latin-1", errors="replace")
    parts = header.split()
    if not parts:
        return None
    if parts[0].lower() != b"bearer" or len(parts) != 2:
        raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <api key>'.")
    try:
        return parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise exceptions.AuthenticationFailed("Invalid API key.") from None


def resolve_api_key(raw: str) -> tuple[Tenant, Agent, ApiKey]:
    """Turn a raw key into ``(tenant, agent, api_key)`` and activate the tenant's schema (only once the
    key is proven: a rejected key leaves the connection on the schema it was on).

    Raises ``AuthenticationFailed`` for a malformed, unknown or revoked key, an inactive agent or
    an inactive tenant. Updates ``last_used_at`` at most once a minute per key.
    """
    parts = raw.split(".")
    if len(parts) != 4 or parts[0] != KEY_PREFIX:
        raise exceptions.AuthenticationFailed("Invalid API key.")
    _, schema_name, key_id, secret = parts

    tenant = _tenant_for_schema(schema_name)
    if tenant is None:
        raise exceptions.AuthenticationFailed("Invalid API key.")
    if tenant.moving:
        raise TenantMoving()
    # the key's row lives in the tenant's schema; the connection stays on its previous schema (the
    # public one) until the key is proven, so a rejected key never leaves it in the tenant's
    with tenant_context(tenant):
        api_key = _api_key_get(key_id)
        if api_key is None or not api_key.check_secret(secret):
            raise exceptions.AuthenticationFailed("Invalid API key.")
        if api_key.is_revoked:
            raise exceptions.AuthenticationFailed("This API key has been revoked.")
        if not api_key.agent.is_active:
            raise exceptions.AuthenticationFailed("This agent is deactivated.")
    activate_tenant(tenant)
    api_key.agent.acting_for = api_key.data_subject  # the key's binding travels with its agent
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return tenant, api_key.agent, api_key


class ApiKeyAuthentication(BaseAuthentication):
    """DRF authentication for ``Authorization: Bearer egm.<schema>.<key_id>.<secret>``.

    On success, activates the tenant's schema, sets ``request.tenant`` and returns
    ``(agent, api_key)``; see ``resolve_api_key`` for the failures (401). No header: ``None``.
    """

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Agent, ApiKey] | None:
        raw = parse_bearer(get_authorization_header(request))
        if raw is None:
            return None
        tenant, agent, api_key = resolve_api_key(raw)
        request.tenant = tenant  # type: ignore[attr-defined]
        return agent, api_key

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
