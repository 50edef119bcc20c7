"""Secrets stay out of logs, and /metrics needs its token (issue 7, items 13 and 14)."""

from __future__ import annotations

import io
import stat
from pathlib import Path

from django.core.management import call_command
from django.test import Client
from django_tenants.utils import tenant_context

from agents.authentication import resolve_api_key
from agents.models import ApiKey
from devstack.web import private_secret, web_environment


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


def test_engram_up_makes_a_private_metrics_token(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("ENGRAM_METRICS_TOKEN", raising=False)
    monkeypatch.delenv("ENGRAM_METRICS_TOKEN_FILE", raising=False)
    env = web_environment({}, tmp_path)
    token_file = Path(env["ENGRAM_METRICS_TOKEN_FILE"])
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert len(token_file.read_text().strip()) >= 40
    assert private_secret(token_file).read_text() == token_file.read_text()  # kept across restarts


def test_without_a_token_production_refuses_loopback_scrapers(db, settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import importlib

    monkeypatch.setenv("DJANGO_SECRET_KEY", "production-test-key-" + "x" * 40)
    production = importlib.import_module("config.settings.production")
    assert production.ENGRAM["METRICS_LOOPBACK"] is False
    settings.ENGRAM = {**settings.ENGRAM, "METRICS_TOKEN": "", "METRICS_LOOPBACK": False}
    assert Client().get("/metrics").status_code == 403  # a loopback client, as behind a local proxy
