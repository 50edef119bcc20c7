"""Background work survives what production throws at it: a worker killed mid-task, a task that was
never queued, a broker that is down when a write commits.

Each test runs its own Redis (the broker), its own Celery worker processes (prefork, as in
production) and, where the API is needed, its own uvicorn process, all on the suite's PostgreSQL
and Neo4j, so no other worker of the suite can pick up their tasks.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import psutil
import redis as redis_client
from django.db import connection, transaction
from django.utils import timezone
from django_tenants.utils import tenant_context

from agents.services import agent_create
from devstack import free_port
from devstack.redis_server import EmbeddedRedis
from memory.knowledge import services
from memory.knowledge.models import Entity, Fact, GraphOutbox, Predicate, entity_key
from tenants.models import Tenant
from tests.factories import BASE_DIR, asgi_server, fact, make_caller, neo4j_projection, postgres_projection
from tests.factories import test_database_env as database_env  # (not collected as a test)

# seconds: worker start-up (~5 s) and a redelivery or a 1 s sweep, with slack for 2 busy cores
CONVERGENCE_BOUND = 60


def broker_env(url: str) -> dict[str, str]:
    return {"REDIS_URL": url, "CELERY_BROKER_URL": url, "CELERY_RESULT_BACKEND": url}


@contextlib.contextmanager
def own_broker(data_dir: Path) -> Iterator[EmbeddedRedis]:
    """A Redis of the test's own on a free port; ``.start()`` returns its URL."""
    redis = EmbeddedRedis(data_dir, free_port())
    try:
        yield redis
    finally:
        redis.stop()


@contextlib.contextmanager
def worker(url: str, *, beat_schedule: Path | None = None, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """A Celery worker (prefork, 2 processes) on broker ``url``; with ``beat_schedule``, beat too."""
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "prefork"]
    command += ["--concurrency", "2", "--loglevel", "WARNING"]
    if beat_schedule is not None:
        command += ["--beat", "--schedule", str(beat_schedule)]
    process = subprocess.Popen(
        command, cwd=BASE_DIR, env=database_env(**broker_env(url), **env), start_new_session=True
    )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()  # the main process; its pool children follow it out
            process.wait(10)


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


def converged(tenant: Tenant, driver) -> bool:  # type: ignore[no-untyped-def]
    """The outbox is empty and Neo4j holds exactly PostgreSQL's live entity-to-entity facts."""
    with tenant_context(tenant):
        if GraphOutbox.objects.filter(processed_at__isnull=True).exists():
            return False
        expected = postgres_projection()
    return neo4j_projection(driver, tenant.schema_name) == expected


def pending_rows(tenant: Tenant) -> int:
    with tenant_context(tenant):
        return GraphOutbox.objects.filter(processed_at__isnull=True).count()


