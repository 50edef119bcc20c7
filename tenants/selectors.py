"""Reads of the tenants table."""

from __future__ import annotations

from django_tenants.utils import get_public_schema_name, schema_context

from .models import Tenant


def tenant_get(*, schema_name: str, active_only: bool = False) -> Tenant | None:
    """The tenant whose schema is ``schema_name`` (never the public schema's row; with
    ``active_only``, never a deactivated one), or ``None``.

    Read in the public schema whatever schema is active, as the public schema's work (keys naming
    their tenant, commands resolving ``--tenant``): a tenant's role may not read the tenants table
    (issue 12). A tenant being created is not found until its role and grants have committed with
    its row (``Tenant.save``)."""
    public = get_public_schema_name()
    with schema_context(public):
        tenants = Tenant.objects.exclude(schema_name=public).filter(schema_name=schema_name)
        if active_only:
            tenants = tenants.filter(is_active=True)
        return tenants.first()
