"""``TenantTask``: the base class of Engram's Celery tasks (the app's default task class).

Built on tenant-schemas-celery's task: publishing puts the current schema in the message headers
(``_schema_name``) and the worker switches to that schema before running the task, so a task queued
in a tenant runs in that tenant, as that tenant's database role (``core.tenancy``: the switch of
schema is the switch of role), and takes ids only (or nothing). After the task the worker goes back
to the public schema and gives the connection back to the pool, which resets its role. On top of
that:

- Late acknowledgement (``acks_late``, ``reject_on_worker_lost``): a message is acknowledged when
  the task has finished, and put back on the queue when the pool process running it dies (a kill,
  the OOM killer), so a lost process never loses the work. Tasks on this base must therefore be
  idempotent; Engram's are (drains, checks, purges).
- ``queue_on_commit``: publish once the current transaction commits, best effort. The write has
  been stored by then, so failing to publish (the broker is down) must not turn it into an error: the
  failure is logged, counted (``engram_task_publish_failures_total``) and left to the periodic work
  that catches up (for the graph projection, the outbox sweeper). A short publish retry keeps a dead
  broker at milliseconds per write instead of kombu's default of about a second.
- ``requires_tenant``: such a task refuses to run outside the tenant it was queued for (no schema
  in the headers, or a tenant that no longer exists), instead of running in ``public``.
- A task of a tenant being moved to another PostgreSQL server (``Tenant.moving``, read fresh by the
  worker for each task, or the tenant's unit lock refused by the backend: ``core.errors.TenantMoving``)
  is retried every ``MOVING_RETRY_SECONDS`` until the move ends (for at most an hour), then runs on
  the tenant's new server. A task already running holds the unit lock: the move waits for it.

Periodic per-tenant work is queued by one fan-out, ``each_tenant`` (a beat entry names the task),
or ``for_each_tenant`` where a condition picks the tenants: tasks never look tenants up themselves.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from celery import current_app, shared_task
from django.db import transaction
from django_tenants.utils import get_public_schema_name, get_tenant_model, schema_context
from prometheus_client import Counter
from tenant_schemas_celery.app import get_schema_name_from_task
from tenant_schemas_celery.task import TenantTask as SchemaTask

from core.errors import TenantMoving
from core.tenancy import current_schema, current_tenant

logger = logging.getLogger(__name__)

PUBLISH_FAILURES = Counter(
    "engram_task_publish_failures_total",
    "Tasks that could not be queued after their transaction committed (the broker was unreachable).",
    ["task"],
)

# One quick second attempt (a broker restarting), then give up: a refused connection costs a few ms.
PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0.05, "interval_step": 0.05, "interval_max": 0.05}


class _CommitGroup:
    """The publications the next commit of one connection runs: each key is published once."""

    __slots__ = ("done", "published")

    def __init__(self) -> None:
        self.published: set[tuple[object, ...]] = set()
        self.done = False


# connection -> the group its next commit belongs to (a new one after each commit)
_groups: weakref.WeakKeyDictionary[Any, _CommitGroup] = weakref.WeakKeyDictionary()
_groups_lock = threading.Lock()


def _current_group() -> _CommitGroup:
    wrapper = transaction.get_connection()  # this thread's connection, not the shared proxy
    with _groups_lock:
        group = _groups.get(wrapper)
        if group is None or group.done:
            group = _groups[wrapper] = _CommitGroup()
        return group


#: seconds a task of a tenant being moved to another server waits before it is tried again, and
#: how often (an hour in all: a move's pause is its settle time and one copy of the schema)
MOVING_RETRY_SECONDS = 2
MOVING_RETRIES = 1800


class TenantTask(SchemaTask):
    """Base class of Engram's tasks; see the module docstring."""

    abstract = True
    acks_late = True
    reject_on_worker_lost = True
    #: refuse to run anywhere but in the tenant named by the message headers
    requires_tenant = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.requires_tenant:
            wanted = get_schema_name_from_task(self, kwargs)
            if not wanted or wanted == get_public_schema_name() or wanted != current_schema():
                logger.warning(
                    "%s skipped: it needs a tenant, was queued for %r and would run in %r",
                    self.name,
                    wanted,
                    current_schema(),
                )
                return None
        if getattr(current_tenant(), "moving", False):
            # the tenant's schema is being copied to another server (decision 0071): a write now
            # would land in the copy's source and be lost; the worker read the row for this task
            raise self.retry(countdown=MOVING_RETRY_SECONDS, max_retries=MOVING_RETRIES)
        try:
            return super().__call__(*args, **kwargs)
        except TenantMoving:
            # the move took the tenant's unit lock before this task's first statement (the row
            # read for it was older): nothing was written on this connection; try again later
            raise self.retry(countdown=MOVING_RETRY_SECONDS, max_retries=MOVING_RETRIES) from None

    def queue_on_commit(self, *args: Any, once_per_transaction: bool = False, **kwargs: Any) -> None:
        """Publish ``self(*args, **kwargs)`` in the current schema when the transaction commits
        (at once outside a transaction). Never raises for a broker that cannot be reached.

        ``once_per_transaction``: however often this is called with the same arguments before the
        commit, one message is published (500 asserts in one request queue one drain, not 500). A
        savepoint rolled back drops only its own calls; a transaction rolled back publishes nothing.
        """
        schema = current_schema()
        key = (self.name, schema, args, tuple(sorted(kwargs.items())))
        group = _current_group() if once_per_transaction else _CommitGroup()

        def publish() -> None:
            group.done = True  # later calls belong to the next transaction
            if key in group.published:
                return
            group.published.add(key)
            self.publish_best_effort(args, kwargs, schema=schema)

        transaction.on_commit(publish, robust=True)

    def delay_on_commit(self, *args: Any, **kwargs: Any) -> None:
        """Celery's ``delay_on_commit``, best effort (see :meth:`queue_on_commit`)."""
        self.queue_on_commit(*args, **kwargs)

    def apply_async_on_commit(
        self, args: tuple[Any, ...] | None = None, kwargs: dict[str, Any] | None = None, **options: Any
    ) -> None:
        """Celery's ``apply_async_on_commit``, best effort (see :meth:`queue_on_commit`)."""
        schema = current_schema()
        transaction.on_commit(
            lambda: self.publish_best_effort(tuple(args or ()), dict(kwargs or {}), schema=schema, **options),
            robust=True,
        )

    def publish_best_effort(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], *, schema: str, **options: Any
    ) -> bool:
        """Publish now for ``schema`` (``options`` as for ``apply_async``); False (logged and
        counted) when the broker cannot take it."""
        try:
            self.apply_async(
                args,
                kwargs,
                headers={"_schema_name": schema},
                retry=True,
                retry_policy=PUBLISH_RETRY_POLICY,
                **options,
            )
        except Exception as exc:  # the write stands; periodic work catches up
            PUBLISH_FAILURES.labels(task=self.name).inc()
            logger.warning("could not queue %s for %s after commit: %s", self.name, schema, exc)
            return False
        return True


