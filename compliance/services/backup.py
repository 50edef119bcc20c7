"""Back up one tenant into a file and restore it into a server running Engram (issue 36, item 4).

The file is a tar archive (uncompressed: its largest member is compressed already) of:

- ``manifest.json``: the format, when and from which database it was made, the tenant's row and
  its domains (Django's serializer: the public schema's part of the tenant), the Redis key count,
  the SHA-256 and size of each other member;
- ``schema.dump``: ``pg_dump --format=custom --schema=<tenant>`` without owners and privileges (a
  consistent snapshot of the schema's tables, sequences, functions and triggers);
- ``redis.jsonl``: one line per Redis key of the tenant (``{schema}:*``): its name, Redis'
  ``DUMP`` of it (base64) and its remaining time to live in ms (0: none).

What is not in it, and why: the tenant's PostgreSQL role (its name follows from the target
database's name and its password from the application's secret, so the restore makes it again
with ``tenants.roles.tenant_role_ensure``); the Neo4j projection (rebuilt from the restored facts,
``memory.knowledge.projection.graph_rebuild``); Celery's task results (not the tenant's data).
PostgreSQL and Redis are read one after the other: a working-memory write in between is in one
and not the other (working memory is ephemeral by design; stop the tenant's agents for an exact
copy).

The client tools (``pg_dump``, ``pg_restore``) are looked up in ``ENGRAM["PG_BIN_DIR"]`` (env
``ENGRAM_PG_BIN_DIR``; the development stack sets it to the embedded server's) and else on
``PATH``; they must be at least the server's major version.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from django.conf import settings
from django.core import serializers
from django.db import connection, transaction
from django.utils import timezone
from django_tenants.utils import schema_context, schema_exists, tenant_context

from compliance.verification import trail_verify
from core.errors import Conflict, InvalidInput
from core.redis import get_redis, redis_errors
from core.tenancy import (
    maintenance,
    maintenance_role,
    quote_ident,
    server_settings,
)
from memory.working.services import tenant_keys
from tenants.models import Domain, Tenant
from tenants.roles import tenant_role_drop, tenant_role_ensure
from tenants.selectors import tenant_get

from .reapply import Reapplied, erasures_reapply
from .records import job_record

FORMAT = "engram-tenant-backup/1"
MANIFEST, SCHEMA_DUMP, REDIS_KEYS = "manifest.json", "schema.dump", "redis.jsonl"
#: the trail session of backup and restore records
OPERATIONS_SESSION = "operations"


@dataclass(frozen=True)
class BackupResult:
    """What ``tenant_backup`` wrote: the file, its size in bytes, the tenant, the Redis keys it
    holds and the seconds it took."""

    path: Path
    size: int
    schema_name: str
    redis_keys: int
    seconds: float


@dataclass(frozen=True)
class RestoreResult:
    """What ``tenant_restore`` did: the tenant restored, the Redis keys put back, the facts
    projected into Neo4j (``None``: no Neo4j configured), whether the trail verified (and its
    events checked), the seconds it took and the erasures of the ledger it executed again."""

    tenant: Tenant
    redis_keys: int
    facts_projected: int | None
    trail_ok: bool
    events_checked: int
    seconds: float
    erasures_reapplied: list[Reapplied]


def pg_tool(name: str) -> str:
    """The path of the PostgreSQL client program ``name`` (``ENGRAM["PG_BIN_DIR"]``, else
    ``PATH``). Raises ``InvalidInput`` naming the setting when it is found in neither."""
    bin_dir = settings.ENGRAM.get("PG_BIN_DIR") or ""
    found = str(Path(bin_dir) / name) if bin_dir else shutil.which(name)
    if not found or not os.access(found, os.X_OK):
        raise InvalidInput(
            f"{name} not found: install PostgreSQL's client programs or set ENGRAM_PG_BIN_DIR",
            field="ENGRAM_PG_BIN_DIR",
        )
    return found


def shared_login(server: str = "default") -> tuple[str, str | None]:
    """The conninfo (without password) of the shared login of ``server`` (``DATABASE_URL``'s for
    ``"default"``, whatever login the connection holds now; else ``ENGRAM["DB_SERVERS"]``'s), and
    its password (``None``: none)."""
    db = connection.settings_dict if server == "default" else server_settings(server)
    params = {"dbname": db["NAME"], "user": db["USER"], "host": db["HOST"], "port": db["PORT"]}
    conninfo = psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items() if v})
    return conninfo, (str(db["PASSWORD"]) if db.get("PASSWORD") else None)


def _libpq_args(server: str = "default") -> tuple[list[str], dict[str, str]]:
    """``--dbname`` for the shared login of ``server`` (``shared_login``) with the role the tools
    switch to (the maintenance role, which owns every tenant's tables), and the environment with
    its password."""
    conninfo, password = shared_login(server)
    env = {**os.environ}
    if password:
        env["PGPASSWORD"] = password
    return [f"--dbname={conninfo}", f"--role={maintenance_role()}"], env


def _run(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{Path(command[0]).name} failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
        )


def schema_dump(schema: str, path: Path, *, server: str = "default", schema_only: bool = False) -> None:
    """``pg_dump`` of ``schema`` on ``server`` into ``path`` (custom format, no owners or
    privileges: they name the source's roles; with ``schema_only``, its objects without their
    rows). Raises ``RuntimeError`` with its message."""
    dbname, env = _libpq_args(server)
    _run(
        [
            pg_tool("pg_dump"),
            *dbname,
            "--format=custom",
            f"--schema={quote_ident(schema)}",
            "--no-owner",
            "--no-privileges",
            *(["--schema-only"] if schema_only else []),
            f"--file={path}",
        ],
        env,
    )


def schema_load(path: Path, *, server: str = "default") -> None:
    """``pg_restore`` of ``path`` (``schema_dump``) into ``server`` as the maintenance role, in one
    transaction (all of it or nothing). Raises ``RuntimeError`` with its message."""
    dbname, env = _libpq_args(server)
    _run(
        [
            pg_tool("pg_restore"),
            *dbname,
            "--no-owner",
            "--no-privileges",
            "--single-transaction",
            "--exit-on-error",
            str(path),
        ],
        env,
    )


def _redis_dump(schema_name: str) -> tuple[bytes, int]:
    """The tenant's Redis keys as ``redis.jsonl`` lines, and how many."""
    lines = []
    with schema_context(schema_name), redis_errors():
        client = get_redis()
        for key in tenant_keys(client):
            dumped, ttl = client.dump(key), client.pttl(key)
            if dumped is None or ttl == -2:  # expired between the scan and the dump
                continue
            item = {"key": key, "dump": base64.b64encode(dumped).decode(), "pttl": max(int(ttl), 0)}
            lines.append(json.dumps(item, separators=(",", ":")))
    return ("\n".join(lines) + "\n" if lines else "").encode(), len(lines)


def _add(archive: tarfile.TarFile, name: str, data: bytes | None = None, path: Path | None = None) -> None:
    if path is not None:
        archive.add(str(path), arcname=name)
        return
    assert data is not None
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), int(time.time())
    archive.addfile(info, io.BytesIO(data))


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tenant_backup(*, tenant: Tenant, out: Path) -> BackupResult:
    """Write the backup of ``tenant`` (see the module docstring) to ``out`` (replaced if it exists,
    through a temporary file next to it). Returns a ``BackupResult``. Raises ``InvalidInput`` when
    ``pg_dump`` is missing, ``RuntimeError`` with its message when it fails,
    ``ServiceUnavailable`` when Redis cannot be reached."""
    started = time.perf_counter()
    schema = tenant.schema_name
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".backup-") as work:
        dump = Path(work) / SCHEMA_DUMP
        schema_dump(schema, dump)
        redis_lines, redis_count = _redis_dump(schema)
        with schema_context("public"):
            row = json.loads(serializers.serialize("json", [tenant]))[0]["fields"]
            domains = [
                json.loads(serializers.serialize("json", [d]))[0]["fields"]
                for d in Domain.objects.filter(tenant=tenant).order_by("pk")
            ]
        manifest = {
            "format": FORMAT,
            "schema_name": schema,
            "made_at": timezone.now().isoformat(),
            "source_database": connection.settings_dict["NAME"],
            "tenant": row,
            "domains": domains,
            "redis_keys": redis_count,
            "members": {
                SCHEMA_DUMP: {"sha256": _sha256_file(dump), "size": dump.stat().st_size},
                REDIS_KEYS: {"sha256": hashlib.sha256(redis_lines).hexdigest(), "size": len(redis_lines)},
            },
        }
        partial = Path(work) / "backup.tar"
        with tarfile.open(partial, "w") as archive:
            _add(archive, MANIFEST, json.dumps(manifest, indent=1).encode())
            _add(archive, SCHEMA_DUMP, path=dump)
            _add(archive, REDIS_KEYS, redis_lines)
        os.replace(partial, out)
    return BackupResult(out, out.stat().st_size, schema, redis_count, time.perf_counter() - started)


