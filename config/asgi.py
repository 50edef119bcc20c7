"""ASGI entry point (uvicorn): serves the API, the admin and the Server-Sent Events streams."""

import os

from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
application = get_asgi_application()
if settings.DEBUG:
    # the admin's CSS and JS without a separate static server, on a developer machine only
    application = ASGIStaticFilesHandler(application)
