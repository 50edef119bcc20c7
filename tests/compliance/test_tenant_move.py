"""A tenant moved to a second embedded PostgreSQL server while units of work of it are in flight
(decision 0090): a slow request and a slow task that began before the move either finish before
the copy (their writes are on the new server) or are refused; nothing acknowledged stays behind on
the old server. A move whose in-flight work outlasts its wait gives up and leaves the tenant where
it was, the work untouched."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
from django_tenants.utils import schema_exists, tenant_context

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
        move = subprocess.Popen(
            [sys.executable, "manage.py", "tenant_move", "--tenant", schema, "--to", "b"],
            cwd=BASE_DIR,
            env=child_env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
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
        asker = threading.Thread(target=_slow_request, args=(port, mover.key, 12, request))
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