@contextmanager
def _unpacked(path: Path) -> Iterator[tuple[dict[str, Any], Path, bytes]]:
    """The manifest, the schema dump's path and the Redis lines of the backup at ``path``, each
    member checked against the manifest's digest. Raises ``InvalidInput`` for a file that is not
    such a backup or whose members do not match."""
    try:
        archive = tarfile.open(path, "r")
    except (OSError, tarfile.TarError) as exc:
        raise InvalidInput(f"{path} is not a tenant backup: {exc}", field="in") from exc
    with archive, tempfile.TemporaryDirectory(prefix="engram-restore-") as work:
        try:
            manifest = json.loads(_member(archive, MANIFEST))
        except ValueError as exc:
            raise InvalidInput(f"{path}: unreadable manifest", field="in") from exc
        if manifest.get("format") != FORMAT:
            raise InvalidInput(f"{path}: not a {FORMAT} file", field="in")
        dump = Path(work) / SCHEMA_DUMP
        dump.write_bytes(_member(archive, SCHEMA_DUMP))
        redis_lines = _member(archive, REDIS_KEYS)
        for name, got in (
            (SCHEMA_DUMP, _sha256_file(dump)),
            (REDIS_KEYS, hashlib.sha256(redis_lines).hexdigest()),
        ):
            if manifest["members"][name]["sha256"] != got:
                raise InvalidInput(f"{path}: {name} does not match its digest (damaged file)", field="in")
        yield manifest, dump, redis_lines


