"""``manage.py graph_rebuild --tenant SLUG``: re-project a tenant's knowledge graph into Neo4j."""

import time

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django_tenants.utils import tenant_context

from memory.knowledge.projection import graph_rebuild
from tenants.selectors import tenant_get


class Command(BaseCommand):
    help = "Delete the tenant's Neo4j projection and rebuild it from PostgreSQL (the system of record)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)

    def handle(self, *args: object, tenant: str, **options: object) -> None:
        obj = tenant_get(schema_name=tenant)
        if obj is None:
            raise CommandError(f"no tenant {tenant!r}")
        started = time.perf_counter()
        with tenant_context(obj):
            try:
                count = graph_rebuild()
            except RuntimeError as exc:
                raise CommandError(str(exc)) from exc
        self.stdout.write(f"projected {count} facts for {tenant} in {time.perf_counter() - started:.1f} s")
