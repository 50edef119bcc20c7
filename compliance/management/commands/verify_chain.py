"""``manage.py verify_chain --tenant SLUG [--anchors-file FILE] [--public-key FILE]``: verify a
tenant's trail with the public key alone."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django_tenants.utils import tenant_context

from compliance.signing import public_key_from_pem
from compliance.verification import sink_records, trail_verify
from core.errors import ServiceUnavailable
from tenants.selectors import tenant_get


class Command(BaseCommand):
    help = (
        "Verify the episodic log's hash chain, its signed anchors and the signed decisions behind its "
        "redactions, with the public key alone; names every tampering found and exits with status 1 "
        "if there is any."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug (schema name)")
        parser.add_argument(
            "--anchors-file", help="also check the anchors kept outside the database (the sink file)"
        )
        parser.add_argument(
            "--public-key",
            help="the signing key's public half (PEM, as the admin's 'public key' link downloads it); "
            "default: ENGRAM_SIGNING_PUBLIC_KEY_FILE, or the signing key's half",
        )

    def handle(
        self,
        *args: object,
        tenant: str,
        anchors_file: str | None = None,
        public_key: str | None = None,
        **options: object,
    ) -> None:
        obj = tenant_get(schema_name=tenant)
        if obj is None:
            raise CommandError(f"no tenant {tenant!r}")
        try:
            key = public_key_from_pem(Path(public_key).read_bytes()) if public_key else None
            with tenant_context(obj):
                report = trail_verify(
                    extra_anchors=sink_records(anchors_file) if anchors_file else (), key=key
                )
        except ServiceUnavailable as exc:
            raise CommandError(exc.message) from None
        except OSError as exc:
            raise CommandError(f"cannot read {exc.filename}: {exc.strerror}") from None
        chain = report.chain
        if report.ok:
            self.stdout.write(
                self.style.SUCCESS(
                    f"chain intact: {chain.checked} events verified"
                    + (f" ({chain.redacted} redacted)" if chain.redacted else "")
                    + f", {report.anchors_trusted} anchors checked"
                )
            )
            return
        first = report.findings[0]
        where = f"event #{first.seq}" if first.seq is not None else "the chain"
        if chain.broken_id and first in chain.findings[:1]:
            where += f" (id {chain.broken_id})"
        self.stdout.write(self.style.ERROR(f"chain BROKEN at {where}: {first.message}"))
        for finding in report.findings:
            self.stdout.write(f"  {finding.kind}: {finding.message}")
        self.stdout.write(f"{chain.checked} events checked, {report.anchors_trusted} anchors trusted")
        raise SystemExit(1)