def queue_on_commit(task_name: str, *args: Any, once_per_transaction: bool = False, **kwargs: Any) -> None:
    """``TenantTask.queue_on_commit`` of the registered task ``task_name``: how a service queues work.

    By name, because tasks sit above services (a task calls services; a service never imports its
    layer's tasks module), so imports keep flowing one way."""
    app = current_app
    if task_name not in app.tasks:
        # Celery finds the apps' tasks modules lazily (autodiscover_tasks): a web process that never
        # imported them loads them now, once
        app.loader.import_default_modules()
    task = app.tasks[task_name]
    task.queue_on_commit(*args, once_per_transaction=once_per_transaction, **kwargs)


def queue_later(task_name: str, *args: Any, seconds: float, **kwargs: Any) -> bool:
    """Publish the registered task ``task_name`` now, to run in the current schema in ``seconds``
    (Celery's ``countdown``), whatever the transaction does: for work buffered outside the
    database. Best effort, like ``TenantTask.publish_best_effort``; returns whether it was queued."""
    app = current_app
    if task_name not in app.tasks:
        app.loader.import_default_modules()  # see queue_on_commit
    task = app.tasks[task_name]
    return bool(task.publish_best_effort(args, kwargs, schema=current_schema(), countdown=seconds))


def tenant_schemas() -> list[str]:
    """The schema names of every tenant (``public`` is not one), in creation order: the one selector
    of the tenants periodic work runs for (``for_each_tenant``, ``each_tenant``, metrics,
    ``migrate_schemas``' role sync; ``tests/tenants/test_tenant_visibility.py`` holds every other
    reader of tenant rows to a short list). A tenant is listed once its row, schema, role and grants
    have committed together (``tenants.models.Tenant.save``), never while its migrations run."""
    tenants = get_tenant_model().objects.exclude(schema_name=get_public_schema_name()).order_by("pk")
    return list(tenants.values_list("schema_name", flat=True))


def for_each_tenant(task: TenantTask, *, when: Callable[[], bool] | None = None) -> int:
    """Queue ``task`` (taking no arguments) in the schema of every tenant for which ``when()``, run
    in that tenant's schema, is true (every tenant without ``when``); best effort, like
    ``publish_best_effort``. Returns how many were queued."""
    queued = 0
    for schema in tenant_schemas():
        if when is not None:
            with schema_context(schema):
                if not when():
                    continue
        queued += task.publish_best_effort((), {}, schema=schema)
    return queued


@shared_task(base=TenantTask, ignore_result=True)
def each_tenant(task_name: str) -> int:
    """Queue the registered task ``task_name`` once per tenant (from Celery beat: the entry names the
    per-tenant task); returns how many were queued."""
    return for_each_tenant(current_app.tasks[task_name])
