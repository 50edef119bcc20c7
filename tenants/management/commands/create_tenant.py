"""``manage.py create_tenant SLUG [--name N] [--domain HOST]``: idempotent tenant provisioning."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenants.services import tenant_create


class Command(BaseCommand):
    help = "Create a tenant (schema, migrations, domain); does nothing if it already exists."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="schema name, e.g. acme")
        parser.add_argument("--name", default=None, help="display name (default: the slug)")
        parser.add_argument("--domain", default=None, help="admin host name, e.g. acme.localhost")

    def handle(
        self, *args: object, slug: str, name: str | None, domain: str | None, **options: object
    ) -> None:
        try:
            tenant, created = tenant_create(slug=slug, name=name, domain=domain)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(f"tenant {tenant.schema_name}: {'created' if created else 'already exists'}")
