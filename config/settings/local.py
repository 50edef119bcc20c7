"""Settings for a developer machine (``./engram up``)."""

from .base import *  # noqa: F403
from .base import env

# Off unless asked for (DJANGO_DEBUG=1): a debug page shows tracebacks with frame locals (bearer
# keys among them), the URL list and settings to whoever triggers an error. The admin's static
# files are served without it (ENGRAM_SERVE_STATIC, set by ./engram up; see config/asgi.py).
DEBUG = env.bool("DJANGO_DEBUG", default=False)
