"""Production settings: every secret comes from the environment (or a ``*_FILE``)."""

from typing import cast

from .base import *  # noqa: F403
from .base import LOGGING as BASE_LOGGING
from .base import env, env_secret

SECRET_KEY = env_secret("DJANGO_SECRET_KEY")
if not SECRET_KEY:
    raise RuntimeError("DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE) must be set in production")
DEBUG = False
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# every page over HTTPS (the proxy in front terminates TLS and sends X-Forwarded-Proto); /healthz and
# /readyz are answered before this redirect (api.ops), and Prometheus scrapes /metrics in the clear
# inside the network
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=60 * 60 * 24 * 365)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
# the browsers' preload list binds the whole domain for months: the domain's owner opts in
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=False)
if not SECURE_HSTS_PRELOAD:
    SILENCED_SYSTEM_CHECKS = ["security.W021"]
SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
CSRF_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
# /metrics lists every tenant's agents: behind a proxy every client is "loopback", so production
# serves it with ENGRAM_METRICS_TOKEN only
ENGRAM = {**ENGRAM, "METRICS_LOOPBACK": False}  # noqa: F405 (a copy: base's dict stays as it is)
# one JSON object per log line, with request id and tenant (core.logs); DJANGO_LOG_FORMAT=text for plain lines
_handlers = cast(dict[str, dict[str, str]], BASE_LOGGING["handlers"])
_console = {**_handlers["console"], "formatter": env("DJANGO_LOG_FORMAT", default="json")}
LOGGING = {**BASE_LOGGING, "handlers": {**_handlers, "console": _console}}  # a copy: base's stays
CELERY_WORKER_HIJACK_ROOT_LOGGER = _console["formatter"] != "json"
