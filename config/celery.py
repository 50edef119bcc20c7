"""The Celery app. Tasks carry their tenant (tenant-schemas-celery) and run in its schema; every
task's base is ``core.tasks.TenantTask`` (late acknowledgement, best-effort queueing on commit)."""

import os

from tenant_schemas_celery.app import CeleryApp

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = CeleryApp("engram", task_cls="core.tasks:TenantTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()  # <app>.tasks of every installed app
# core's fan-out and the layers' own tasks modules (memory/<layer>/tasks.py), found by package
app.autodiscover_tasks(
    ["core", "memory.episodic", "memory.knowledge", "memory.semantic", "memory.consolidation", "memory.store"]
)
