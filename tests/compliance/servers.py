"""A second embedded PostgreSQL server for the backup and move tests, and ``manage.py`` run in a
child process against a database (the fixture ``second_server`` is registered by conftest)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection

from core.tenancy import tenant_role
from memory.checkpoints.models import Checkpoint, CheckpointBlob
from memory.episodic.models import Event
from memory.knowledge.models import Fact
from memory.semantic.models import SemanticMemory
from tests.factories import BASE_DIR
from tests.factories import test_database_env as child_env

TABLES = {
    model.__name__: model._meta.db_table
    for model in (SemanticMemory, Event, Fact, Checkpoint, CheckpointBlob)
}


def manage(url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``manage.py ARGS`` in a child process on the database at ``url`` (the suite's Redis)."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=child_env(DATABASE_URL=url, **env),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def second_server(django_db_setup) -> Iterator[tuple[str, psycopg.Connection]]:  # type: ignore[type-arg]
    """A second embedded PostgreSQL server (its own data folder and socket) with a database of
    Engram's public schema; yields its URL and a superuser connection to that database."""
    from devstack import VAR_DIR
    from devstack.postgres import EmbeddedPostgres

    database = f"engram_b_{uuid.uuid4().hex[:8]}"
    suite_database = connection.settings_dict["NAME"]
    server = EmbeddedPostgres(VAR_DIR / "test" / "pg16-second", database=database)
    url = server.start(app_user=os.environ.get("ENGRAM_PG_APP_USER") or None)
    try:
        done = manage(url, "migrate_schemas", "--shared", "-v", "0")
        assert done.returncode == 0, done.stderr
        socket_dir = server._server.get_postmaster_info().socket_dir
        with psycopg.connect(host=str(socket_dir), dbname=database, user="postgres", autocommit=True) as su:
            yield url, su
    finally:
        server._server.psql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE);')
        # the tenants' roles made here: named after this database, or the suite's (a moved tenant)
        for prefix in (f"{database}_t_", tenant_role("", database=suite_database)):
            server._server.psql(
                "DO $$ DECLARE r text; BEGIN FOR r IN SELECT rolname FROM pg_roles "
                f"WHERE starts_with(rolname, '{prefix}') LOOP EXECUTE format('DROP ROLE %I', r); "
                "END LOOP; END $$;"
            )
        server.stop()