def _member(archive: tarfile.TarFile, name: str) -> bytes:
    try:
        handle = archive.extractfile(name)
    except KeyError:
        handle = None
    if handle is None:
        raise InvalidInput(f"the backup has no {name}", field="in")
    return handle.read()


def _tenant_row_restore(manifest: dict[str, Any]) -> Tenant:
    """The tenant's row and domains as the backup holds them (new primary keys), saved raw: the
    schema is there already, so ``Tenant.save``'s creation of schema and tables must not run."""
    records = [{"model": "tenants.tenant", "fields": manifest["tenant"]}]
    (item,) = serializers.deserialize("json", json.dumps(records))
    tenant = item.object
    assert isinstance(tenant, Tenant)
    tenant.pk = None
    tenant.save_base(raw=True)
    for fields in manifest["domains"]:
        Domain.objects.create(**{**_plain(fields, Domain), "tenant": tenant})
    return tenant


def _plain(fields: dict[str, Any], model: type[Domain]) -> dict[str, Any]:
    names = {f.name for f in model._meta.concrete_fields} - {"id", "tenant"}
    return {k: v for k, v in fields.items() if k in names}


def _redis_restore(lines: bytes) -> int:
    count = 0
    with redis_errors():
        client = get_redis()
        for line in lines.splitlines():
            if line.strip():
                item = json.loads(line)
                client.restore(item["key"], item["pttl"], base64.b64decode(item["dump"]), replace=True)
                count += 1
    return count


def _graph_rebuild() -> int | None:
    from core.neo4j import get_driver
    from memory.knowledge.projection import graph_rebuild

    return graph_rebuild() if get_driver() is not None else None


def tenant_restore(*, path: Path) -> RestoreResult:
    """Restore the backup at ``path`` (``tenant_backup``) into this server under the tenant's
    name: the schema (``pg_restore`` as the maintenance role, in one transaction), then in one
    transaction the tenant's row, domains and role (``tenant_role_ensure``: a login with the
    password this application derives), then its Redis keys, every erasure of the public
    schema's ledger the backup does not hold as done executed again (``erasures_reapply``:
    decision 0091), its Neo4j projection rebuilt (when ``NEO4J_URI`` is set) and its trail
    verified; the restore is recorded in the trail (session
    ``operations``, actor ``job:tenant_restore``). Returns a ``RestoreResult``.

    Raises ``InvalidInput`` for a file that is not an intact backup, ``Conflict`` when the
    tenant or its schema exists here already, ``RuntimeError`` when ``pg_restore`` fails (the
    schema is then not created), ``ServiceUnavailable`` when Redis or Neo4j cannot be reached.
    The target must run migrations at least as new as the source's (``migrate_schemas -s
    <tenant>`` brings an older backup up to date)."""
    started = time.perf_counter()
    with _unpacked(path) as (manifest, dump, redis_lines):
        schema = manifest["schema_name"]
        if tenant_get(schema_name=schema) is not None or schema_exists(schema):
            raise Conflict(f"tenant {schema!r} exists on this server already")
        schema_load(dump)
        try:
            with transaction.atomic(), schema_context("public"):
                tenant = _tenant_row_restore(manifest)
                tenant_role_ensure(schema)
        except BaseException:
            schema_drop(schema, role=False)
            raise
    with tenant_context(tenant):
        keys = _redis_restore(redis_lines)
        reapplied = erasures_reapply(schema_name=schema)
        facts = _graph_rebuild()
        report = trail_verify()
        job_record(
            job="tenant_restore",
            action="tenant.restored",
            content=f"tenant restored from a backup made at {manifest['made_at']}; "
            f"{len(reapplied)} later erasures re-applied",
            payload={
                "made_at": manifest["made_at"],
                "source_database": manifest["source_database"],
                "redis_keys": keys,
                "trail_ok": report.ok,
                "erasures_reapplied": [vars(item) for item in reapplied],
            },
            session_id=OPERATIONS_SESSION,
        )
    seconds = time.perf_counter() - started
    return RestoreResult(tenant, keys, facts, report.ok, report.chain.checked, seconds, reapplied)


def schema_drop(schema: str, *, role: bool = True) -> None:
    """Drop ``schema`` and (with ``role``) the tenant's role on the connection's current server."""
    if role:
        tenant_role_drop(schema)
    with maintenance(), connection.cursor() as cursor:
        cursor.execute(f"DROP SCHEMA IF EXISTS {quote_ident(schema)} CASCADE")
