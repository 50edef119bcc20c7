"""A tenant of ``--memories`` (default 100,000) memories backed up, restored into a second
PostgreSQL server, and moved to that server while an agent writes to it: the seconds of each, and
the move's pause (from the tenant refusing work to its switch).

The tenant ``bench_move`` is filled as ``tenant_backup.py`` fills its tenant (memories with SQL,
events through ``events_append``; ``--reuse`` keeps one already filled with at least that many
memories). The backup is timed in this process, the restore is ``manage.py tenant_restore`` into a
database of a second embedded server (``var/bench/pg16-second``). The move is ``manage.py
tenant_move`` into another database of that server, with a web server (tenant logins on) serving
the tenant, and a writer appending one event every ``--interval`` s through ``POST
/api/v1/events`` from before the move to after it: its 201s before the pause prove the copy did
not stop the tenant, its 503s measure the pause from outside, and every acknowledged event is
looked up on the target afterwards::

    ENGRAM_PG_APP_USER=engram_app python -m devstack services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks tenant_move [--memories 100000] [--events 2000] [--reuse] --json

The source server needs ``wal_level = logical`` (devstack's servers have it from decision 0103 on;
a data folder made before gets it at its next start).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import ROOT, django_setup, mib, record, web_server
from lifecycle import load, signing_key_env
from tenant_backup import fill, second_server

SLUG = "bench_move"
SESSION = "move-writer"


def tenant_ready(memories: int, events: int, reuse: bool) -> Any:
    """The tenant ``bench_move``: the one there when ``reuse`` and it holds ``memories``, else
    filled again."""
    from django_tenants.utils import tenant_context

    from memory.semantic.models import SemanticMemory
    from tenants.models import Tenant

    # the row of a tenant moved away by an earlier run (its server's database is gone)
    Tenant.objects.filter(schema_name=SLUG).exclude(database="default").delete()
    tenant = Tenant.objects.filter(schema_name=SLUG).first()
    if reuse and tenant is not None:
        with tenant_context(tenant):
            if SemanticMemory.objects.count() >= memories:
                return tenant
    return fill(memories, events, slug=SLUG)


def api_key(tenant: Any) -> str:
    from django_tenants.utils import tenant_context

    from agents.models import Agent
    from agents.services import api_key_create

    with tenant_context(tenant):
        return api_key_create(by=None, agent=Agent.objects.get(name="support"), name="move-bench")[1]


def manage(*args: str, **env: str) -> tuple[int, str]:
    """``manage.py ARGS`` with tenant logins on and ``env``; (exit status, stdout + stderr)."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, "ENGRAM_TENANT_LOGINS": "1", **env},
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


class Writer(threading.Thread):
    """Appends one event every ``interval`` s to the tenant through the API until stopped; keeps
    (seconds since start, status, content) of each attempt."""

    def __init__(self, url: str, key: str, interval: float) -> None:
        super().__init__(daemon=True)
        self.url, self.key, self.interval = url, key, interval
        self.stop = threading.Event()
        self.attempts: list[tuple[float, int, str]] = []
        self.started = time.perf_counter()

    def run(self) -> None:
        import httpx

        with httpx.Client(base_url=self.url, timeout=30) as http:
            n = 0
            while not self.stop.is_set():
                n += 1
                content = f"write {n}"
                body = [
                    {
                        "session_id": SESSION,
                        "kind": "message",
                        "role": "user",
                        "content": content,
                        "occurred_at": datetime.now(UTC).isoformat(),
                    }
                ]
                try:
                    status = http.post(
                        "/api/v1/events", json=body, headers={"Authorization": f"Bearer {self.key}"}
                    ).status_code
                except httpx.TransportError:
                    status = 0
                self.attempts.append((time.perf_counter() - self.started, status, content))
                time.sleep(self.interval)


def on_target(url: str) -> set[str]:
    """The contents of the writer's events in the moved schema at ``url``."""
    import psycopg

    from core.tenancy import maintenance_role
    from memory.episodic.models import Event

    with psycopg.connect(url) as session:
        session.execute(f'SET ROLE "{maintenance_role()}"')
        rows = session.execute(
            f'SELECT content FROM "{SLUG}"."{Event._meta.db_table}" WHERE session_id = %s',
            [SESSION],
        ).fetchall()
    return {row[0] for row in rows}


