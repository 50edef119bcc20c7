"""The Celery app. Tasks carry their tenant (tenant-schemas-celery) and run in its schema."""

import os

from tenant_schemas_celery.app import CeleryApp

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = CeleryApp("engram")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
