"""``manage.py tenant_move --tenant SLUG --to ALIAS``: move a tenant to another PostgreSQL server."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from compliance.services.move import WAIT_SECONDS, tenant_move
from core.errors import DomainError
from tenants.selectors import tenant_get


class Command(BaseCommand):
    help = (
        "Move a tenant's schema to another PostgreSQL server of ENGRAM_DB_SERVERS and switch it "
        "there: its rows are copied by logical replication while it works, then its requests answer "
        "503 for the pause (catch up and switch); other tenants are not touched (decisions 0071, 0090, 0103)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug (schema name)")
        parser.add_argument("--to", required=True, help="the server's alias (\"default\": DATABASE_URL's)")
        parser.add_argument(
            "--wait",
            type=float,
            default=WAIT_SECONDS,
            help=f"seconds to wait for the tenant's work in flight before giving up (default {WAIT_SECONDS:g})",
        )

        parser.add_argument(
            "--locked-copy",
            action="store_true",
            help="copy with pg_dump inside the pause instead of by replication (a source without "
            "wal_level = logical): the pause then lasts as long as the copy",
        )

    def handle(
        self, *args: object, tenant: str, to: str, wait: float, locked_copy: bool, **options: object
    ) -> None:
        obj = tenant_get(schema_name=tenant)
        if obj is None:
            raise CommandError(f"no tenant {tenant!r}")
        try:
            result = tenant_move(tenant=obj, to=to, wait_seconds=wait, locked_copy=locked_copy)
        except (DomainError, RuntimeError) as exc:
            raise CommandError(str(getattr(exc, "message", exc))) from None
        self.stdout.write(
            f"moved {tenant} from {result.source} to {result.target} by {result.method}: "
            f"paused {result.pause_seconds:.2f} s (waited {result.wait_seconds:.2f} s for work in flight), "
            f"copy {result.copy_seconds:.2f} s, total {result.total_seconds:.2f} s, "
            f"{result.events_checked} events verified"
        )
