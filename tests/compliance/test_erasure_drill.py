"""The erasure drill of issue 28 (items 1, 2 and 5), end to end on a committed tenant with
PostgreSQL, Neo4j and Redis (with an append-only file and snapshots): a data subject is written
through every write path, each request with an ``Idempotency-Key``, read back by another agent,
summarised, exported before and after (one export left failed with its archive on disk); a legal
hold then refuses every delete path; after its release the erasure runs, and a search of every
text column of the tenant's schema and ``public``, of Neo4j, of every Redis key and Redis's files,
of the export archives and of every replay finds nothing of the subject; the receipt says so, and
what lingers."""

from __future__ import annotations

import base64
import json
import struct
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from django_tenants.utils import tenant_context

from agents.models import Scope
from compliance import copies, services
from compliance.models import ErasureStatus, Export, ExportStatus, RetentionRule
from core.errors import Conflict
from core.redis import get_redis
from core.tenancy import maintenance
from memory.consolidation.services.schedule import consolidate
from memory.store.models import StoreItem
from memory.store.services import items_expire
from tenants.models import Tenant
from tests.compliance.conftest import append, finished, on_disk
from tests.factories import (
    Caller,
    fact,
    make_caller,
    projection_caught_up,
    requires_model,
    skill_publish,
    skill_seed,
    unavailable,
)

SUBJECT = "cust-7342"
MARKER = "Vexquilber"  # in the subject's data only
SAID = f"{MARKER} lives at Elmstreet 5"
NEEDLES = (MARKER, SUBJECT)

# Text-like column types searched in PostgreSQL (bytea is searched for the bytes)
TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb", "tsvector", "ARRAY", "USER-DEFINED")


def sent(caller: Caller, path: str, body: Any, key: str, replays: list[tuple[Caller, str, Any, str]]) -> Any:
    response = caller.post(path, body, **{"Idempotency-Key": key})
    assert response.status_code in (200, 201), (path, response.content)
    replays.append((caller, path, body, key))
    return response.json()


def postgres_holding(schemas: tuple[str, ...]) -> dict[str, int]:
    """Every column of a text-like type (cast to text, case-insensitive) or bytea (raw bytes) of
    every table of ``schemas`` holding a needle: ``{"schema.table.column": rows}``."""
    found = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.table_schema, c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
            "JOIN information_schema.tables t USING (table_schema, table_name) "
            "WHERE c.table_schema = ANY(%s) AND t.table_type = 'BASE TABLE'",
            [list(schemas)],
        )
        columns = cursor.fetchall()
        for schema, table, column, kind in columns:
            ident = f'"{schema}"."{table}"'
            if kind == "bytea":
                where = " OR ".join(f"position(convert_to(%s, 'UTF8') in \"{column}\") > 0" for _ in NEEDLES)
                params: list[Any] = list(NEEDLES)
            elif kind in TEXT_TYPES:
                where = f'"{column}"::text ILIKE ANY(%s)'
                params = [[f"%{n}%" for n in NEEDLES]]
            else:
                continue
            cursor.execute(f"SELECT count(*) FROM {ident} WHERE {where}", params)
            rows = int(cursor.fetchone()[0])
            if rows:
                found[f"{schema}.{table}.{column}"] = rows
        # the planner's statistics: sampled values of every column (and of expression indexes)
        cursor.execute(
            "SELECT schemaname, tablename, attname FROM pg_stats WHERE schemaname = ANY(%s) AND "
            "concat_ws(' ', most_common_vals::text, histogram_bounds::text, most_common_elems::text) ILIKE ANY(%s)",
            [list(schemas), [f"%{n}%" for n in NEEDLES] + [f"%{MARKER[:8].lower()}%"]],
        )
        for schema, table, column in cursor.fetchall():
            found[f"pg_stats {schema}.{table}.{column}"] = 1
    return found


def neo4j_holding(driver: Any, schema: str) -> int:
    """Nodes and relationships of the tenant with a needle in any property (read back whole)."""
    records, _, _ = driver.execute_query(
        "MATCH (n {tenant: $t}) RETURN properties(n) AS p UNION ALL "
        "MATCH ()-[r {tenant: $t}]->() RETURN properties(r) AS p",
        t=schema,
    )
    texts = [json.dumps(r["p"], default=str).lower() for r in records]
    return sum(1 for text in texts if any(n.lower() in text for n in NEEDLES))


