"""A tenant moved to a second embedded PostgreSQL server while units of work of it are in flight
(decision 0090): a slow request and a slow task that began before the move either finish before
the copy (their writes are on the new server) or are refused; nothing acknowledged stays behind on
the old server. A move whose in-flight work outlasts its wait gives up and leaves the tenant where
it was, the work untouched."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest
from django.db import connection
from django_tenants.utils import schema_exists, tenant_context

from compliance.services.replication import (
    link_for,
    maintenance_session,
    replication_check,
    schema_tables,
    tables_without_identity,
)
from core.errors import Conflict
from memory.semantic.models import LexicalPosting, SemanticMemory
from tenants.models import Tenant
from tests.compliance.servers import TABLES, manage
from tests.factories import BASE_DIR, asgi_server
from tests.factories import test_database_env as child_env

PROBE_APP = "tests.compliance.move_probe_asgi:application"
QUEUE = "move-probe"


@contextmanager
def probe_worker(**env: str) -> Iterator[None]:
    """A Celery worker (tenant logins on) taking the queue ``move-probe`` only, with the slow task."""
    worker = subprocess.Popen(
        [
            *(sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "-Q", QUEUE),
            *("--loglevel", "WARNING", "--include", "tests.compliance.move_probe_tasks"),
        ],
        cwd=BASE_DIR,
        env=child_env(**env),
    )
    try:
        yield
    finally:
        worker.terminate()
        worker.wait(30)


def _slow_request(port: int, key: str, seconds: float, out: dict[str, object]) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
        answer = http.post(f"/slow-write?seconds={seconds}", headers={"Authorization": f"Bearer {key}"})
    out["status"], out["body"] = answer.status_code, answer.json()


def _wait_for(path: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.1)


def _move_started(schema: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """``manage.py tenant_move`` of ``schema`` to the server ``b``, running in a child process."""
    return subprocess.Popen(
        [sys.executable, "manage.py", "tenant_move", "--tenant", schema, "--to", "b"],
        cwd=BASE_DIR,
        env=child_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _slow_events(cursor: psycopg.Cursor, schema: str) -> set[str]:  # type: ignore[type-arg]
    cursor.execute(f'SELECT content FROM "{schema}"."{TABLES["Event"]}" WHERE session_id = %s', ["slow"])  # type: ignore[arg-type]
    return {row[0] for row in cursor.fetchall()}


def test_units_in_flight_finish_before_the_copy_or_are_refused(  # type: ignore[no-untyped-def]
    two_tenants, second_server, django_db_blocker, tmp_path: Path
) -> None:
    from tests.compliance.move_probe_tasks import slow_write

    url, su = second_server
    mover, _ = two_tenants
    schema = mover.tenant.schema_name
    env = {"ENGRAM_DB_SERVERS": f"b={url}", "ENGRAM_MOVE_PROBE_DIR": str(tmp_path)}
    request: dict[str, object] = {}
    with asgi_server(PROBE_APP, **env) as port, probe_worker(**env):
        # both units write their first event, then wait (up to 25 s) for the test's "go"
        asker = threading.Thread(target=_slow_request, args=(port, mover.key, 25, request))
        asker.start()
        with django_db_blocker.unblock(), tenant_context(mover.tenant):
            task = slow_write.apply_async(args=[mover.agent.name, "task", 25], queue=QUEUE)
        _wait_for(tmp_path / "request.started", 60)
        _wait_for(tmp_path / "task.started", 90)
        move = _move_started(schema, env)
        # the units write their second event as soon as the copy exists on the new server (if
        # the move lets it exist while they run), else when their wait ends
        while move.poll() is None:
            if su.execute("SELECT to_regnamespace(%s)", [schema]).fetchone() != (None,):
                (tmp_path / "go").touch()
            time.sleep(0.1)
        out, err = move.communicate()
        asker.join(120)
        task_seqs = task.get(timeout=120)
    assert move.returncode == 0, out + err
    print(f"\n{out.strip()}")

    on_new = _slow_events(su.cursor(), schema)
    # each unit either finished with both its writes on the new server, or was refused
    assert request.get("status") in (201, 503), request
    if request["status"] == 201:
        assert {"request A", "request B"} <= on_new, (request, on_new)
    else:
        assert "request B" not in on_new, (request, on_new)
    assert len(task_seqs) == 2 and {"task A", "task B"} <= on_new, (task_seqs, on_new)
    # nothing stays behind: the old server holds no schema of the tenant, its row names the new one
    with django_db_blocker.unblock():
        assert not schema_exists(schema)
        assert Tenant.objects.filter(schema_name=schema).values_list("database", flat=True).get() == "b"
    verified = manage(child_env()["DATABASE_URL"], "verify_chain", "--tenant", schema, **env)
    assert verified.returncode == 0 and "chain intact" in verified.stdout, verified.stdout + verified.stderr


def test_a_move_gives_up_when_work_in_flight_outlasts_its_wait(  # type: ignore[no-untyped-def]
    two_tenants, second_server, django_db_blocker, tmp_path: Path
) -> None:
    url, su = second_server
    mover, stayer = two_tenants
    schema = mover.tenant.schema_name
    env = {"ENGRAM_DB_SERVERS": f"b={url}", "ENGRAM_MOVE_PROBE_DIR": str(tmp_path)}
    request: dict[str, object] = {}
    with asgi_server(PROBE_APP, **env) as port:
        # in flight until the move has given up (the copy comes before the pause and its time
        # varies with the machine's load): the request's wait ends at the test's "go"
        asker = threading.Thread(target=_slow_request, args=(port, mover.key, 110, request))
        asker.start()
        _wait_for(tmp_path / "request.started", 60)
        started = time.monotonic()
        moved = manage(
            child_env()["DATABASE_URL"], "tenant_move", "--tenant", schema, "--to", "b", "--wait", "2", **env
        )
        waited = time.monotonic() - started
        # while the tenant is paused, another tenant is served; after the move gave up, so is this one
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            other = http.get("/api/v1/me", headers={"Authorization": f"Bearer {stayer.key}"})
            (tmp_path / "go").touch()
            asker.join(60)
            again = http.get("/api/v1/me", headers={"Authorization": f"Bearer {mover.key}"})
    assert moved.returncode != 0 and "in flight" in moved.stderr, moved.stdout + moved.stderr
    assert waited < 60, waited
    assert other.status_code == 200 and again.status_code == 200, (other.content, again.content)
    assert request.get("status") == 201, request  # the work was never aborted
    with django_db_blocker.unblock():
        row = Tenant.objects.filter(schema_name=schema).values("database", "moving").get()
        assert row == {"database": "default", "moving": False}, row
        assert schema_exists(schema)
    assert su.execute("SELECT to_regnamespace(%s)", [schema]).fetchone() == (None,)
    _no_replication_left(su, django_db_blocker)


class Writer(threading.Thread):
    """Appends one event every 50 ms through ``POST /api/v1/events`` with ``key`` until stopped;
    keeps (monotonic time, status, content) of each attempt."""

    def __init__(self, port: int, key: str, label: str) -> None:
        super().__init__(daemon=True)
        self.port, self.key, self.label = port, key, label
        self.stop = threading.Event()
        self.attempts: list[tuple[float, int, str]] = []

    def run(self) -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30) as http:
            for n in itertools.count():
                if self.stop.is_set():
                    return
                content = f"{self.label} {n}"
                event = {"session_id": "live", "kind": "message", "content": content}
                try:
                    status = http.post(
                        "/api/v1/events",
                        json=[{**event, "occurred_at": "2026-12-06T09:00:00Z"}],
                        headers={"Authorization": f"Bearer {self.key}"},
                    ).status_code
                except httpx.TransportError:
                    status = 0
                self.attempts.append((time.monotonic(), status, content))
                time.sleep(0.05)

    def acknowledged(self) -> set[str]:
        return {content for _, status, content in self.attempts if status == 201}


def _live_events(cursor: psycopg.Cursor, schema: str) -> set[str]:  # type: ignore[type-arg]
    cursor.execute(f'SELECT content FROM "{schema}"."{TABLES["Event"]}" WHERE session_id = %s', ["live"])  # type: ignore[arg-type]
    return {row[0] for row in cursor.fetchall()}


def _digests(cursor: psycopg.Cursor, schema: str) -> dict[str, tuple[int, str]]:  # type: ignore[type-arg]
    """(rows, MD5 of the rows' text in order) of the semantic layer's tables of ``schema``."""
    out = {}
    for table in (SemanticMemory._meta.db_table, LexicalPosting._meta.db_table):
        cursor.execute(
            f'SELECT count(*), md5(string_agg(t::text, \'|\' ORDER BY t::text)) FROM "{schema}"."{table}" t'
        )  # type: ignore[arg-type]
        row = cursor.fetchone()
        assert row is not None and row[0] > 0, (table, row)
        out[table] = (int(row[0]), str(row[1]))
    return out


def test_a_tenant_keeps_working_while_it_is_copied_and_others_throughout(  # type: ignore[no-untyped-def]
    two_tenants, second_server, django_db_blocker, tmp_path: Path
) -> None:
    """The moving tenant writes through the API during the copy (201s while its schema is on the
    target and before its pause), is refused only for the pause (503), writes again after the
    switch, and every write acknowledged is on the target; another tenant's writes succeed from
    before the move to after it."""
    url, su = second_server
    mover, stayer = two_tenants
    schema = mover.tenant.schema_name
    env = {"ENGRAM_DB_SERVERS": f"b={url}", "ENGRAM_MOVE_PROBE_DIR": str(tmp_path)}
    copying: float | None = None  # when the schema first exists on the target
    with django_db_blocker.unblock():
        # rows whose columns and companion rows triggers fill (lexical vector, postings, contexts):
        # applied on the target without firing its triggers, they must arrive as the source has them
        for n, text in enumerate(
            ("Maria prefers green tea.", "The deploy window is Friday.", "Ivo likes jazz.")
        ):
            answer = mover.post("/api/v1/memories", {"content": text, "session_id": f"s{n % 2}"})
            assert answer.status_code == 201, answer.content
        connection.set_schema_to_public()
        with connection.cursor() as cursor:
            before = _digests(cursor, schema)  # type: ignore[arg-type]
    with asgi_server(PROBE_APP, **env) as port:
        moving, other = Writer(port, mover.key, "mover"), Writer(port, stayer.key, "other")
        moving.start(), other.start()
        time.sleep(1)
        move = _move_started(schema, env)
        while move.poll() is None:
            if copying is None and su.execute("SELECT to_regnamespace(%s)", [schema]).fetchone() != (None,):
                copying = time.monotonic()
            time.sleep(0.05)
        out, err = move.communicate()
        moved = time.monotonic()
        time.sleep(2)  # writes after the switch (the tenant cache has expired within the move's tail)
        moving.stop.set(), other.stop.set()
        moving.join(30), other.join(30)
    assert move.returncode == 0, out + err
    print(f"\n{out.strip()}")
    assert copying is not None
    statuses = {status for _, status, _ in moving.attempts}
    assert statuses <= {201, 503}, statuses
    refused = [at for at, status, _ in moving.attempts if status == 503]
    paused = min(refused) if refused else moved
    during_copy = [at for at, status, _ in moving.attempts if status == 201 and copying < at < paused]
    assert len(during_copy) >= 3, (copying, paused, len(during_copy))  # the copy did not stop it
    assert any(at > moved and status == 201 for at, status, _ in moving.attempts)  # it works again
    assert _digests(su.cursor(), schema) == before
    on_target = _live_events(su.cursor(), schema)
    assert moving.acknowledged() <= on_target, sorted(moving.acknowledged() - on_target)
    # the other tenant: every request of it succeeded, from before the move to after it
    assert {status for _, status, _ in other.attempts} == {201}, other.attempts
    assert other.attempts[0][0] < copying and other.attempts[-1][0] > moved
    verified = manage(child_env()["DATABASE_URL"], "verify_chain", "--tenant", schema, **env)
    assert verified.returncode == 0 and "chain intact" in verified.stdout, verified.stdout + verified.stderr
    _no_replication_left(su, django_db_blocker)


def _no_replication_left(su: psycopg.Connection, django_db_blocker) -> None:  # type: ignore[no-untyped-def, type-arg]
    """No subscription on the target, no move's slot or publication on the source."""
    assert su.execute("SELECT subname FROM pg_subscription").fetchall() == []
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE 'engram\\_move\\_%%'")
        assert cursor.fetchall() == []
        cursor.execute("SELECT pubname FROM pg_publication")
        assert cursor.fetchall() == []


def test_every_table_of_a_tenant_can_be_replicated(scratch_tenant: Tenant, django_db_blocker) -> None:  # type: ignore[no-untyped-def]
    """Every table of a tenant's schema has a replica identity (a primary key): a published table
    without one makes the source refuse its updates and deletes, so a move refuses to start."""
    schema = scratch_tenant.schema_name
    link = link_for(schema=schema, source="default", target="b")
    with django_db_blocker.unblock(), maintenance_session("default") as session:
        assert len(schema_tables(session, schema)) > 10
        assert tables_without_identity(session, schema) == []
        session.execute(f'CREATE TABLE "{schema}".keyless (n int)')
        assert tables_without_identity(session, schema) == ["keyless"]
        with pytest.raises(Conflict, match="keyless"):
            replication_check(link)
