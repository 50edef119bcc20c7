"""The test settings with the probes of ``tests.core.role_probe`` routed (for a real server)."""

from config.settings.test import *  # noqa: F403

ROOT_URLCONF = "tests.core.role_probe"
PUBLIC_SCHEMA_URLCONF = "tests.core.role_probe"