def redis_holding() -> list[str]:
    """Every key of the server (every tenant's, Celery's) whose name or value holds a needle."""
    client = get_redis()
    found = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key).decode()
        if kind == "string":
            blob = client.get(key) or b""
        elif kind == "hash":
            blob = b" ".join(k + b"=" + v for k, v in client.hgetall(key).items())
        elif kind == "list":
            blob = b" ".join(client.lrange(key, 0, -1))
        elif kind == "set":
            blob = b" ".join(client.smembers(key))
        elif kind == "zset":
            blob = b" ".join(client.zrange(key, 0, -1))
        elif kind == "stream":
            blob = b" ".join(str(entry).encode() for entry in client.xrange(key))
        else:
            blob = b""
        text = (key + b" " + blob).lower()
        if any(n.lower().encode() in text for n in NEEDLES):
            found.append(key.decode())
    return found


def files_holding(directory: Path) -> list[str]:
    if not directory.is_dir():
        return []
    return [
        p.name
        for p in directory.rglob("*")
        if p.is_file() and any(n.lower().encode() in p.read_bytes().lower() for n in NEEDLES)
    ]


PAGE = 8192


def page_items(blob: bytes) -> list[bytes]:
    """The items of every page of a relation's file that its page says are there (line pointers
    marked normal: a heap's tuples, live or dead not yet vacuumed; an index's entries), read as
    PostgreSQL's page layout (``bufpage.h``: a 24-byte header, then 4-byte line pointers up to
    ``pd_lower``). What a VACUUM freed is no item, whatever bytes are left in the free space."""
    found = []
    for start in range(0, len(blob) - PAGE + 1, PAGE):
        page = blob[start : start + PAGE]
        lower, upper, special = (int.from_bytes(page[i : i + 2], "little") for i in (12, 14, 16))
        if not 24 <= lower <= upper <= special <= PAGE:
            continue  # a new or empty page
        for at in range(24, lower, 4):
            word = int.from_bytes(page[at : at + 4], "little")
            offset, flags, length = word & 0x7FFF, (word >> 15) & 3, word >> 17
            if flags == 1 and length:
                found.append(page[offset : offset + length])
    return found


def relation_files_holding(schema: str, extra: dict[str, bytes]) -> dict[str, list[str]]:
    """As the server's superuser, after a CHECKPOINT (every page on disk): the tables, TOAST
    tables and indexes of ``schema`` whose items hold a needle or one of ``extra`` (name: bytes; a
    text-search lexeme, an embedding's first floats). Skipped without a superuser of a local
    server to ask."""
    import psycopg

    params = connection.settings_dict
    try:
        su = psycopg.connect(host=params["HOST"], dbname=params["NAME"], user="postgres", autocommit=True)
    except psycopg.Error:
        unavailable("no superuser of a local PostgreSQL to read its files with")
    with su:
        su.execute("CHECKPOINT")
        data_dir = Path(su.execute("SHOW data_directory").fetchone()[0])
        relations = su.execute(
            "SELECT c.relname, c.relkind, pg_relation_filepath(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'i', 'm') "
            "UNION ALL SELECT t.relname || ' (TOAST)', t.relkind, pg_relation_filepath(t.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_class t ON t.oid = c.reltoastrelid "
            "WHERE n.nspname = %s",
            [schema, schema],
        ).fetchall()
    found = {}
    for name, kind, path in relations:
        if path is None:
            continue
        base = data_dir / path
        segments = [base, *sorted(base.parent.glob(base.name + ".[0-9]*"))]
        items = [
            item for segment in segments if segment.exists() for item in page_items(segment.read_bytes())
        ]
        wanted = {**{n: n.encode() for n in NEEDLES}, **extra}
        hits = sorted(name for name, needle in wanted.items() if any(needle in item for item in items))
        if hits:
            found[f"{name} ({kind})"] = hits
    return found


def export_now(**scope: Any) -> Export:
    return services.export_run(export_id=str(services.export_request(username="auditor", **scope).pk))


