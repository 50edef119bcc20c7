"""The lifecycle's map of the stores is complete by construction (issue 28, item 5): every model of
the project is in a store of ``compliance.lifecycle.STORES`` or on the commented list of models
holding no personal data; the verification pass runs every store's check, and each check finds
what it looks for; export archives are withdrawn whatever their export's state, and an export
delivered twice runs once; Redis's append-only file and snapshot are rewritten, the planner's
statistics sampled again; the receipt says what lingers and until when."""

from __future__ import annotations

import io
import json
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

from django.apps import apps
from django.db import connection, transaction
from django_tenants.utils import tenant_context

from agents.models import IdempotencyRecord
from compliance import copies, lifecycle, services, verify_export
from compliance.models import ErasureStatus, Export, ExportStatus
from core.tenancy import maintenance
from memory.episodic.models import Event
from tenants.models import Tenant
from tests.compliance.conftest import append, finished, on_disk
from tests.factories import Caller, make_caller

SUBJECT = "cust-4711"
MARKER = "Zyxquorra"


def said(caller: Caller, session_id: str = "s-z", n: int = 3, subject: str = SUBJECT) -> None:
    response = caller.post(
        "/api/v1/events",
        [
            {
                "session_id": session_id,
                "kind": "message",
                "content": f"{MARKER} moved to Quokkaville ({i})"
                if subject == SUBJECT
                else f"tea number {i}",
                "occurred_at": "2026-11-30T09:00:00Z",
                **({"data_subject": subject} if subject else {}),
            }
            for i in range(n)
        ],
    )
    assert response.status_code == 201, response.content


def erase(tenant: Tenant, value: str = SUBJECT) -> Any:
    with tenant_context(tenant):
        request = services.erasure_request(
            kind="subject", value=value, legal_basis="Art. 17", note="", username="olga"
        )
        services.erasure_approve(request_id=request.pk, username="pavel")
        done = finished(services.erasure_run(request_id=request.pk))
        assert done.status == ErasureStatus.DONE, done.error
        return done


# --- the map --------------------------------------------------------------------------------------------


def test_every_model_is_in_a_store_or_holds_no_personal_data() -> None:
    mapped = {model._meta.label for store in lifecycle.STORES for model in store.models}
    every = {model._meta.label for model in apps.get_models(include_auto_created=True)}
    assert every - mapped - set(lifecycle.NO_PERSONAL_DATA) == set(), "a model in no store: map it"
    assert not mapped & set(lifecycle.NO_PERSONAL_DATA)
    assert set(lifecycle.NO_PERSONAL_DATA) <= every, "a model listed that no longer exists"
    assert all(reason.strip() for reason in lifecycle.NO_PERSONAL_DATA.values())


def test_every_store_is_checked_by_the_verification_pass_or_says_until_when(scratch_tenant: Tenant) -> None:
    """(On a committed tenant: an erasure runs outside a transaction, as its checks do.)"""
    from core.neo4j import get_driver

    target = lifecycle.Target("subject", SUBJECT, {})
    with tenant_context(scratch_tenant):
        report = lifecycle.verification_pass(kind="subject", value=SUBJECT, progress={})
        for store in lifecycle.STORES:
            if store.verify is None:
                assert store.lingers, f"{store.name}: neither checked nor said until when"
                continue
            counts = store.verify(target)
            if store.name == "graph" and get_driver() is None:
                continue
            assert counts and all(counts.values()), f"{store.name} checks nothing"
            for system, checks in counts.items():
                assert checks.items() <= report[system].items(), store.name
    names = [store.name for store in lifecycle.STORES]
    assert len(names) == len(set(names))


def _archive(path: Path, lines: list[dict[str, Any]]) -> None:
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    with tarfile.open(path, "w") as archive:
        info = tarfile.TarInfo("events.jsonl")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))


def test_each_check_finds_what_it_looks_for(alice: Caller) -> None:
    """A check that cannot find anything is no check: plant the subject in each copy."""
    backend = copies.result_backend()
    result_key = f"{backend.task_keyprefix.decode()}planted"
    with tenant_context(alice.tenant):
        IdempotencyRecord.objects.create(
            agent=alice.agent, key="k", fingerprint="f", response_status=201, response_body={"who": SUBJECT}
        )
        hold = services.hold_place(
            kind="subject", value=SUBJECT, reason="x", username="olga", four_eyes=False
        )
        services.hold_release(hold=hold, username="olga", reason="case closed")
        directory = copies.export_directory()
        directory.mkdir(parents=True, exist_ok=True)
        stray = directory / "planted.tar"
        _archive(stray, [{"seq": 1, "content": f"about {SUBJECT}", "redacted": False}])
        backend.client.set(result_key, json.dumps({"status": "FAILURE", "result": f"no {SUBJECT}"}), ex=60)
        try:
            report = lifecycle.verification_pass(kind="subject", value=SUBJECT, progress={})
        finally:
            stray.unlink()
            backend.client.delete(result_key)
    assert report["postgres"]["replay_answers_kept_from_before"] == 1
    assert report["postgres"]["replay_answers_naming_subject"] == 1
    assert report["postgres"]["legal_holds_naming_subject"] == 1
    assert report["files"]["archives_holding_erased"] == 1
    assert report["redis"]["task_results_naming_subject"] == 1
    assert not lifecycle.verification_clean(report)


