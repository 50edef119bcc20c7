"""Test fixtures: two tenants made once per run on the real PostgreSQL, agents with keys, API clients.

Tests run against the real PostgreSQL (pgvector) and Redis that ``./engram test`` starts. Most tests
use pytest-django's ``db`` fixture (each test in a transaction rolled back at its end). Tests that
need data other connections can see (concurrency, the Celery worker) use ``scratch_tenant``: a tenant
created and committed for that test and dropped afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connection
from django_tenants.utils import tenant_context
from rest_framework.test import APIClient

from agents.authentication import clear_tenant_cache
from agents.models import Agent, Scope
from agents.services import agent_create, api_key_create
from memory.knowledge.models import LIVE_STATUSES, Fact
from tenants.models import Tenant
from tenants.services import public_tenant_ensure, tenant_create

BASE_DIR = Path(__file__).resolve().parent.parent
SHARED_DIR = Path(__file__).resolve().parent.parent.parent / "shared"
LOCOMO_PATH = SHARED_DIR / "data" / "locomo" / "locomo-dev5.json"
MODEL_DIR = SHARED_DIR / "models" / "all-MiniLM-L6-v2-onnx"

# Semantic memory needs the embedding model; there is no model hub to fetch it from here.
requires_model = pytest.mark.skipif(
    not MODEL_DIR.exists() and not os.environ.get("ENGRAM_EMBEDDING_MODEL_PATH"),
    reason=f"embedding model not found at {MODEL_DIR} (the shared/ folder beside the repo) "
    "and ENGRAM_EMBEDDING_MODEL_PATH is unset",
)


@pytest.fixture(scope="session")
def django_db_setup(django_test_environment, django_db_blocker) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Create and migrate the test database, then the public tenant and tenants ``alpha``/``beta``.

    Replaces pytest-django's fixture, which sets up only databases that some collected test marks
    with ``django_db``; ``scratch_tenant`` tests need the database without that mark.
    """
    from django.test.utils import setup_databases, teardown_databases

    with django_db_blocker.unblock():
        db_config = setup_databases(verbosity=0, interactive=False, aliases={"default"})
        public_tenant_ensure(domain="localhost")
        tenant_create(slug="alpha", name="Alpha", domain="alpha.localhost")
        tenant_create(slug="beta", name="Beta", domain="beta.localhost")
        connection.set_schema_to_public()
    yield
    with django_db_blocker.unblock():
        teardown_databases(db_config, verbosity=0)


@pytest.fixture(autouse=True)
def _public_schema_between_tests() -> Iterator[None]:
    clear_tenant_cache()
    yield
    connection.set_schema_to_public()


@pytest.fixture
def tenant_a(db) -> Tenant:  # type: ignore[no-untyped-def]
    return Tenant.objects.get(schema_name="alpha")


@pytest.fixture
def tenant_b(db) -> Tenant:  # type: ignore[no-untyped-def]
    return Tenant.objects.get(schema_name="beta")


@dataclass
class Caller:
    """An agent in a tenant with an API client that carries its key."""

    tenant: Tenant
    agent: Agent
    key: str
    client: APIClient

    def post(self, path: str, data: object, **headers: str):  # type: ignore[no-untyped-def]
        return self.client.post(path, data, format="json", headers=headers)

    def get(self, path: str, params: dict | None = None):  # type: ignore[no-untyped-def]
        return self.client.get(path, params or {})


def make_caller(tenant: Tenant, name: str, scopes: tuple[str, ...] = (Scope.READ, Scope.WRITE)) -> Caller:
    """Create agent ``name`` with a key in ``tenant`` and return a client authenticated as it."""
    with tenant_context(tenant):
        agent = Agent.objects.filter(name=name).first() or agent_create(name=name)
        _, key = api_key_create(agent=agent, scopes=scopes)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return Caller(tenant, agent, key, client)


@pytest.fixture
def alice(tenant_a: Tenant) -> Caller:
    """Owner: an agent of tenant alpha."""
    return make_caller(tenant_a, "alice")


@pytest.fixture
def bob(tenant_a: Tenant) -> Caller:
    """Teammate: another agent of tenant alpha."""
    return make_caller(tenant_a, "bob")


@pytest.fixture
def mallory(tenant_b: Tenant) -> Caller:
    """Outsider: an agent of tenant beta."""
    return make_caller(tenant_b, "mallory")


