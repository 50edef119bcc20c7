"""Settings for the test suite: real PostgreSQL and Redis, fast password hashing."""

import os

from .base import *  # noqa: F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
# One test database per run, so several test runs can share one PostgreSQL server.
DATABASES["default"]["TEST"] = {"NAME": f"test_engram_{os.getpid()}"}  # noqa: F405
