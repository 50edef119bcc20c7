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


def test_engram_up_makes_a_private_signing_key_and_an_anchor_sink(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    for name in ("ENGRAM_SIGNING_KEY", "ENGRAM_SIGNING_KEY_FILE", "ENGRAM_ANCHOR_SINK"):
        monkeypatch.delenv(name, raising=False)
    env = web_environment({}, tmp_path)
    key_file = Path(env["ENGRAM_SIGNING_KEY_FILE"])
    assert key_file == tmp_path / "secrets" / "signing-key.pem"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    first = key_file.read_bytes()
    assert Path(web_environment({}, tmp_path)["ENGRAM_SIGNING_KEY_FILE"]).read_bytes() == first  # kept
    assert env["ENGRAM_ANCHOR_SINK"] == str(tmp_path / "anchors.jsonl")
