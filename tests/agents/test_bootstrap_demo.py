"""``bootstrap_demo`` keeps secrets out of standard output."""

from __future__ import annotations

import io
import re
import socket
import stat
from pathlib import Path
from urllib.parse import urlsplit

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


def test_bootstrap_prints_an_api_url_that_code_can_reach(tenant_a, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The API's URL is printed with a host name any resolver knows (Python's does not resolve
    ``demo.localhost``; the key names the tenant, so the API needs no tenant host); the tenant's
    admin, which is routed by host name, keeps its ``<slug>.localhost`` URL for the browser."""
    out = io.StringIO()
    call_command("bootstrap_demo", slug="alpha", port=8123, credentials_file=tmp_path / "c", stdout=out)
    printed = out.getvalue()
    (api,) = re.findall(r"API[^\n]*?(http://\S+)", printed)
    assert api == "http://127.0.0.1:8123/api/v1/"
    socket.getaddrinfo(urlsplit(api).hostname, 8123)  # resolves (raises otherwise)
    assert "http://alpha.localhost:8123/admin/" in printed
