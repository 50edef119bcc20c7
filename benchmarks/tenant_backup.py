"""One tenant's backup and restore into a second PostgreSQL server: seconds and bytes for a tenant
of ``--memories`` (default 100,000) memories.

The tenant ``bench_backup`` (dropped and made again on each run) holds ``--memories`` 384-d
memories with random unit-free vectors, written with SQL (``generate_series``; their HNSW index is
dropped for the fill and built again after it, as a restore builds it), ``--events`` events
appended by the real ``events_append`` (so the restored trail verifies), a few facts, a checkpoint,
a blackboard value and a signed anchor. ``tenant_backup`` writes the file (timed in this process);
a second embedded PostgreSQL server (``var/bench/pg16-second``, a database made for the run and
dropped after) gets Engram's public schema, then ``manage.py tenant_restore`` restores the file
there (its own figure, which includes the HNSW build and the trail's verification, and the
command's wall time with Django's start-up)::

    python -m devstack services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks tenant_backup [--memories 100000] [--events 2000]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _common import ROOT, django_setup, mib, record
from lifecycle import fresh_tenant, load, signing_key_env

MEMORIES = """
INSERT INTO memory_semanticmemory (id, agent_id, scope, memory_type, session_id, data_subject, tags,
    visible_to_agents, visible_to_roles, content, content_hash, metadata, importance, confidence, embedding,
    embedding_model, embedding_dimensions, created_at)
SELECT gen_random_uuid(), %(agent)s, 'shared', 'fact', 's-' || (g / 50), '', '{}', '{}', '{}',
    'memory number ' || g || ' about order ' || (g * 7), md5('m' || g) || md5('c' || g), '{}', 0.5, 1.0,
    ARRAY(SELECT random()::real FROM generate_series(1, 384) WHERE g > 0)::vector,
    'bench', 384, now() - interval '3 days'
FROM generate_series(1, %(n)s) g
"""


def fill(memories: int, events: int, slug: str = "bench_backup") -> object:
    """The tenant ``slug`` (made again) with its data (see the module docstring); returns it."""
    from django.db import connection
    from django.utils import timezone
    from django_tenants.utils import tenant_context

    from agents.services import agent_create
    from compliance.services.anchors import anchor_head
    from core.tenancy import maintenance
    from memory.checkpoints.services import checkpoint_save
    from memory.episodic.services import EventData, events_append
    from memory.working.services import blackboard_write

    tenant = fresh_tenant(slug)
    with tenant_context(tenant):
        agent = agent_create(by=None, name="support")
        with maintenance(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'semantic_hnsw_384'"
            )
            (indexdef,) = cursor.fetchone() or (None,)
            if indexdef:
                cursor.execute("DROP INDEX semantic_hnsw_384")
            cursor.execute(MEMORIES, {"agent": agent.pk, "n": memories})
            if indexdef:
                cursor.execute(indexdef)
        now = timezone.now()
        for start in range(0, events, 500):
            events_append(
                agent=agent,
                events=[
                    EventData(
                        session_id=f"s-{i // 50}",
                        kind="message",
                        role="user",
                        content=f"turn {i}",
                        occurred_at=now,
                    )
                    for i in range(start, min(events, start + 500))
                ],
            )
        policy = tenant.working_memory_policy
        checkpoint_save(
            agent=agent,
            session_id="s-0",
            step_index=1,
            idempotency_key="c1",
            state={"n": 1},
            plan=[],
            policy=policy,
        )
        blackboard_write(agent=agent, execution_id="e1", name="plan", value={"step": "ship"}, policy=policy)
        anchor_head(force=True)
    return tenant


def second_server(database: str) -> tuple[object, str]:
    """The second embedded server with ``database`` migrated (public schema); (server, URL)."""
    sys.path.insert(0, str(ROOT))
    from devstack import VAR_DIR
    from devstack.postgres import EmbeddedPostgres

    server = EmbeddedPostgres(VAR_DIR / "bench" / "pg16-second", database=database)
    url = server.start(app_user=os.environ.get("ENGRAM_PG_APP_USER") or None)
    manage(url, "migrate_schemas", "--shared", "--noinput", "-v", "0")
    return server, url


def manage(url: str, *args: str) -> str:
    env = {**os.environ, "DATABASE_URL": url, "ENGRAM_TENANT_LOGINS": "1"}
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=2000)
    args = parser.parse_args()
    signing_key_env()
    # this process fills and drops the tenant with SET ROLE: dropping a tenant on a connection with
    # tenant logins is refused (core.holds reads the tenant's schema inside the delete's transaction
    # of the shared login); the restore runs with logins on, as a server does
    os.environ["ENGRAM_TENANT_LOGINS"] = "0"
    django_setup()
    from compliance.services.backup import tenant_backup

    print(f"filling {args.memories} memories, {args.events} events ({load()})", flush=True)
    started = time.perf_counter()
    tenant = fill(args.memories, args.events)
    print(f"filled in {time.perf_counter() - started:.0f} s", flush=True)
    database = f"engram_bench_{uuid.uuid4().hex[:8]}"
    server, url = second_server(database)
    try:
        with tempfile.TemporaryDirectory(prefix="engram-backup-bench-") as work:
            out = Path(work) / "bench_backup.tar"
            backup = tenant_backup(tenant=tenant, out=out)  # type: ignore[arg-type]
            print(
                f"backup: {backup.seconds:.1f} s, {mib(backup.size)}, {backup.redis_keys} Redis keys",
                flush=True,
            )
            started = time.perf_counter()
            output = manage(url, "tenant_restore", "--in", str(out))
            wall = time.perf_counter() - started
        print(output.strip())
        match = re.search(r", ([\d.]+) s\n", output)
        restore = float(match.group(1)) if match else float("nan")
        print(f"restore: {restore:.1f} s ({wall:.1f} s with the command's start-up) ({load()})")
        record(
            memories=args.memories,
            events=args.events,
            backup_s=round(backup.seconds, 2),
            backup_bytes=backup.size,
            restore_s=restore,
            restore_wall_s=round(wall, 2),
            trail_intact="trail intact" in output,
        )
        return 0 if "trail intact" in output else 1
    finally:
        server._server.psql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE);')  # type: ignore[attr-defined]
        server._server.psql(  # type: ignore[attr-defined]
            "DO $$ DECLARE r text; BEGIN FOR r IN SELECT rolname FROM pg_roles "
            f"WHERE starts_with(rolname, '{database}_t_') LOOP EXECUTE format('DROP ROLE %I', r); END LOOP; END $$;"
        )
        server.stop()  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
