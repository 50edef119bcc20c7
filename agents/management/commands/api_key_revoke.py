"""``manage.py api_key_revoke --tenant SLUG KEY_ID``: revoke a key (it answers 401 from then on)."""

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django_tenants.utils import tenant_context

from agents.models import ApiKey
from agents.services import api_key_revoke
from core.recording import Actor
from tenants.selectors import tenant_get


class Command(BaseCommand):
    help = "Revoke an API key by its key id (the third part of egm.<tenant>.<key id>.<secret>)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key_id")
        parser.add_argument("--tenant", required=True)

    def handle(self, *args: object, key_id: str, tenant: str, **options: object) -> None:
        obj = tenant_get(schema_name=tenant)
        if obj is None:
            raise CommandError(f"no tenant {tenant!r}")
        with tenant_context(obj):
            key = ApiKey.objects.select_related("agent").filter(key_id=key_id).first()
            if key is None:
                raise CommandError(f"no key {key_id!r} in tenant {tenant!r}")
            api_key_revoke(api_key=key, by=Actor.command("api_key_revoke"))
        self.stdout.write(
            f"revoked {key_id} of agent {key.agent.name} at {key.revoked_at:%Y-%m-%d %H:%M:%S} UTC"
        )
