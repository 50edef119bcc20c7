"""``manage.py tenant_logins_sync``: give every tenant's login the password derived from the current
``ENGRAM["DB_TENANT_SECRET"]`` (run after changing the secret, then restart the web and worker
processes) and check its grants (``tenants.roles.tenant_roles_sync``). ``migrate_schemas`` does the
same after migrating."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django_tenants.utils import get_public_schema_name

from tenants.models import Tenant
from tenants.roles import tenant_roles_sync


class Command(BaseCommand):
    help = "Re-derive every tenant login's password from the current secret and check its grants."

    def handle(self, *args: Any, **options: Any) -> None:
        schemas = Tenant.objects.exclude(schema_name=get_public_schema_name()).values_list(
            "schema_name", flat=True
        )
        done = tenant_roles_sync(schema_names=list(schemas))
        self.stdout.write(f"{done} tenant logins updated")
