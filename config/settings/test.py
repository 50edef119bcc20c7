"""Settings for the test suite: real PostgreSQL and Redis, fast password hashing."""

import os

from .base import *  # noqa: F403
from .base import env

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
# Each test runs in one transaction on one connection and switches tenants inside it, which a
# login per tenant cannot do: this process switches with SET ROLE (still one role per tenant). The
# servers and workers the tests start run with logins (tests/factories.py test_database_env).
ENGRAM["TENANT_LOGINS"] = env.bool("ENGRAM_TENANT_LOGINS", default=False)  # noqa: F405
# A loaded machine (CI beside other runs) may take seconds to start a backend: the suite's connections
# wait up to 10 s, so one slow start does not make this process refuse connections for a while
# (core/db/availability.py). tests/core/test_database_down.py gives its server the default of 2 s.
if "DATABASE_CONNECT_TIMEOUT" not in os.environ:
    DATABASES["default"]["OPTIONS"]["connect_timeout"] = 10  # noqa: F405
# One test database per run, so several test runs can share one PostgreSQL server.
DATABASES["default"]["TEST"] = {"NAME": f"test_engram_{os.getpid()}"}  # noqa: F405

# Anchors and exports need a signing key: one per checkout, made on first use (the Celery worker and
# web servers the tests start read the same file)
_SIGNING_KEY_FILE = BASE_DIR / "var" / "test" / "secrets" / "signing-key.pem"  # noqa: F405
if not ENGRAM["SIGNING_KEY"]:  # noqa: F405
    if not _SIGNING_KEY_FILE.exists():
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        _SIGNING_KEY_FILE.parent.mkdir(parents=True, exist_ok=True)
        _pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        _fd = os.open(_SIGNING_KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(_fd, "wb") as _handle:
            _handle.write(_pem)
    ENGRAM["SIGNING_KEY"] = _SIGNING_KEY_FILE.read_text()  # noqa: F405
ENGRAM["EXPORT_DIR"] = str(BASE_DIR / "var" / "test" / "exports")  # noqa: F405
