"""The web server and the environment of the processes ``./engram up`` starts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from devstack import VAR_DIR


def uvicorn_command(
    port: int, *, log_level: str = "warning", workers: int = 1, app: str = "config.asgi:application"
) -> list[str]:
    """The command line of the ASGI web server for ``app`` on 127.0.0.1:``port`` (no access log), with
    the h11 protocol that turns Nagle's algorithm off (``config.server``: with ``workers`` > 1
    uvicorn leaves it on, and each keep-alive request waited ~40 ms for a delayed ACK)."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        app,
        "--http",
        "config.server:NoDelayH11Protocol",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        log_level,
        "--no-access-log",
    ]


def wait_for_http(url: str, process: subprocess.Popen[bytes] | None = None, timeout: float = 30.0) -> None:
    """Poll ``url`` until the server answers (any status). Raises ``RuntimeError`` if ``process``
    exits or ``timeout`` seconds pass first."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server for {url} exited with status {process.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer within {timeout:.0f} s") from None
            time.sleep(0.2)


DEV_DIR = VAR_DIR / "dev"


def private_secret(path: Path) -> Path:
    """A file holding a random token (43 url-safe characters), readable by this user only (mode
    0600); made on first use and kept. Returns ``path``."""
    import secrets

    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32) + "\n")
    os.chmod(path, 0o600)
    return path


def private_signing_key(path: Path) -> Path:
    """A file holding a new Ed25519 private key (PEM, PKCS #8), readable by this user only (mode
    0600); made on first use and kept, since anchors and exports signed with it are checked against
    its public key. Its public half is kept beside it (``public_signing_key``). Returns ``path``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
    os.chmod(path, 0o600)
    return path


def public_signing_key(private: Path) -> Path:
    """The public half of the key in ``private`` (PEM, SubjectPublicKeyInfo), written beside it as
    ``<name>.pub.pem`` (readable by all: it is public) and rewritten when it no longer matches.
    All that checking signatures needs (``verify_chain``). Returns its path."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(private.read_bytes(), password=None)
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    path = private.with_name(private.name.removesuffix(".pem") + ".pub.pem")
    if not path.exists() or path.read_bytes() != pem:
        path.write_bytes(pem)
    return path


def signing_environment(env: dict[str, str], dev_dir: Path) -> dict[str, str]:
    """The keys of ``./engram up`` for ``env``: the private key (``ENGRAM_SIGNING_KEY_FILE``, made on
    first use in ``<dev_dir>/secrets/signing-key.pem`` unless ``ENGRAM_SIGNING_KEY`` is set) and its
    public half (``ENGRAM_SIGNING_PUBLIC_KEY_FILE``), as they are in ``env`` or added."""
    env = dict(env)
    if not env.get("ENGRAM_SIGNING_KEY") and not env.get("ENGRAM_SIGNING_KEY_FILE"):
        env["ENGRAM_SIGNING_KEY_FILE"] = str(private_signing_key(dev_dir / "secrets" / "signing-key.pem"))
    if env.get("ENGRAM_SIGNING_KEY_FILE") and not (
        env.get("ENGRAM_SIGNING_PUBLIC_KEY") or env.get("ENGRAM_SIGNING_PUBLIC_KEY_FILE")
    ):
        env["ENGRAM_SIGNING_PUBLIC_KEY_FILE"] = str(public_signing_key(Path(env["ENGRAM_SIGNING_KEY_FILE"])))
    return env


def manage_environment(svc: dict[str, str], dev_dir: Path = DEV_DIR) -> dict[str, str]:
    """The environment of ``./engram manage``: the services' URLs, the local settings, and the keys
    of ``./engram up`` (``signing_environment``), so ``verify_chain`` checks and ``anchor_chain``
    signs with the same key as the running stack."""
    env = {**os.environ, **svc, "DJANGO_SETTINGS_MODULE": "config.settings.local"}
    return signing_environment(env, dev_dir)


def web_environment(svc: dict[str, str], dev_dir: Path = DEV_DIR) -> dict[str, str]:
    """The environment of ``./engram up``'s web server, Celery and management commands: the
    services' URLs, the local settings (``DEBUG`` off unless ``DJANGO_DEBUG=1``), the admin's
    static files served by the app itself, and a ``/metrics`` token kept in
    ``<dev_dir>/secrets/metrics-token`` (unless ``ENGRAM_METRICS_TOKEN`` is set), so even loopback
    scrapers need it, and the Ed25519 key that signs anchors and exports in
    ``<dev_dir>/secrets/signing-key.pem`` (unless ``ENGRAM_SIGNING_KEY`` is set)."""
    env = {
        **os.environ,
        **svc,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "PYTHONUNBUFFERED": "1",
        "ENGRAM_SERVE_STATIC": "1",
    }
    if not env.get("ENGRAM_METRICS_TOKEN") and not env.get("ENGRAM_METRICS_TOKEN_FILE"):
        env["ENGRAM_METRICS_TOKEN_FILE"] = str(private_secret(dev_dir / "secrets" / "metrics-token"))
    env = signing_environment(env, dev_dir)
    if not env.get("ENGRAM_ANCHOR_SINK"):
        # a copy of every anchor outside the database
        env["ENGRAM_ANCHOR_SINK"] = str(dev_dir / "anchors.jsonl")
    return env
