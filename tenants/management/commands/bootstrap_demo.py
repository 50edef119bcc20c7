"""``manage.py bootstrap_demo``: the demo tenant, an admin user and an agent key (idempotent)."""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django_tenants.utils import schema_context, tenant_context

from agents.models import Agent
from agents.services import agent_create, api_key_create
from tenants.services import public_tenant_ensure, tenant_create


class Command(BaseCommand):
    help = "Create the demo tenant (demo.localhost), admin users and one agent API key, if missing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--slug", default="demo")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--new-key", action="store_true", help="mint another key even if one exists")

    def _ensure_admin(self, label: str) -> None:
        users = get_user_model().objects
        if users.filter(username="admin").exists():
            self.stdout.write(f"  admin user in {label}: exists (manage.py changepassword to reset)")
            return
        password = os.environ.get("ENGRAM_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        users.create_superuser("admin", "admin@example.com", password)
        self.stdout.write(f"  admin user in {label}: admin / {password}")

    def handle(self, *args: object, slug: str, port: int, new_key: bool, **options: object) -> None:
        public_tenant_ensure(domain="localhost")
        with schema_context("public"):
            self._ensure_admin(f"platform admin (http://localhost:{port}/admin/)")
        tenant, _ = tenant_create(slug=slug, name=slug.capitalize(), domain=f"{slug}.localhost")
        with tenant_context(tenant):
            self._ensure_admin(f"tenant {slug} (http://{slug}.localhost:{port}/admin/)")
            agent = Agent.objects.filter(name="demo-agent").first() or agent_create(
                name="demo-agent", role="assistant"
            )
            if agent.api_keys.filter(revoked_at__isnull=True).exists() and not new_key:
                self.stdout.write(
                    "  agent demo-agent: has a key already (shown only when it was created; "
                    "`./engram manage api_key_create --tenant demo --agent demo-agent` mints another)"
                )
            else:
                _, raw = api_key_create(agent=agent, name="bootstrap")
                self.stdout.write(
                    self.style.WARNING(f"  API key for demo-agent (read+write, shown once):\n    {raw}")
                )
        self.stdout.write(
            self.style.SUCCESS(
                f"Engram is starting on http://{slug}.localhost:{port}/  (Ctrl-C stops everything)"
            )
        )
