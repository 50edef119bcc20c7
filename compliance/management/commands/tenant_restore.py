"""``manage.py tenant_restore --in FILE``: restore a tenant that ``tenant_backup`` wrote."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from compliance.services.backup import tenant_restore
from core.errors import DomainError


class Command(BaseCommand):
    help = (
        "Restore a tenant from a tenant_backup file into this server (schema, row, domains, role, "
        "Redis keys), rebuild its Neo4j projection and verify its trail; exits with status 1 if "
        "the trail does not verify."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--in", dest="path", required=True, help="the backup file")

    def handle(self, *args: object, path: str, **options: object) -> None:
        try:
            result = tenant_restore(path=Path(path))
        except (DomainError, RuntimeError) as exc:
            raise CommandError(str(getattr(exc, "message", exc))) from None
        graph = "no Neo4j" if result.facts_projected is None else f"{result.facts_projected} facts projected"
        self.stdout.write(
            f"restored {result.tenant.schema_name}: {result.redis_keys} Redis keys, {graph}, "
            f"{len(result.erasures_reapplied)} erasures re-applied, "
            f"{result.seconds:.1f} s"
        )
        if not result.trail_ok:
            self.stdout.write(self.style.ERROR("the restored trail does NOT verify: run verify_chain"))
            raise SystemExit(1)
        self.stdout.write(self.style.SUCCESS(f"trail intact: {result.events_checked} events verified"))
