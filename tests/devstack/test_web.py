"""What ``./engram up`` starts its processes with: DEBUG off, static files, a private /metrics token."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from devstack.web import private_secret, web_environment
from tests.factories import BASE_DIR


def test_engram_up_makes_a_private_metrics_token(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("ENGRAM_METRICS_TOKEN", raising=False)
    monkeypatch.delenv("ENGRAM_METRICS_TOKEN_FILE", raising=False)
    env = web_environment({}, tmp_path)
    token_file = Path(env["ENGRAM_METRICS_TOKEN_FILE"])
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert len(token_file.read_text().strip()) >= 40
    assert private_secret(token_file).read_text() == token_file.read_text()  # kept across restarts


def test_engram_up_runs_with_debug_off() -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_DEBUG", "DJANGO_SETTINGS_MODULE"}}
    out = subprocess.run(
        [sys.executable, "-c", "from config.settings import local; print(local.DEBUG)"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"
    from devstack.web import web_environment

    assert web_environment({})["ENGRAM_SERVE_STATIC"] == "1"  # the admin keeps its CSS without DEBUG
