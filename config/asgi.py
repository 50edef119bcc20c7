"""ASGI entry point (uvicorn): serves the API, the admin and the Server-Sent Events streams.

Static files (the admin's CSS and JS, the vendored htmx) are served by Django itself when ``DEBUG``
is on or ``ENGRAM_SERVE_STATIC=1`` is set (the browser tests run uvicorn with the test settings,
where ``DEBUG`` is off). Otherwise whatever fronts the app must serve ``collectstatic``'s output
under ``STATIC_URL``.
"""

import os

from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
application = get_asgi_application()
if settings.DEBUG or os.environ.get("ENGRAM_SERVE_STATIC") == "1":
    # the admin's CSS and JS without a separate static server (developer machine, browser tests)
    application = ASGIStaticFilesHandler(application)
