"""One tenant backed up on the suite's PostgreSQL and restored into a second embedded PostgreSQL
server (issue 36, item 4): its rows, its login, its Redis keys, its trail, and isolation there."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection
from django_tenants.utils import tenant_context

from compliance.services.anchors import anchor_head
from compliance.services.backup import tenant_backup, tenant_restore
from core.errors import Conflict, InvalidInput
from core.redis import get_redis
from core.tenancy import activate_public, maintenance_role, tenant_password, tenant_role
from memory.episodic.models import Event
from memory.semantic.models import SemanticMemory
from memory.working.services import tenant_keys
from tenants.models import Tenant
from tests.compliance.servers import TABLES, manage
from tests.factories import fact, make_caller
from tests.factories import test_database_env as child_env


def _counts(cursor: psycopg.Cursor, schema: str) -> dict[str, int]:  # type: ignore[type-arg]
    out = {}
    for name, table in TABLES.items():
        cursor.execute(f'SELECT count(*) FROM "{schema}"."{table}"')  # type: ignore[arg-type]
        row = cursor.fetchone()
        assert row is not None
        out[name] = int(row[0])
    return out


def test_a_tenant_moves_to_another_server_whole(  # type: ignore[no-untyped-def]
    scratch_tenant: Tenant, second_server, django_db_blocker, tmp_path: Path
) -> None:
    url, su = second_server
    schema = scratch_tenant.schema_name
    with django_db_blocker.unblock():
        alice = make_caller(scratch_tenant, "alice")
        event = {"session_id": "s1", "kind": "message", "role": "user", "occurred_at": "2026-12-01T09:00:00Z"}
        assert (
            alice.post("/api/v1/events", [{**event, "content": f"turn {i}"} for i in range(3)]).status_code
            == 201
        )
        for text in ("Maria prefers green tea.", "The deploy window is Friday at 18:00."):
            assert alice.post("/api/v1/memories", {"content": text}).status_code == 201
        assert alice.post("/api/v1/facts", fact("Maria", "works_at", {"entity": "Acme"})).status_code == 201
        saved = alice.post(
            "/api/v1/sessions/s1/checkpoints",
            {
                "step_index": 1,
                "idempotency_key": "c1",
                "state": {"n": 1},
                "channels": {"messages": {"version": "1", "value": {"type": "json", "data": "WyJoaSJd"}}},
            },
        )
        assert saved.status_code == 201, saved.content
        put = alice.client.put(
            "/api/v1/executions/e1/blackboard/plan", {"value": {"step": "ship"}}, format="json"
        )
        assert put.status_code in (200, 201), put.content
        with tenant_context(scratch_tenant):
            assert anchor_head(force=True) is not None
            keys_before = tenant_keys()
        activate_public()
        out = tmp_path / f"{schema}.tar"
        call_command("tenant_backup", "--tenant", schema, "--out", str(out))
        with connection.cursor() as cursor:  # the public schema's work: the maintenance role
            source = _counts(cursor, schema)  # type: ignore[arg-type]
        with tenant_context(scratch_tenant):
            get_redis().delete(*keys_before)  # the other server's Redis has none of them
        activate_public()
    assert source == {"SemanticMemory": 2, "Event": 3, "Fact": 1, "Checkpoint": 1, "CheckpointBlob": 1}, (
        source
    )
    assert any("e1" in key for key in keys_before), keys_before

    restored = manage(url, "tenant_restore", "--in", str(out))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "trail intact" in restored.stdout, restored.stdout
    assert f"{len(keys_before)} Redis keys" in restored.stdout, restored.stdout
    if os.environ.get("NEO4J_URI"):
        assert "1 facts projected" in restored.stdout, restored.stdout

    # the rows, in the second server: the events plus the restore's own record
    database = su.info.dbname
    target = _counts(su.cursor(), schema)
    assert target == {**source, "Event": source["Event"] + 1}, target
    verified = manage(url, "verify_chain", "--tenant", schema)
    assert verified.returncode == 0 and "chain intact: 4 events verified" in verified.stdout, verified.stdout
    assert "1 anchors checked" in verified.stdout, verified.stdout
    # the Redis keys are back, values and all
    with django_db_blocker.unblock():
        with tenant_context(scratch_tenant):
            assert tenant_keys() == keys_before
        got = alice.get("/api/v1/executions/e1/blackboard/alice/plan")
        assert got.status_code == 200 and got.json()["value"] == {"step": "ship"}, got.content

    # its login exists there (the password this application derives), and is contained
    role = tenant_role(schema, database=database)
    host = su.info.host
    with psycopg.connect(host=host, dbname=database, user=role, password=tenant_password(role)) as login:
        row = login.execute(f'SELECT count(*) FROM "{schema}"."{TABLES["SemanticMemory"]}"').fetchone()
        assert row == (2,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            login.execute("SELECT count(*) FROM public.tenants_tenant")
        login.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            login.execute(f"SET ROLE {maintenance_role()}")
    # another tenant of the second server cannot read it
    other = f"other_{uuid.uuid4().hex[:6]}"
    made = manage(url, "create_tenant", other)
    assert made.returncode == 0, made.stderr
    other_role = tenant_role(other, database=database)
    with psycopg.connect(
        host=host, dbname=database, user=other_role, password=tenant_password(other_role)
    ) as peer:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            peer.execute(f'SELECT count(*) FROM "{schema}"."{TABLES["Event"]}"')

    # a second restore of the same tenant is refused
    again = manage(url, "tenant_restore", "--in", str(out))
    assert again.returncode != 0 and "exists on this server already" in again.stderr, again.stderr


def test_a_damaged_backup_is_refused(tmp_path: Path, db) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"not a tar file")
    with pytest.raises(InvalidInput):
        tenant_restore(path=bad)


def test_restoring_over_an_existing_tenant_is_a_conflict(
    scratch_tenant: Tenant, django_db_blocker, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    with django_db_blocker.unblock():
        out = tmp_path / "t.tar"
        tenant_backup(tenant=scratch_tenant, out=out)
        with pytest.raises(Conflict):
            tenant_restore(path=out)


def test_a_tenant_moves_between_servers_while_another_keeps_working(  # type: ignore[no-untyped-def]
    two_tenants, second_server, django_db_blocker
) -> None:
    """Issue 36, item 5: one tenant's schema moves to the second server while both tenants' agents
    keep writing through a live server; the other tenant's writes all succeed, the moved tenant's
    answer 503 only during its pause and land on the second server afterwards."""
    import threading
    import time

    import httpx
    from django_tenants.utils import schema_exists

    from tests.factories import asgi_server

    url, su = second_server
    mover, stayer = two_tenants
    schema = mover.tenant.schema_name
    servers = {"ENGRAM_DB_SERVERS": f"b={url}"}
    results: dict[str, list[tuple[float, int]]] = {"mover": [], "stayer": []}
    stop = threading.Event()

    def write(who: str, key: str, port: int) -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            n = 0
            while not stop.is_set():
                n += 1
                body = {
                    "session_id": "s1",
                    "kind": "message",
                    "content": f"{who} {n}",
                    "occurred_at": "2026-12-01T09:00:00Z",
                }
                answer = http.post("/api/v1/events", json=body, headers={"Authorization": f"Bearer {key}"})
                results[who].append((time.monotonic(), answer.status_code))
                time.sleep(0.05)

    with asgi_server(**servers) as port:
        threads = [
            threading.Thread(target=write, args=(who, caller.key, port))
            for who, caller in (("mover", mover), ("stayer", stayer))
        ]
        for thread in threads:
            thread.start()
        try:
            time.sleep(2)
            moved = manage(
                child_env()["DATABASE_URL"], "tenant_move", "--tenant", schema, "--to", "b", **servers
            )
            assert moved.returncode == 0, moved.stdout + moved.stderr
            deadline = time.monotonic() + 30  # the server's cached tenant row expires
            while time.monotonic() < deadline and (not results["mover"] or results["mover"][-1][1] != 201):
                time.sleep(0.2)
            time.sleep(1)
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
    assert "moved" in moved.stdout, moved.stdout
    stayer_codes = {code for _, code in results["stayer"]}
    assert stayer_codes == {201}, results["stayer"]
    mover_codes = [code for _, code in results["mover"]]
    assert set(mover_codes) <= {201, 503}, mover_codes
    assert mover_codes[-1] == 201 and 503 in mover_codes, mover_codes
    paused = [t for t, code in results["mover"] if code == 503]
    print(f"\nmoved tenant: 503 for {paused[-1] - paused[0]:.2f} s; {moved.stdout.strip()}")

    # the moved tenant's rows are on the second server only, every accepted write among them
    with django_db_blocker.unblock():
        assert Tenant.objects.filter(schema_name=schema).values_list("database", flat=True).get() == "b"
        assert not schema_exists(schema)
    row = su.execute(f'SELECT count(*) FROM "{schema}"."{TABLES["Event"]}"').fetchone()
    assert row == (mover_codes.count(201) + 1,)  # and the move's own record
    verified = manage(child_env()["DATABASE_URL"], "verify_chain", "--tenant", schema, **servers)
    assert verified.returncode == 0 and "chain intact" in verified.stdout, verified.stdout + verified.stderr


def test_a_restore_reapplies_the_erasures_made_after_its_backup(  # type: ignore[no-untyped-def]
    django_db_setup, django_db_blocker, tmp_path: Path
) -> None:
    """Decision 0091: a backup made before an erasure holds its target; restoring it executes the
    erasure again (from the public schema's ledger), so the subject never comes back, and the
    trail says so. Another subject's data is kept."""
    from compliance import services
    from compliance.models import ErasureRequest, ErasureStatus
    from compliance.services.reapply import REAPPLIER
    from tenants.services import tenant_create

    subject, secret = "zoltan@example.com", "Zoltan's passport number is X1234567."
    with django_db_blocker.unblock():
        tenant, _ = tenant_create(slug=f"restore_{uuid.uuid4().hex[:8]}")
        schema = tenant.schema_name
        try:
            alice = make_caller(tenant, "alice")
            for text, who in ((secret, subject), ("Maria likes green tea.", "maria@example.com")):
                answer = alice.post("/api/v1/memories", {"content": text, "data_subject": who})
                assert answer.status_code == 201, answer.content
                event = {"session_id": f"s-{who}", "kind": "message", "content": text, "data_subject": who}
                answer = alice.post("/api/v1/events", {**event, "occurred_at": "2026-12-01T09:00:00Z"})
                assert answer.status_code == 201, answer.content
            activate_public()
            out = tmp_path / "before-erasure.tar"
            tenant_backup(tenant=tenant, out=out)
            with tenant_context(tenant):
                request = services.erasure_request(
                    kind="subject", value=subject, legal_basis="GDPR Art. 17", note="", username="olga"
                )
                services.erasure_approve(request_id=request.pk, username="pavel")
                assert services.erasure_run(request_id=request.pk).status == ErasureStatus.DONE
            activate_public()
            tenant.auto_drop_schema = True
            tenant.delete(force_drop=True)  # the tenant is lost; its backup predates the erasure

            restored = tenant_restore(path=out)
            assert restored.trail_ok
            with tenant_context(restored.tenant):
                assert not SemanticMemory.objects.filter(content__contains="passport").exists()
                assert not Event.objects.filter(content__contains="passport").exists()
                assert SemanticMemory.objects.filter(data_subject="maria@example.com").count() == 1
            assert [(r.erasure_id, r.status) for r in restored.erasures_reapplied] == [
                (str(request.pk), ErasureStatus.DONE)
            ]
            with tenant_context(restored.tenant):
                again = ErasureRequest.objects.get(pk=restored.erasures_reapplied[0].request_id)
                assert again.requested_by == REAPPLIER and again.receipt and not again.value
                record = Event.objects.filter(actor="job:tenant_restore").get()
                assert record.payload["erasures_reapplied"][0]["erasure_id"] == str(request.pk)
        finally:
            activate_public()
            for row in Tenant.objects.filter(schema_name=schema):
                row.auto_drop_schema = True
                row.delete(force_drop=True)
