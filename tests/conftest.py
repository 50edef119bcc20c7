"""Test fixtures: two tenants made once per run on the real PostgreSQL, agents with keys, API clients.

Tests run against the real PostgreSQL (pgvector) and Redis that ``./engram test`` starts. Most tests
use pytest-django's ``db`` fixture (each test in a transaction rolled back at its end). Tests that
need data other connections can see (concurrency, the Celery worker) use ``scratch_tenant``: a tenant
created and committed for that test and dropped afterwards.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from django.db import OperationalError, connection

from agents.authentication import clear_tenant_cache
from tenants.models import Tenant
from tenants.services import public_tenant_ensure, tenant_create
from tests.factories import (
    BASE_DIR,
    Caller,
    drop_stale_test_roles,
    drop_tenant_roles_of,
    make_caller,
    shared_missing,
    test_database_env,
    unavailable,
)


@pytest.fixture(scope="session")
def django_db_setup(django_test_environment, django_db_blocker) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Create and migrate the test database, then the public tenant and tenants ``alpha``/``beta``.

    Replaces pytest-django's fixture, which sets up only databases that some collected test marks
    with ``django_db``; ``scratch_tenant`` tests need the database without that mark.
    """
    from django.test.utils import setup_databases, teardown_databases

    with django_db_blocker.unblock():
        drop_stale_test_roles()
        db_config = setup_databases(verbosity=0, interactive=False, aliases={"default"})
        test_database = connection.settings_dict["NAME"]
        public_tenant_ensure(domain="localhost")
        tenant_create(slug="alpha", name="Alpha", domain="alpha.localhost")
        tenant_create(slug="beta", name="Beta", domain="beta.localhost")
        connection.set_schema_to_public()
    yield
    with django_db_blocker.unblock():
        teardown_databases(db_config, verbosity=0)
        drop_tenant_roles_of(test_database)


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


@pytest.fixture
def trio_tenants(tenant_a: Tenant, tenant_b: Tenant) -> tuple[Tenant, Tenant]:
    """The tenants of the owner / teammate / outsider trio: (the owner's and the teammate's, the
    outsider's). Alpha and beta in the test's rolled-back transaction; a module whose tests need
    committed tenants overrides this fixture with ``committed_tenants``."""
    return tenant_a, tenant_b


@pytest.fixture
def alice(trio_tenants: tuple[Tenant, Tenant]) -> Caller:
    """Owner: an agent of the first tenant (the one that starts a session or an execution)."""
    return make_caller(trio_tenants[0], "alice")


@pytest.fixture
def bob(trio_tenants: tuple[Tenant, Tenant]) -> Caller:
    """Teammate: another agent of the owner's tenant (in the same session or execution)."""
    return make_caller(trio_tenants[0], "bob")


@pytest.fixture
def mallory(trio_tenants: tuple[Tenant, Tenant]) -> Caller:
    """Outsider: an agent of the second tenant, using the same ids."""
    return make_caller(trio_tenants[1], "mallory")


@pytest.fixture(scope="module")
def committed_tenants(django_db_setup, django_db_blocker) -> Iterator[tuple[Tenant, Tenant]]:  # type: ignore[no-untyped-def]
    """Two committed tenants, each with a domain of its own, for one module (work that commits: a
    save's after-commit hook, other connections, a server process); dropped after the module."""
    with django_db_blocker.unblock():
        suffix = uuid.uuid4().hex[:8]
        made = [
            tenant_create(slug=f"trio{side}_{suffix}", domain=f"trio{side}-{suffix}.localhost")[0]
            for side in ("a", "b")
        ]
        connection.set_schema_to_public()
        try:
            yield made[0], made[1]
        finally:
            connection.set_schema_to_public()
            for tenant in made:
                tenant.auto_drop_schema = True
                tenant.delete(force_drop=True)


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
            for attempt in range(3):
                # the suite's Celery worker may still be draining the tenant's outbox (queued by the
                # test's writes): DROP SCHEMA can then lose a deadlock to it; the drain ends, retry
                try:
                    tenant.delete(force_drop=True)
                    break
                except OperationalError as exc:
                    if "deadlock detected" not in str(exc) or attempt == 2:
                        raise
                    time.sleep(1)


@pytest.fixture
def two_tenants(scratch_tenant: Tenant, django_db_blocker) -> Iterator[tuple[Caller, Caller]]:  # type: ignore[no-untyped-def]
    """Agents with committed keys in two committed tenants (for a server process to see)."""
    with django_db_blocker.unblock():
        other, _ = tenant_create(slug=f"scratch_{uuid.uuid4().hex[:8]}")
        connection.set_schema_to_public()
        try:
            yield make_caller(scratch_tenant, "pool-a"), make_caller(other, "pool-b")
        finally:
            connection.set_schema_to_public()
            other.delete(force_drop=True)


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
        unavailable(reason)
    return driver


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker) -> Iterator[subprocess.Popen[bytes]]:  # type: ignore[no-untyped-def]
    """A real Celery worker process on the test database and the test Redis (it also loads the
    tenant-role probe task of tests/core/role_probe_tasks.py)."""
    env = test_database_env()
    worker = subprocess.Popen(
        [
            *(sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo"),
            *("--loglevel", "WARNING", "--include", "tests.core.role_probe_tasks"),
        ],
        cwd=BASE_DIR,
        env=env,
    )
    try:
        yield worker
    finally:
        worker.terminate()
        worker.wait(30)


@pytest.fixture
def graph_tenant(scratch_tenant: Tenant, neo4j_driver) -> Iterator[Tenant]:  # type: ignore[no-untyped-def]
    """A committed tenant whose Neo4j projection is removed afterwards."""
    try:
        yield scratch_tenant
    finally:
        neo4j_driver.execute_query(
            "MATCH (n:Entity {tenant: $t}) DETACH DELETE n", t=scratch_tenant.schema_name
        )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``needs_shared``: skipped with their reason when the shared data is absent,
    failed under CI, where it must be there."""
    for mark in item.iter_markers("needs_shared"):
        reason = shared_missing(mark.kwargs["path"], mark.kwargs["what"], mark.kwargs.get("env"))
        if reason is not None:
            unavailable(reason)
