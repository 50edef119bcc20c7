"""Writes for agents and API keys, each recorded in the tenant's trail by the service that makes
it (``core.recording``). Call inside a tenant schema (``tenant_context``)."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from core.errors import InvalidInput
from core.locks import advisory_xact_lock
from core.recording import Actor, change_record
from core.tenancy import current_schema

from .models import Agent, ApiKey, IdempotencyRecord, Scope

_AGENT_FIELDS = ("name", "role", "is_active")


def _agent_recorded(agent: Agent, *, by: Actor, created: bool, values: dict[str, object]) -> None:
    change_record(
        by=by,
        action="agent_create" if created else "agent_update",
        content=f"{by.name} {'created' if created else 'changed'} agent {agent.name}"
        + (": " + ", ".join(f"{k} → {v!r}" for k, v in values.items()) if values else "."),
        payload={"agent": agent.name, "agent_id": agent.pk, "changes": values},
    )


@transaction.atomic
def agent_create(*, name: str, role: str = "", is_active: bool = True, by: Actor | None) -> Agent:
    """Create an agent in the current tenant and record it as made by ``by`` (``None``: a test's
    or benchmark's set-up outside the product, not recorded). Raises ``ValidationError`` for a bad
    or taken name."""
    agent = Agent(name=name, role=role, is_active=is_active)
    agent.full_clean()
    agent.save()
    if by is not None:
        values = {"name": name, "role": role, "is_active": is_active}
        _agent_recorded(agent, by=by, created=True, values=values)
    return agent


@transaction.atomic
def agent_save(*, agent: Agent, changed: Sequence[str], created: bool, by: Actor) -> Agent:
    """Save ``agent`` (validated) as ``by`` changed it (``changed``: the names of the changed
    fields; ``created``: a new agent) and record it, naming the changed fields with their new
    values. Raises ``ValidationError`` for a bad or taken name."""
    agent.full_clean()
    agent.save()
    values = {name: getattr(agent, name) for name in changed if name in _AGENT_FIELDS}
    _agent_recorded(agent, by=by, created=created, values=values)
    return agent


@transaction.atomic
def api_key_create(
    *,
    agent: Agent,
    scopes: Iterable[str] = (Scope.READ, Scope.WRITE),
    name: str = "",
    data_subject: str = "",
    by: Actor | None,
) -> tuple[ApiKey, str]:
    """Mint a key for ``agent`` and record it as made by ``by`` (the key id and scopes, never the
    secret; ``None``: a test's or benchmark's set-up, not recorded). Returns ``(api_key, raw_key)``;
    the raw key is never stored.

    The raw key has the form ``egm.<schema>.<key_id>.<secret>``: the schema tells the authentication
    which tenant to look in, ``key_id`` finds the row, ``secret`` (43 url-safe characters) proves it.
    ``data_subject``: the end user the key is bound to ("" for none; ``agents.subjects`` says what a
    bound key may read and write). Raises ``InvalidInput`` (field ``agent``) for a deactivated agent
    (the system agent among them): its keys would be refused anyway; ``ValidationError`` for a
    ``data_subject`` over 200 characters.
    """
    if not agent.is_active:
        raise InvalidInput(
            f"Agent {agent.name} is deactivated: it cannot be given a key (reactivate it first).",
            field="agent",
        )
    scope_list = sorted(set(scopes))
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    api_key = ApiKey(
        agent=agent,
        name=name,
        key_id=key_id,
        secret_hash=ApiKey.hash_secret(secret),
        scopes=scope_list,
        data_subject=data_subject,
    )
    api_key.full_clean()
    api_key.save()
    if by is not None:
        change_record(
            by=by,
            action="api_key_create",
            content=f"{by.name} created API key {key_id} for {agent.name} ({', '.join(scope_list)})"
            + (f", bound to data subject {data_subject}." if data_subject else "."),
            payload={"agent": agent.name, "key_id": key_id, "scopes": scope_list, "name": name}
            | ({"data_subject": data_subject} if data_subject else {}),
        )
    return api_key, f"egm.{current_schema()}.{key_id}.{secret}"


@transaction.atomic
def api_key_revoke(*, api_key: ApiKey, by: Actor | None) -> ApiKey:
    """Revoke a key and record it as done by ``by`` (``None``: a test's set-up, not recorded);
    later requests with it get 401. Revoking a revoked key keeps the first time and records
    nothing."""
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
        if by is not None:
            change_record(
                by=by,
                action="api_key_revoke",
                content=f"{by.name} revoked API key {api_key.key_id} of {api_key.agent.name}.",
                payload={"agent": api_key.agent.name, "key_id": api_key.key_id},
            )
    return api_key


@transaction.atomic
def api_key_rename(*, api_key: ApiKey, name: str, by: Actor) -> ApiKey:
    """Change a key's label (its scopes and agent are fixed) as ``by`` asked and record it; the
    same label changes and records nothing."""
    old = ApiKey.objects.get(pk=api_key.pk).name
    if old == name:
        return api_key
    api_key.name = name
    api_key.full_clean()
    api_key.save(update_fields=["name"])
    change_record(
        by=by,
        action="api_key_update",
        content=f"{by.name} renamed API key {api_key.key_id}: {old!r} → {name!r}.",
        payload={"key_id": api_key.key_id, "changes": {"name": [old, name]}},
    )
    return api_key


SYSTEM_AGENT_NAME = "engram-system"


def system_agent_get() -> Agent:
    """The tenant's system agent, author of decisions made by people in the admin (created once).

    It is inactive and has no keys, so nobody can call the API as it.
    """
    agent, _ = Agent.objects.get_or_create(
        name=SYSTEM_AGENT_NAME, defaults={"role": "system", "is_active": False}
    )
    return agent


def idempotency_records_purge(*, older_than: timedelta | None = None) -> int:
    """Delete ``Idempotency-Key`` records past the TTL (``ENGRAM["IDEMPOTENCY_TTL_HOURS"]``) in the
    current tenant; returns how many were deleted."""
    ttl = older_than or timedelta(hours=settings.ENGRAM["IDEMPOTENCY_TTL_HOURS"])
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=timezone.now() - ttl).delete()
    return deleted


# The lock between storing an answer (``api.idempotency``, shared) and withdrawing them (exclusive)
REPLAY_LOCK = "idem-answers"


def replay_answers_withdraw() -> tuple[int, int]:
    """Withdraw every stored answer of the current tenant's replay cache (``IdempotencyRecord``):
    the body goes (null, ``withdrawn_at`` set), the key, fingerprint and status stay, so a retried
    write is still applied once (its replay is a 409 saying why). For an erasure, after it removed
    its rows: the lock makes it wait for the answers being stored and keeps new ones back until it
    commits, so an answer stored later was computed without the erased rows. Returns ``(answers
    withdrawn, watermark)``: every record with an id up to the watermark was stored before."""
    with transaction.atomic():
        advisory_xact_lock(REPLAY_LOCK)
        watermark = IdempotencyRecord.objects.aggregate(top=Max("pk"))["top"] or 0
        withdrawn = IdempotencyRecord.objects.filter(pk__lte=watermark, response_body__isnull=False).update(
            response_body=None, withdrawn_at=timezone.now()
        )
    return withdrawn, watermark
