"""``manage.py tenant_logins_sync``: give every tenant's login the password derived from the current
``ENGRAM["DB_TENANT_SECRET"]`` (run after changing the secret, then restart the web and worker
processes) and check its grants (``tenants.roles.tenant_roles_sync``). ``migrate_schemas`` does the
same after migrating."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from core.tasks import tenant_schemas
from tenants.roles import tenant_roles_sync


class Command(BaseCommand):
    help = "Re-derive every tenant login's password from the current secret and check its grants."

    def handle(self, *args: Any, **options: Any) -> None:
        done = tenant_roles_sync(schema_names=tenant_schemas())
        self.stdout.write(f"{done} tenant logins updated")
