"""Reads of the tenants table."""

from __future__ import annotations

from django_tenants.utils import get_public_schema_name, schema_context

from .models import Tenant


def tenant_get(*, schema_name: str) -> Tenant | None:
    """The tenant whose schema is ``schema_name`` (never the public schema's row), or ``None``.

    Read in the public schema whatever schema is active, as the public schema's work (commands
    resolving ``--tenant``): a tenant's role may not read the tenants table (issue 12)."""
    public = get_public_schema_name()
    with schema_context(public):
        return Tenant.objects.exclude(schema_name=public).filter(schema_name=schema_name).first()
