"""Tenant provisioning."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django_tenants.utils import get_public_schema_name, schema_context

from .models import Domain, ErasureLedgerEntry, Tenant, schema_name_validator


def tenant_create(*, slug: str, name: str | None = None, domain: str | None = None) -> tuple[Tenant, bool]:
    """Create the tenant ``slug`` with its schema and domain, or return the existing one.

    Idempotent: calling it again with the same slug changes nothing but adds a missing domain.
    Returns ``(tenant, created)``. Raises ``ValidationError`` for a slug that is not a valid schema
    name or is the public schema.
    """
    schema_name_validator(slug)
    if slug == get_public_schema_name():
        raise ValidationError({"slug": "The public schema is not a tenant."})
    tenant = Tenant.objects.filter(schema_name=slug).first()
    created = tenant is None
    if tenant is None:
        tenant = Tenant(schema_name=slug, name=name or slug)
        tenant.full_clean()
        # creates the schema and runs the tenant migrations in it, without listing each migration
        # (a service reports through its return value; migrate_schemas is where they are listed)
        tenant.save(verbosity=0)
    if domain:
        with transaction.atomic():
            Domain.objects.get_or_create(
                domain=domain, defaults={"tenant": tenant, "is_primary": not tenant.domains.exists()}
            )
    return tenant, created


def public_tenant_ensure(*, domain: str = "localhost") -> Tenant:
    """Create the public-schema tenant row (needed by django-tenants for the platform admin)."""
    public = get_public_schema_name()
    tenant = Tenant.objects.filter(schema_name=public).first()
    if tenant is None:
        tenant = Tenant(schema_name=public, name="Platform")
        tenant.save()
    Domain.objects.get_or_create(domain=domain, defaults={"tenant": tenant, "is_primary": True})
    return tenant


def tenant_move_mark(*, tenant: Tenant, moving: bool, database: str | None = None) -> None:
    """Set ``tenant``'s ``moving`` flag (its requests answer 503 while it is set) and, with
    ``database``, switch the server its schema is on, in one update of its row (a move to another
    PostgreSQL server, ``compliance.services.move.tenant_move``: decisions 0071, 0090). The caller
    records the move in the tenant's trail; the instance is updated too."""
    fields: dict[str, object] = {"moving": moving}
    if database is not None:
        fields["database"] = database
    with schema_context(get_public_schema_name()):
        Tenant.objects.filter(pk=tenant.pk).update(**fields)
    tenant.moving = moving
    if database is not None:
        tenant.database = database


def erasure_ledger_note(
    *,
    schema_name: str,
    erasure_id: Any,
    kind: str,
    value_digest: str,
    finished_at: datetime,
    receipt_sha256: str,
) -> None:
    """Keep a completed erasure of the tenant ``schema_name`` in the public schema's ledger
    (``ErasureLedgerEntry``; idempotent by ``erasure_id``), for ``tenant_restore`` to re-apply.
    Call outside a transaction of a tenant's login (the write is the public schema's)."""
    with schema_context(get_public_schema_name()), transaction.atomic():
        ErasureLedgerEntry.objects.get_or_create(
            erasure_id=erasure_id,
            defaults={
                "schema_name": schema_name,
                "kind": kind,
                "value_digest": value_digest,
                "finished_at": finished_at,
                "receipt_sha256": receipt_sha256,
            },
        )


def erasure_ledger(*, schema_name: str) -> list[ErasureLedgerEntry]:
    """The ledger's completed erasures of the tenant ``schema_name``, oldest first."""
    with schema_context(get_public_schema_name()):
        return list(ErasureLedgerEntry.objects.filter(schema_name=schema_name).order_by("finished_at"))
