"""``manage.py tenant_move --tenant SLUG --to ALIAS``: move a tenant to another PostgreSQL server."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from compliance.services.backup import tenant_move
from core.errors import DomainError
from tenants.selectors import tenant_get


class Command(BaseCommand):
    help = (
        "Move a tenant's schema to another PostgreSQL server of ENGRAM_DB_SERVERS and switch it "
        "there; its requests answer 503 for the pause, other tenants are not touched (decision 0071)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug (schema name)")
        parser.add_argument("--to", required=True, help="the server's alias (\"default\": DATABASE_URL's)")
        parser.add_argument(
            "--settle",
            type=float,
            default=None,
            help="seconds to wait after pausing (default: the tenant cache + 1)",
        )

    def handle(self, *args: object, tenant: str, to: str, settle: float | None, **options: object) -> None:
        obj = tenant_get(schema_name=tenant)
        if obj is None:
            raise CommandError(f"no tenant {tenant!r}")
        try:
            result = tenant_move(tenant=obj, to=to, settle_seconds=settle)
        except (DomainError, RuntimeError) as exc:
            raise CommandError(str(getattr(exc, "message", exc))) from None
        self.stdout.write(
            f"moved {tenant} from {result.source} to {result.target}: paused {result.pause_seconds:.2f} s "
            f"(copy {result.copy_seconds:.2f} s), {result.events_checked} events verified"
        )