@requires_model
def test_the_erasure_drill(graph_tenant: Tenant, neo4j_driver: Any, redis_on_disk: Any) -> None:
    tenant, schema = graph_tenant, graph_tenant.schema_name
    client, redis_folder = redis_on_disk
    alice, bob = make_caller(tenant, "alice"), make_caller(tenant, "bob")
    carol = make_caller(tenant, "carol", scopes=(Scope.READ, Scope.WRITE, Scope.CURATE))
    replays: list[tuple[Caller, str, Any, str]] = []

    with tenant_context(tenant):
        append(bob.agent, 3, session_id="s-before")
        before = export_now(scope="all")  # nothing of the subject: kept

    # --- the subject through every write path, each with an Idempotency-Key --------------------------------
    subject = {"data_subject": SUBJECT}
    event = {"session_id": "s-v", "kind": "message", "role": "user", "occurred_at": "2026-11-30T09:00:00Z"}
    sent(
        alice,
        "/api/v1/events",
        [{**event, "content": f"{SAID} ({i})", **subject} for i in range(3)],
        "events",
        replays,
    )
    sent(
        alice,
        "/api/v1/memories",
        {"content": SAID, "scope": "shared", "session_id": "s-v", **subject},
        "memory",
        replays,
    )
    sent(
        alice,
        "/api/v1/facts",
        [fact(MARKER, "lives_in", {"entity": "Elmstreet"}, session_id="s-v", data_subject=SUBJECT)],
        "facts",
        replays,
    )
    sent(
        alice,
        "/api/v1/sessions/s-v/checkpoints",
        {"step_index": 1, "idempotency_key": "c1", "state": {"note": SAID}, **subject},
        "checkpoint",
        replays,
    )
    data = base64.b64encode(json.dumps({"note": SAID}).encode()).decode()
    sent(
        alice,
        "/api/v1/sessions/s-v/checkpoints/writes",
        {
            "key": "c1",
            "task_id": "t1",
            "writes": [{"channel": "note", "value": {"type": "json", "data": data}}],
        },
        "writes",
        replays,
    )
    sent(
        alice,
        "/api/v1/store/items",
        {"namespace": ["crm", SUBJECT], "key": "address", "value": {"text": SAID}, "ttl": 60, **subject},
        "item",
        replays,
    )
    sent(alice, "/api/v1/sessions/s-v/window", {"role": "user", "content": SAID}, "window", replays)
    for execution in ("e-v", "e-closed"):
        put = alice.client.put(
            f"/api/v1/executions/{execution}/blackboard/plan",
            {"value": {"for": SAID}, "session_id": "s-v"},
            format="json",
        )
        assert put.status_code in (200, 201), put.content
    pad = alice.client.put("/api/v1/executions/e-v/scratchpad/note", {"value": SAID}, format="json")
    assert pad.status_code in (200, 201), pad.content
    sent(alice, "/api/v1/executions/e-closed/close", {}, "close", replays)
    skill_seed(alice)
    skill_publish(tenant, "reset-password", 1)
    sent(
        alice,
        "/api/v1/skills/reset-password/runs",
        {"version": 1, "success": False, "session_id": "s-v", "error": SAID},
        "run",
        replays,
    )
    # another agent's reads meet the subject (answers quoting it)
    sent(bob, "/api/v1/memories/search", {"query": "Who lives at Elmstreet?", "k": 5}, "search", replays)
    sent(bob, "/api/v1/store/search", {"namespace_prefix": ["crm"]}, "store-search", replays)
    sent(
        bob, "/api/v1/context", {"session_id": "s-v", "query": "Elmstreet", "budget": 800}, "context", replays
    )
    with tenant_context(tenant):
        projection_caught_up()
        consolidate(force=True)  # summaries of the session (their text quotes it), promotions
        after = export_now(scope="all")
        failed = export_now(scope="session", session_id="s-v")
        # the state main left an export delivered twice in: failed, its archive on disk
        Export.objects.filter(pk=failed.pk).update(status=ExportStatus.FAILED, error="FileNotFoundError")
        export_dir = copies.export_directory()
    backend = copies.result_backend()
    result_key = f"{backend.task_keyprefix.decode()}drill"  # a failed task's error quoting the subject
    backend.client.set(
        result_key, json.dumps({"status": "FAILURE", "result": {"exc_message": [SUBJECT]}}), ex=600
    )
    client.save()
    # the last write reaches the append-only file (written at once, fsynced each second)
    deadline = time.monotonic() + 10
    while result_key.encode() not in on_disk(redis_folder):
        assert time.monotonic() < deadline, "Redis did not write its append-only file"
        time.sleep(0.05)

    # what the subject's rows leave in indexes: its words' lexemes, its memories' vectors
    with tenant_context(tenant), connection.cursor() as cursor:
        cursor.execute("SELECT lexeme FROM unnest(to_tsvector('english', %s))", [SAID])
        extra = {f"lexeme {w}": w.encode() for (w,) in cursor.fetchall() if w.startswith(MARKER[:5].lower())}
        cursor.execute(
            "SELECT id, embedding::text FROM memory_semanticmemory WHERE data_subject = %s AND embedding IS NOT NULL",
            [SUBJECT],
        )
        for memory_id, vector in cursor.fetchall():
            floats = [float(x) for x in vector.strip("[]").split(",")][:16]
            extra[f"vector of {memory_id}"] = struct.pack("<16f", *floats)
    assert extra and any(name.startswith("vector") for name in extra)

    # the searches find the subject everywhere before (they can fail)
    with tenant_context(tenant):
        with maintenance(), connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # autovacuum's sampling, now
        found = postgres_holding((schema,))
        assert "pg_stats" in " ".join(found) and f"{schema}.memory_event.content" in found
        assert {"memory_event (r)", "event_search_gin (i)", "semantic_hnsw_384 (i)"} <= set(
            relation_files_holding(schema, extra)
        )
    assert neo4j_holding(neo4j_driver, schema)
    assert redis_holding() and MARKER.encode() in on_disk(redis_folder)
    assert set(files_holding(export_dir)) == {after.filename, failed.filename}
    assert all(
        MARKER in c.post(p, b, **{"Idempotency-Key": k}).content.decode() for c, p, b, k in replays[-3:]
    )

    # --- a hold refuses every delete path -------------------------------------------------------------
    with tenant_context(tenant):
        hold = services.hold_place(kind="subject", value=SUBJECT, reason="case 4/2026", username="olga")
    refusals = [
        bob.client.delete(f"/api/v1/store/items?namespace=crm.{SUBJECT}&key=address"),
        alice.client.delete("/api/v1/sessions/s-v/checkpoints"),
        carol.client.delete("/api/v1/sessions/s-v/checkpoints?agent=alice"),
    ]
    assert [r.status_code for r in refusals] == [409, 409, 409], [r.content for r in refusals]
    with tenant_context(tenant):
        items_expire(now=timezone.now() + timedelta(days=1))  # the TTL sweep
        services.retention_rule_save(rule=RetentionRule(layer="store", keep_days=1), username="olga")
        run = services.retention_run(
            run_id=services.retention_run_start(requested_by="job:retention").pk,
            now=timezone.now() + timedelta(days=2 * 365),
        )
        assert run.removed.get("store", 0) == 0 and run.removed.get("checkpoints", 0) == 0
        assert StoreItem.objects.filter(data_subject=SUBJECT).exists()
        with pytest.raises(Conflict, match=f"legal hold #{hold.pk}"):
            services.erasure_request(
                kind="subject", value=SUBJECT, legal_basis="Art. 17", note="", username="olga"
            )
        services.hold_release(hold=hold, username="olga", reason="case closed")
        with pytest.raises(Conflict, match=f"legal hold #{hold.pk}"):  # held until a second officer
            services.erasure_request(
                kind="subject", value=SUBJECT, legal_basis="Art. 17", note="", username="olga"
            )
        services.hold_release_confirm(hold=hold, username="pavel")

        # --- the erasure ----------------------------------------------------------------------------------
        request = services.erasure_request(
            kind="subject", value=SUBJECT, legal_basis="GDPR Art. 17(1)(a)", note="", username="olga"
        )
        services.erasure_approve(request_id=request.pk, username="pavel")
        done = finished(services.erasure_run(request_id=request.pk))
        assert done.status == ErasureStatus.DONE, done.error

        # --- nothing of the subject anywhere ---------------------------------------------------------------
        assert postgres_holding((schema, "public")) == {}
        # and in the files: no table, TOAST table or index has an item holding it
        assert relation_files_holding(schema, extra) == {}
    assert neo4j_holding(neo4j_driver, schema) == 0
    assert redis_holding() == []
    assert MARKER.encode() not in on_disk(redis_folder) and SUBJECT.encode() not in on_disk(redis_folder)
    assert files_holding(export_dir) == []
    assert Path(before.path).exists()
    for caller, path, body, key in replays:
        answer = caller.post(path, body, **{"Idempotency-Key": key}).content.decode()
        assert not any(n.lower() in answer.lower() for n in NEEDLES), (key, answer)

    # --- the receipt says so ---------------------------------------------------------------------------
    receipt = json.loads(done.receipt)
    assert receipt["verification"]["clean"] is True
    assert all(
        n == 0
        for system, counts in receipt["verification"].items()
        if system not in ("clean", "postgres_notes")
        for n in counts.values()
    )
    stores = receipt["stores"]
    assert sorted(stores["exports"]["archives_withdrawn"]) == sorted([str(after.pk), str(failed.pk)])
    assert stores["replay"]["answers_withdrawn"] >= 9
    assert stores["task_results"]["deleted"] == 1
    assert stores["records"]["legal_holds_digested"] == [hold.pk]
    assert stores["redis_files"] == {"aof": "rewritten", "rdb": "rewritten"}
    assert {"PostgreSQL write-ahead log", "PostgreSQL WAL archive and backups"} <= {
        item["store"] for item in receipt["lingering"]
    }
    assert not any(n in done.receipt for n in NEEDLES)
