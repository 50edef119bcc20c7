"""``manage.py api_key_create --tenant SLUG --agent NAME [--scopes read,write] [--data-subject ID]``."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django_tenants.utils import tenant_context

from agents.models import Agent, Scope
from agents.services import agent_create, api_key_create
from core.errors import InvalidInput
from core.recording import Actor
from tenants.selectors import tenant_get


class Command(BaseCommand):
    help = "Mint an API key for an agent (created if missing); the key is printed once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--agent", required=True)
        parser.add_argument("--role", default="")
        parser.add_argument("--scopes", default="read,write")
        parser.add_argument(
            "--data-subject",
            default="",
            help="bind the key to this end user: it reads and writes only that subject's data",
        )

    def handle(
        self,
        *args: object,
        tenant: str,
        agent: str,
        role: str,
        scopes: str,
        data_subject: str,
        **options: object,
    ) -> None:
        wanted = [s.strip() for s in scopes.split(",") if s.strip()]
        if not wanted or set(wanted) - set(Scope.values):
            raise CommandError(f"--scopes must be a comma list of {', '.join(Scope.values)}")
        obj = tenant_get(schema_name=tenant)
        if obj is None:
            raise CommandError(f"no tenant {tenant!r}")
        by = Actor.command("api_key_create")
        with tenant_context(obj):
            agent_obj = Agent.objects.filter(name=agent).first() or agent_create(name=agent, role=role, by=by)
            try:
                _, raw = api_key_create(
                    agent=agent_obj, scopes=wanted, name="cli", data_subject=data_subject.strip(), by=by
                )
            except InvalidInput as exc:
                raise CommandError(exc.message) from None
            except ValidationError as exc:
                raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(raw)