def backup_restore(tenant: Any, url: str) -> dict[str, Any]:
    """Back the tenant up and restore it into the database at ``url``; the figures."""
    from compliance.services.backup import tenant_backup

    with tempfile.TemporaryDirectory(prefix="engram-move-bench-") as work:
        out = Path(work) / f"{SLUG}.tar"
        backup = tenant_backup(tenant=tenant, out=out)
        print(f"backup: {backup.seconds:.1f} s, {mib(backup.size)} ({load()})", flush=True)
        started = time.perf_counter()
        status, output = manage("tenant_restore", "--in", str(out), DATABASE_URL=url)
        wall = time.perf_counter() - started
    if status != 0:
        sys.exit(f"tenant_restore failed:\n{output}")
    match = re.search(r", ([\d.]+) s\n", output)
    restore = float(match.group(1)) if match else float("nan")
    print(f"restore: {restore:.1f} s ({wall:.1f} s with the command's start-up) ({load()})", flush=True)
    return {
        "backup_s": round(backup.seconds, 2),
        "backup_bytes": backup.size,
        "restore_s": restore,
        "restore_wall_s": round(wall, 2),
        "restore_trail_intact": "trail intact" in output,
    }


def move(tenant: Any, url: str, interval: float) -> dict[str, Any]:
    """Move the tenant to the database at ``url`` while a writer appends events; the figures."""
    env = {"ENGRAM_DB_SERVERS": f"b={url}", "ENGRAM_TENANT_LOGINS": "1"}
    with web_server("uvicorn", workers=1, env=env) as server:
        writer = Writer(server.url, api_key(tenant), interval)
        writer.start()
        time.sleep(3)
        started = time.perf_counter()
        status, output = manage("tenant_move", "--tenant", SLUG, "--to", "b", **env)
        wall = time.perf_counter() - started
        time.sleep(3)
        writer.stop.set()
        writer.join(30)
    print(output.strip(), flush=True)
    if status != 0:
        sys.exit("tenant_move failed")
    figures = {k: float(v) for k, v in re.findall(r"(paused|waited|copy|total) ([\d.]+) s", output)}
    acknowledged = {content for _, code, content in writer.attempts if code == 201}
    refused = [t for t, code, _ in writer.attempts if code == 503]
    others = sorted({code for _, code, _ in writer.attempts} - {201, 503})
    missing = acknowledged - on_target(url)
    window = (max(refused) - min(refused)) if refused else 0.0
    print(
        f"writer: {len(acknowledged)} writes acknowledged, {len(refused)} refused (503) over "
        f"{window:.2f} s, other statuses {others}; acknowledged but not on the target: {len(missing)}",
        flush=True,
    )
    return {
        "move_pause_s": figures.get("paused"),
        "move_waited_s": figures.get("waited"),
        "move_copy_s": figures.get("copy"),
        "move_total_s": figures.get("total"),
        "move_wall_s": round(wall, 2),
        "writes_acknowledged": len(acknowledged),
        "writes_refused": len(refused),
        "writes_refused_window_s": round(window, 2),
        "writes_other_statuses": others,
        "acknowledged_missing_on_target": len(missing),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between the writer's events")
    parser.add_argument("--reuse", action="store_true", help="keep a bench_move tenant already filled")
    args = parser.parse_args()
    signing_key_env()
    os.environ["ENGRAM_TENANT_LOGINS"] = "0"  # as tenant_backup.py: this process fills with SET ROLE
    django_setup()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"{args.memories} memories, {args.events} events; uptime: {uptime}", flush=True)
    started = time.perf_counter()
    tenant = tenant_ready(args.memories, args.events, args.reuse)
    print(f"tenant ready in {time.perf_counter() - started:.0f} s", flush=True)
    restore_db, move_db = (f"engram_bench_{uuid.uuid4().hex[:8]}" for _ in range(2))
    server, restore_url = second_server(restore_db)
    _, move_url = second_server(move_db)
    try:
        figures = backup_restore(tenant, restore_url)
        figures |= move(tenant, move_url, args.interval)
        after = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
        record(
            memories=args.memories, events=args.events, uptime_before=uptime, uptime_after=after, **figures
        )
        print(f"uptime after: {after}")
        return 0 if figures["acknowledged_missing_on_target"] == 0 else 1
    finally:
        for database in (restore_db, move_db):
            server._server.psql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE);')
            server._server.psql(
                "DO $$ DECLARE r text; BEGIN FOR r IN SELECT rolname FROM pg_roles "
                f"WHERE starts_with(rolname, '{database}_t_') LOOP EXECUTE format('DROP ROLE %I', r); "
                "END LOOP; END $$;"
            )
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
