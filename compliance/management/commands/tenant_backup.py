"""``manage.py tenant_backup --tenant SLUG --out FILE``: one tenant's schema and Redis keys in a file."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from compliance.services.backup import tenant_backup
from core.errors import DomainError
from tenants.selectors import tenant_get


class Command(BaseCommand):
    help = (
        "Back up one tenant (its schema, its row and domains, its Redis keys) into FILE, for "
        "tenant_restore on this or another server (docs/operations/backup.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug (schema name)")
        parser.add_argument("--out", required=True, help="the file to write (replaced if it exists)")

    def handle(self, *args: object, tenant: str, out: str, **options: object) -> None:
        obj = tenant_get(schema_name=tenant)
        if obj is None:
            raise CommandError(f"no tenant {tenant!r}")
        try:
            result = tenant_backup(tenant=obj, out=Path(out))
        except (DomainError, RuntimeError) as exc:
            raise CommandError(str(getattr(exc, "message", exc))) from None
        self.stdout.write(
            f"backed up {tenant} to {result.path}: {result.size} bytes, {result.redis_keys} Redis keys, "
            f"{result.seconds:.1f} s"
        )
