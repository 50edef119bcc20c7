"""The Celery app. Tasks carry their tenant (tenant-schemas-celery) and run in its schema; every
task's base is ``core.tasks.TenantTask`` (late acknowledgement, best-effort queueing on commit)."""

import os

from celery.signals import task_postrun, task_prerun
from tenant_schemas_celery.app import CeleryApp

from core.logs import REQUEST_ID

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = CeleryApp("engram", task_cls="core.tasks:TenantTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()  # <app>.tasks of every installed app
# core's fan-out and the layers' own tasks modules (memory/<layer>/tasks.py), found by package
app.autodiscover_tasks(
    [
        "core",
        "memory.episodic",
        "memory.knowledge",
        "memory.semantic",
        "memory.consolidation",
        "memory.conversations",
        "memory.store",
    ]
)


@task_prerun.connect
def _tag_task_logs(task_id: str | None = None, **kwargs: object) -> None:
    """Every log line of a task carries its id as ``request_id`` (``core.logs``)."""
    REQUEST_ID.set(task_id)


@task_postrun.connect
def _untag_task_logs(**kwargs: object) -> None:
    REQUEST_ID.set(None)
