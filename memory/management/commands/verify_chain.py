"""``manage.py verify_chain --tenant SLUG``: recompute a tenant's episodic hash chain."""

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django_tenants.utils import tenant_context

from memory.episodic.selectors import chain_verify
from tenants.selectors import tenant_get


class Command(BaseCommand):
    help = "Verify the episodic log's hash chain; exits with status 1 at the first broken link."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug (schema name)")

    def handle(self, *args: object, tenant: str, **options: object) -> None:
        obj = tenant_get(schema_name=tenant)
        if obj is None:
            raise CommandError(f"no tenant {tenant!r}")
        with tenant_context(obj):
            report = chain_verify()
        if report.ok:
            self.stdout.write(self.style.SUCCESS(f"chain intact: {report.checked} events verified"))
            return
        where = f"event #{report.broken_seq}" + (f" (id {report.broken_id})" if report.broken_id else "")
        self.stdout.write(
            self.style.ERROR(
                f"chain BROKEN at {where}: {report.reason}; {report.checked} events before it verified"
            )
        )
        raise SystemExit(1)
