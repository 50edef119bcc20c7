"""Production settings: every secret comes from the environment (or a ``*_FILE``)."""

from .base import *  # noqa: F403
from .base import env, env_secret

SECRET_KEY = env_secret("DJANGO_SECRET_KEY")
if not SECRET_KEY:
    raise RuntimeError("DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE) must be set in production")
DEBUG = False
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
CSRF_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
# /metrics lists every tenant's agents: behind a proxy every client is "loopback", so production
# serves it with ENGRAM_METRICS_TOKEN only
ENGRAM = {**ENGRAM, "METRICS_LOOPBACK": False}  # noqa: F405 (a copy: base's dict stays as it is)
