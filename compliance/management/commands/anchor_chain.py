"""``manage.py anchor_chain --tenant SLUG [--force]``: sign the tenant's chain head now (an operator's
anchor on demand, beside the beat's schedule)."""

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django_tenants.utils import tenant_context

from compliance import selectors, services
from core.errors import ServiceUnavailable
from tenants.selectors import tenant_get


class Command(BaseCommand):
    help = (
        "Sign the tenant's chain head with the signing key and keep the anchor (and send its copy to "
        "the sink), as the scheduled job does; nothing when that head is anchored already, unless --force."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug (schema name)")
        parser.add_argument("--force", action="store_true", help="anchor even an already anchored head")

    def handle(self, *args: object, tenant: str, force: bool = False, **options: object) -> None:
        obj = tenant_get(schema_name=tenant)
        if obj is None:
            raise CommandError(f"no tenant {tenant!r}")
        with tenant_context(obj):
            try:
                anchor = services.anchor_head(force=force)
            except ServiceUnavailable as exc:
                raise CommandError(exc.message) from None
            if anchor is None:
                head = selectors.chain_head()
                if head.seq == 0:
                    self.stdout.write("the log is empty: nothing to anchor")
                elif selectors.anchor_of(seq=head.seq, hash_value=head.hash) is not None:
                    self.stdout.write(f"the head #{head.seq} is anchored already")
                else:
                    raise CommandError(
                        f"the chain head (#{head.seq}) does not describe the last event: not anchoring "
                        "what a check must report (run verify_chain)"
                    )
                return
        line = f"anchored #{anchor.seq} (hash {anchor.hash}) at {anchor.anchored_at.isoformat()}"
        if anchor.sink:
            line += f"; copy sent to {anchor.sink}" + (
                f" FAILED: {anchor.sink_error}" if anchor.sink_error else ""
            )
        self.stdout.write(line)
