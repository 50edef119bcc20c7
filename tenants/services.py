"""Tenant provisioning."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django_tenants.utils import get_public_schema_name, schema_context

from .models import Domain, Tenant, schema_name_validator


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
    PostgreSQL server, ``compliance.services.backup.tenant_move``: decision 0071). The caller
    records the move in the tenant's trail; the instance is updated too."""
    fields: dict[str, object] = {"moving": moving}
    if database is not None:
        fields["database"] = database
    with schema_context(get_public_schema_name()):
        Tenant.objects.filter(pk=tenant.pk).update(**fields)
    tenant.moving = moving
    if database is not None:
        tenant.database = database
