"""``manage.py bootstrap_demo``: the demo tenant, admin users and an agent key (idempotent).

The admin passwords and the key are secrets: they are written to a credentials file readable by
this user only (mode 0600), never to standard output, which ends up in terminal scrollback and logs.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.utils import timezone
from django_tenants.utils import get_public_schema_name, schema_context, tenant_context

from agents.models import Agent
from agents.services import agent_create, api_key_create
from core.recording import Actor, change_record
from core.tenancy import current_schema
from tenants.services import public_tenant_ensure, tenant_create

BY = Actor.command("bootstrap_demo")


def append_private(path: Path, lines: list[str]) -> None:
    """Append ``lines`` to ``path``, created with mode 0600 (and made 0600 if it existed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "a") as handle:
        handle.write("".join(f"{line}\n" for line in lines))


class Command(BaseCommand):
    help = (
        "Create the demo tenant (demo.localhost), admin users and one agent API key, if missing; "
        "new passwords and keys go to a private credentials file."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--slug", default="demo")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--new-key", action="store_true", help="mint another key even if one exists")
        parser.add_argument(
            "--credentials-file",
            type=Path,
            default=Path(settings.BASE_DIR) / "var" / "dev" / "credentials",
            help="where new passwords and keys are written (mode 0600; default var/dev/credentials)",
        )

    def _ensure_admin(self, label: str, secrets_out: list[str]) -> None:
        users = get_user_model().objects
        if users.filter(username="admin").exists():
            self.stdout.write(f"  admin user in {label}: exists (manage.py changepassword to reset)")
            return
        password = os.environ.get("ENGRAM_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        with transaction.atomic():
            user = users.create_superuser("admin", "admin@example.com", password)
            if current_schema() != get_public_schema_name():  # the platform has no trail
                change_record(
                    by=BY,
                    action="user_create",
                    content="bootstrap_demo created user admin (superuser).",
                    payload={"object": "admin", "object_id": str(user.pk), "fields": ["is_superuser"]},
                )
        secrets_out.append(f"{label}: user admin, password {password}")
        self.stdout.write(f"  admin user in {label}: created (password in the credentials file)")

    def handle(
        self, *args: object, slug: str, port: int, new_key: bool, credentials_file: Path, **options: object
    ) -> None:
        found: list[str] = []
        public_tenant_ensure(domain="localhost")
        with schema_context("public"):
            self._ensure_admin(f"platform admin (http://localhost:{port}/admin/)", found)
        tenant, _ = tenant_create(slug=slug, name=slug.capitalize(), domain=f"{slug}.localhost")
        with tenant_context(tenant):
            self._ensure_admin(f"tenant {slug} (http://{slug}.localhost:{port}/admin/)", found)
            agent = Agent.objects.filter(name="demo-agent").first() or agent_create(
                name="demo-agent", role="assistant", by=BY
            )
            if agent.api_keys.filter(revoked_at__isnull=True).exists() and not new_key:
                self.stdout.write(
                    "  agent demo-agent: has a key already (shown only when it was created; "
                    f"`./engram manage api_key_create --tenant {slug} --agent demo-agent` mints another)"
                )
            else:
                _, raw = api_key_create(agent=agent, name="bootstrap", by=BY)
                found.append(f"API key for demo-agent in tenant {slug} (read+write): {raw}")
                self.stdout.write("  agent demo-agent: new API key (in the credentials file)")
        if found:
            append_private(credentials_file, [f"# {timezone.now():%Y-%m-%d %H:%M} UTC", *found])
            self.stdout.write(
                self.style.WARNING(f"  new credentials written to {credentials_file} (readable only by you)")
            )
        # code reaches the API by address (the key names the tenant; Python's resolver does not
        # know *.localhost); the tenant's admin is routed by host name, which browsers resolve
        self.stdout.write(
            self.style.SUCCESS(
                f"Engram is starting (Ctrl-C stops everything)\n"
                f"  API, for code: http://127.0.0.1:{port}/api/v1/  (docs: /api/v1/docs)\n"
                f"  tenant {slug}'s admin, in a browser: http://{slug}.localhost:{port}/admin/\n"
                f"  platform admin, in a browser: http://localhost:{port}/admin/"
            )
        )