# Tasks whose results Celery keeps (CELERY_RESULT_EXPIRES): what they return. Every other task of
# the project stores none (ignore_result).
RESULTS = {
    "compliance.tasks.chain_check": "a status",
    "compliance.tasks.chain_check_nightly": "a status",
    "compliance.tasks.chain_check_scheduled": "a status",
    "compliance.tasks.anchor_head": "a seq",
    "compliance.tasks.export_run": "a status",
    "compliance.tasks.retention_daily": "counts per layer",
    "compliance.tasks.retention_apply": "a status",
    "compliance.tasks.erasure_run": "a status",
    "memory.episodic.tasks.verify_chain": "counts, seqs and hashes",
}


def test_every_task_result_holds_no_personal_data() -> None:
    from config.celery import app

    app.loader.import_default_modules()
    kept = {
        name
        for name, task in app.tasks.items()
        if name.split(".")[0] in ("agents", "api", "compliance", "core", "memory", "tenants")
        and not task.ignore_result
    }
    assert kept == set(RESULTS)


# --- exports ----------------------------------------------------------------------------------------------


def test_an_erasure_withdraws_archives_in_any_state(alice: Caller, bob: Caller) -> None:
    with tenant_context(alice.tenant):
        before = services.export_run(export_id=str(services.export_request(username="aud", scope="all").pk))
    said(alice)
    said(bob, "s-other", subject="")
    with tenant_context(alice.tenant):
        done = services.export_run(export_id=str(services.export_request(username="aud", scope="all").pk))
        failed = services.export_run(
            export_id=str(services.export_request(username="aud", scope="session", session_id="s-z").pk)
        )
        # an export that ended failed with its archive on disk (a run delivered twice, before)
        Export.objects.filter(pk=failed.pk).update(status=ExportStatus.FAILED, error="OSError: twice")
        bobs = services.export_run(
            export_id=str(services.export_request(username="aud", scope="session", session_id="s-other").pk)
        )
        directory = copies.export_directory()
        stray = directory / "engram-export-deadbeef.tar"  # no export of the tenant's names it
        stray.write_bytes(Path(done.path).read_bytes())
        partial = directory / "engram-export-cafebabe.partial"  # a run that died midway
        partial.write_bytes(b"\0" * 100)
        assert all(Path(e.path).exists() for e in (before, done, failed, bobs))
    receipt = json.loads(erase(alice.tenant).receipt)
    with tenant_context(alice.tenant):
        for gone in (done, failed):
            gone.refresh_from_db()
            assert not (directory / gone.filename).exists() and gone.path == ""
            assert "withdrawn by erasure" in gone.error
        assert not stray.exists() and not partial.exists()
        for kept in (before, bobs):  # nothing of the subject in them
            kept.refresh_from_db()
            assert Path(kept.path).exists() and verify_export.verify(kept.path).ok
    assert sorted(receipt["stores"]["exports"]["archives_withdrawn"]) == sorted(
        [str(done.pk), str(failed.pk)]
    )
    # (the tenant's folder may hold other tests' archives, whose rows were rolled back)
    assert {stray.name, partial.name} <= set(receipt["stores"]["exports"]["stray_archives_deleted"])
    assert receipt["verification"]["files"] == {"archives_holding_erased": 0}


def waiting_for_me() -> int:
    """How many other sessions wait, directly or behind another waiter, for a lock this connection
    holds."""
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH RECURSIVE waiter(pid) AS ("
            " SELECT pid FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))"
            " UNION SELECT a.pid FROM pg_stat_activity a JOIN waiter w ON w.pid = ANY(pg_blocking_pids(a.pid))"
            ") SELECT count(*) FROM waiter"
        )
        (count,) = cursor.fetchone()
    return int(count)


