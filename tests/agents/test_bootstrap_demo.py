"""``bootstrap_demo`` keeps secrets out of standard output."""

from __future__ import annotations

import io
import stat
from pathlib import Path

from django.core.management import call_command
from django_tenants.utils import tenant_context

from agents.authentication import resolve_api_key
from agents.models import ApiKey


def test_bootstrap_writes_passwords_and_the_key_to_a_private_file_not_stdout(
    tenant_a, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    credentials = tmp_path / "dev" / "credentials"
    out = io.StringIO()
    call_command("bootstrap_demo", slug="alpha", credentials_file=credentials, stdout=out)
    text = credentials.read_text()
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    passwords = [line.rsplit("password ", 1)[1] for line in text.splitlines() if "password " in line]
    keys = [line.rsplit(": ", 1)[1] for line in text.splitlines() if "API key" in line]
    assert len(passwords) == 2 and len(keys) == 1
    for secret in [*passwords, *keys]:
        assert secret not in out.getvalue()
    assert str(credentials) in out.getvalue()
    _, agent, _ = resolve_api_key(keys[0])  # the key in the file is a live one
    assert agent.name == "demo-agent"
    with tenant_context(tenant_a):
        assert ApiKey.objects.filter(agent__name="demo-agent").count() == 1