@pytest.fixture
def scratch_tenant(django_db_setup, django_db_blocker) -> Iterator[Tenant]:  # type: ignore[no-untyped-def]
    """A committed tenant of its own (for work across connections); its schema is dropped afterwards."""
    with django_db_blocker.unblock():
        tenant, _ = tenant_create(slug=f"scratch_{uuid.uuid4().hex[:8]}")
        connection.set_schema_to_public()
        try:
            yield tenant
        finally:
            connection.set_schema_to_public()
            tenant.auto_drop_schema = True
            tenant.delete(force_drop=True)


@pytest.fixture
def neo4j_driver():  # type: ignore[no-untyped-def]
    """The shared ``neo4j.Driver`` for the Neo4j that ``./engram test`` starts (or ``NEO4J_URI``).

    Without one the test is skipped, except under CI (``CI=true``), where it fails: CI must test
    against a real Neo4j.
    """
    from core.neo4j import get_driver

    driver = get_driver()
    if driver is None:
        reason = (
            "Neo4j not running: NEO4J_URI is unset (./engram test starts Neo4j when Java 17+ and "
            "Maven are installed; ENGRAM_NEO4J=0 turns that off)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return driver


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker) -> Iterator[subprocess.Popen[bytes]]:  # type: ignore[no-untyped-def]
    """A real Celery worker process on the test database and the test Redis."""
    env = test_database_env()
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "WARNING"],
        cwd=BASE_DIR,
        env=env,
    )
    try:
        yield worker
    finally:
        worker.terminate()
        worker.wait(30)


def test_database_env(**extra: str) -> dict[str, str]:
    """Environment for a child process (Celery worker, web server) using this run's test database
    on the suite's PostgreSQL server, and the suite's Redis and Neo4j."""
    url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    return {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings.test", **extra}


@contextmanager
def asgi_server(**extra_env: str) -> Iterator[int]:
    """A real uvicorn process on the test database for the ``with`` block; yields its port."""
    from devstack import free_port
    from devstack.web import uvicorn_command, wait_for_http

    port = free_port()
    server = subprocess.Popen(uvicorn_command(port), cwd=BASE_DIR, env=test_database_env(**extra_env))
    try:
        wait_for_http(f"http://127.0.0.1:{port}/api/v1/me", server)
        yield port
    finally:
        server.terminate()
        server.wait(15)


def postgres_projection() -> tuple[set[tuple[int, int, int, str, str]], set[int]]:
    """What the projection must hold (current tenant): live entity-to-entity facts as
    (fact, subject, object, predicate, status), and the entities they touch."""
    facts = {
        (f.pk, f.subject_id, f.object_entity_id, f.predicate.name, f.status)
        for f in Fact.objects.filter(status__in=LIVE_STATUSES, object_entity__isnull=False).select_related(
            "predicate"
        )
    }
    return facts, {e for _, s, o, _, _ in facts for e in (s, o)}


def neo4j_projection(driver, tenant: str) -> tuple[set[tuple[int, int, int, str, str]], set[int]]:  # type: ignore[no-untyped-def]
    """What the projection holds for ``tenant``, in the shape of :func:`postgres_projection`."""
    records, _, _ = driver.execute_query(
        "MATCH (s:Entity {tenant: $t})-[r:FACT {tenant: $t}]->(o:Entity {tenant: $t}) "
        "RETURN r.fact_id AS f, s.id AS s, o.id AS o, r.predicate AS p, r.status AS st",
        t=tenant,
    )
    facts = {(r["f"], r["s"], r["o"], r["p"], r["st"]) for r in records}
    nodes, _, _ = driver.execute_query("MATCH (n:Entity {tenant: $t}) RETURN n.id AS id", t=tenant)
    return facts, {r["id"] for r in nodes}


@pytest.fixture
def graph_tenant(scratch_tenant: Tenant, neo4j_driver) -> Iterator[Tenant]:  # type: ignore[no-untyped-def]
    """A committed tenant whose Neo4j projection is removed afterwards."""
    try:
        yield scratch_tenant
    finally:
        neo4j_driver.execute_query(
            "MATCH (n:Entity {tenant: $t}) DETACH DELETE n", t=scratch_tenant.schema_name
        )