def test_an_export_delivered_twice_runs_once(scratch_tenant: Tenant) -> None:
    alice = make_caller(scratch_tenant, "alice")
    with tenant_context(scratch_tenant):
        append(alice.agent, 3000, session_id="s-big")
        export = services.export_request(username="aud", scope="all")
    runs: list[Any] = []

    def run() -> None:
        with tenant_context(scratch_tenant):
            runs.append(services.export_run(export_id=str(export.pk)))
        connection.close()

    with tenant_context(scratch_tenant), transaction.atomic():
        # both deliveries reach the export before either starts writing: each has ended or waits
        # for this transaction's lock on the export
        Export.objects.select_for_update().get(pk=export.pk)
        workers = [threading.Thread(target=run) for _ in range(2)]
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + 60
        while sum(not w.is_alive() for w in workers) + waiting_for_me() < len(workers):
            assert time.monotonic() < deadline, "the deliveries did not reach the export"
            time.sleep(0.05)
    for worker in workers:
        worker.join(120)
    with tenant_context(scratch_tenant):
        export.refresh_from_db()
        assert export.status == ExportStatus.DONE, export.error
        report = verify_export.verify(export.path)
        assert report.ok, report
        assert Event.objects.filter(payload_index__action="export").count() == 1
        assert sorted(p.name for p in copies.export_directory().iterdir()) == [export.filename]


# --- Redis's files, the planner's statistics, what lingers ----------------------------------------------------


def test_an_erasure_rewrites_redis_files_on_disk(alice: Caller, redis_on_disk: Any) -> None:
    client, folder = redis_on_disk
    said(alice)
    turn = alice.post("/api/v1/sessions/s-z/window", {"role": "user", "content": f"{MARKER} says hi"})
    assert turn.status_code == 201, turn.content
    client.save()
    time.sleep(1.2)  # appendfsync everysec
    assert MARKER.encode() in on_disk(folder)
    receipt = json.loads(erase(alice.tenant).receipt)
    assert MARKER.encode() not in on_disk(folder)
    assert receipt["stores"]["redis_files"] == {"aof": "rewritten", "rdb": "rewritten"}
    assert receipt["verification"]["redis"]["files_not_rewritten"] == 0


def test_the_planner_statistics_forget_an_erased_subject(scratch_tenant: Tenant) -> None:
    """ANALYZE samples column values into ``pg_stats`` (most common values, histogram bounds);
    the erasure samples again what is left, and drops the statistics of a table it left empty
    (ANALYZE keeps an empty table's old ones): here the events, and the checkpoints, which were
    all the subject's."""
    alice = make_caller(scratch_tenant, "alice")
    said(alice, n=60)
    said(alice, "s-other", n=20, subject="cust-1")
    for step in (1, 2):
        saved = alice.post(
            "/api/v1/sessions/s-z/checkpoints",
            {
                "step_index": step,
                "idempotency_key": f"k{step}",
                "state": {"t": MARKER},
                "data_subject": SUBJECT,
            },
        )
        assert saved.status_code == 201, saved.content
    schema = scratch_tenant.schema_name

    def sampled(table: str) -> str:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT coalesce(string_agg(concat_ws(' ', most_common_vals::text, histogram_bounds::text), ' '), '') "
                "FROM pg_stats WHERE schemaname = %s AND tablename = %s",
                [schema, table],
            )
            return str(cursor.fetchone()[0])

    with tenant_context(scratch_tenant):
        with maintenance(), connection.cursor() as cursor:
            cursor.execute("ANALYZE memory_event")
            cursor.execute("ANALYZE memory_checkpoint")
        assert SUBJECT in sampled("memory_event") and SUBJECT in sampled("memory_checkpoint")
    receipt = json.loads(erase(scratch_tenant).receipt)
    with tenant_context(scratch_tenant):
        for table in ("memory_event", "memory_checkpoint"):
            assert SUBJECT not in sampled(table) and MARKER not in sampled(table), (table, sampled(table))
    assert receipt["verification"]["postgres"]["statistics_naming_subject"] == 0


def test_the_receipt_says_what_lingers_and_until_when(alice: Caller, settings: Any) -> None:
    settings.ENGRAM = {**settings.ENGRAM, "BACKUP_RETENTION_DAYS": 21}
    said(alice)
    receipt = json.loads(erase(alice.tenant).receipt)
    lingering = {item["store"]: item["until"] for item in receipt["lingering"]}
    assert "21 days" in lingering["PostgreSQL WAL archive and backups"]
    assert "checkpoint_timeout" in lingering["PostgreSQL write-ahead log"]
    assert "Neo4j transaction logs" in lingering and "Redis replicas' own files" in lingering