def drain_running(schema: str) -> bool:
    """Whether another connection is inside a drain: it holds the row locks ``SELECT ... FOR UPDATE``
    takes on the tenant's outbox until its transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = 'memory_graphoutbox' AND l.mode = 'RowShareLock' "
            "AND l.granted AND l.pid <> pg_backend_pid()",
            [schema],
        )
        return cursor.fetchone()[0] > 0


def test_a_worker_killed_mid_projection_loses_nothing(graph_tenant: Tenant, neo4j_driver, tmp_path) -> None:  # type: ignore[no-untyped-def]
    caller = make_caller(graph_tenant, "batcher")
    schema = graph_tenant.schema_name
    with tenant_context(graph_tenant):
        hub = services.entity_ensure(name="Hub")
    with own_broker(tmp_path / "redis") as redis:
        url = redis.start()
        with asgi_server(**broker_env(url)) as port:
            # Every fact of the batch ends at Hub. Creating Hub's node in an open Neo4j transaction
            # makes the drain wait there, in the middle of projecting, until this test lets it go.
            session = neo4j_driver.session()
            blocker = session.begin_transaction()
            try:
                blocker.run(
                    "MERGE (n:Entity {tenant: $t, id: $id}) SET n.name = 'Hub'", t=schema, id=hub.pk
                ).consume()
                response = httpx.post(
                    f"http://127.0.0.1:{port}/api/v1/facts",
                    json=[fact(f"n{i}", "knows", {"entity": "Hub"}) for i in range(500)],
                    headers={"Authorization": f"Bearer {caller.key}"},
                    timeout=120,
                )
                assert response.status_code == 201, response.text
                assert pending_rows(graph_tenant) == 500
                with worker(url) as process:
                    wait_until(lambda: drain_running(schema), CONVERGENCE_BOUND, "the drain to start")
                    children = psutil.Process(process.pid).children()
                    assert children
                    for child in children:
                        child.send_signal(signal.SIGKILL)
                    psutil.wait_procs(children, timeout=10)
                    blocker.rollback()
                    wait_until(
                        lambda: converged(graph_tenant, neo4j_driver),
                        CONVERGENCE_BOUND,
                        f"the projection to converge ({pending_rows(graph_tenant)} rows still pending)",
                    )
            finally:
                blocker.close()
                session.close()


def test_beat_drains_rows_no_task_was_queued_for(graph_tenant: Tenant, neo4j_driver, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(graph_tenant), transaction.atomic():
        # what a lost task leaves behind: committed changes with pending outbox rows, nothing queued
        # (written below the services, which would queue a task)
        agent = agent_create(by=None, name="writer")
        knows = Predicate.objects.create(name="knows")
        for i in range(20):
            subject = Entity.objects.create(name=f"a{i}", key=entity_key(f"a{i}"))
            obj = Entity.objects.create(name=f"b{i}", key=entity_key(f"b{i}"))
            row = Fact.objects.create(
                subject=subject,
                predicate=knows,
                object_entity=obj,
                object_key=f"e:{obj.pk}",
                confidence=1.0,
                valid_from=timezone.now(),
                agent=agent,
            )
            GraphOutbox.objects.create(fact=row)
    with own_broker(tmp_path / "redis") as redis:
        url = redis.start()
        with worker(url, beat_schedule=tmp_path / "beat-schedule", ENGRAM_OUTBOX_SWEEP_SECONDS="1"):
            wait_until(
                lambda: converged(graph_tenant, neo4j_driver),
                CONVERGENCE_BOUND,
                f"the sweeper to drain the outbox ({pending_rows(graph_tenant)} rows still pending)",
            )


def test_writes_while_the_broker_is_down_are_stored_and_projected_later(
    graph_tenant: Tenant, neo4j_driver, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    caller = make_caller(graph_tenant, "writer")
    auth = {"Authorization": f"Bearer {caller.key}"}
    with own_broker(tmp_path / "redis") as redis:
        url = redis.start()
        with asgi_server(**broker_env(url)) as port:
            api = f"http://127.0.0.1:{port}/api/v1"
            warm = httpx.post(
                f"{api}/facts",
                json=[fact("Kim", "knows", {"entity": "Lee"})]
                + [fact(f"w{i}", "knows", {"entity": "Lee"}) for i in range(49)],
                headers=auth,
                timeout=60,
            )
            assert warm.status_code == 201, warm.text
            # 50 asserts in one transaction queue one drain (it drains the whole outbox)
            assert redis_client.Redis.from_url(url).llen("celery") == 1
            redis.stop()  # the broker goes down; the API stays up

            started = time.monotonic()
            post = functools.partial(httpx.post, headers=auth, timeout=60)
            single = post(f"{api}/facts", json=fact("Kim", "likes", {"entity": "Mo"}))
            batch = post(f"{api}/facts", json=[fact(f"p{i}", "knows", {"entity": "Kim"}) for i in range(20)])
            retract = post(f"{api}/facts/{warm.json()['results'][0]['fact']['id']}/retract", json={})
            took = time.monotonic() - started
            assert single.status_code == 201, single.text
            assert single.json()["projection"] == "pending" and single.json()["outcome"] == "created"
            assert batch.status_code == 201, batch.text
            assert batch.json()["projection"] == "pending" and batch.json()["count"] == 20
            assert retract.status_code == 200, retract.text
            assert retract.json()["projection"] == "pending" and retract.json()["status"] == "retracted"
            assert took < 10  # a dead broker costs little per write (the defect: 500s after commit)
        with tenant_context(graph_tenant):
            assert Fact.objects.count() == 71
        assert pending_rows(graph_tenant) == 72  # no worker ran: every change is still pending

        assert redis.start() == url  # the broker is back: the sweeper catches up
        with worker(url, beat_schedule=tmp_path / "beat-schedule", ENGRAM_OUTBOX_SWEEP_SECONDS="1"):
            wait_until(
                lambda: converged(graph_tenant, neo4j_driver),
                CONVERGENCE_BOUND,
                f"the projection to converge ({pending_rows(graph_tenant)} rows still pending)",
            )


def test_purge_deletes_old_processed_rows_only(alice, settings) -> None:  # type: ignore[no-untyped-def]
    from memory.knowledge.tasks import outbox_purge_processed

    settings.ENGRAM_OUTBOX_RETENTION_HOURS = 24
    for name in ("old", "recent", "pending"):
        alice.post("/api/v1/facts", fact(name, "knows", {"entity": "Kim"}))
    with tenant_context(alice.tenant):
        rows = {row.fact.subject.name: row for row in GraphOutbox.objects.select_related("fact__subject")}
        now = timezone.now()
        GraphOutbox.objects.filter(pk=rows["old"].pk).update(processed_at=now - timedelta(hours=25))
        GraphOutbox.objects.filter(pk=rows["recent"].pk).update(processed_at=now - timedelta(hours=23))
    # as beat's fan-out queues it: in the tenant's schema, named by the message headers
    assert outbox_purge_processed.apply(headers={"_schema_name": alice.tenant.schema_name}).result == 1
    with tenant_context(alice.tenant):
        left = [(row.fact.subject.name, row.processed_at is None) for row in GraphOutbox.objects.all()]
        assert sorted(left) == [("pending", True), ("recent", False)]


def test_a_tenant_task_without_its_tenant_does_not_run(db, caplog) -> None:  # type: ignore[no-untyped-def]
    from memory.knowledge.tasks import project_facts

    # queued from the public schema (or for a tenant since deleted): refused, not run in public
    result = project_facts.apply(headers={"_schema_name": "public"})
    assert result.successful() and result.result is None
    assert "needs a tenant" in caplog.text
