"""``manage.py migrate_schemas`` (and ``migrate``): django-tenants' command, run as the maintenance
role so that it owns every schema and table it creates (issue 12).

Before migrating, ``tenants.roles.database_prepare`` readies the database as the login role (the
maintenance role, its grants, pgvector, objects created before issue 12); after, every tenant whose
schema was migrated gets its role and grants checked (``tenant_roles_sync``). Called from inside
``maintenance()`` (tenant creation migrating its new schema) it only migrates.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django_tenants.management.commands.migrate_schemas import MigrateSchemasCommand
from django_tenants.utils import get_public_schema_name

from core.tasks import tenant_schemas
from core.tenancy import maintenance, roles_enabled
from tenants.roles import database_prepare, tenant_roles_sync


class Command(MigrateSchemasCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        if not roles_enabled() or connection.role_override == "maintenance":  # type: ignore[attr-defined]
            super().handle(*args, **options)
            return
        for note in database_prepare():
            self.stdout.write(note)
        with maintenance():
            super().handle(*args, **options)
            if self.sync_tenant:
                public = get_public_schema_name()
                if self.schema_name and self.schema_name != public:
                    schemas = [self.schema_name]
                else:
                    schemas = tenant_schemas()
                tenant_roles_sync(schema_names=schemas)
