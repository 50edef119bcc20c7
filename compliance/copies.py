"""The copies of the tenant's data beyond the layers' rows, as an erasure reaches them: the export
archives on disk, Celery's task results, Redis's files on disk, and what no erasure reaches at once
(PostgreSQL's write-ahead log and backups, Neo4j's transaction logs, replicas). The replay cache's
answers are ``agents.services.replay_answers_withdraw``'s. ``compliance.lifecycle.STORES`` names
each of them with its erasure and its check; ``compliance.services.erasure_run`` runs the steps.
"""

from __future__ import annotations

import json
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from django.db import connection
from redis.cluster import RedisCluster

from core.fulltext import identifier_pattern
from core.locks import advisory_lock
from core.redis import get_redis, redis_errors
from core.tenancy import current_schema

from .models import Export, ExportStatus

# the lock an export holds while it writes its archive (``compliance.services.export_run``)
EXPORT_LOCK = "export-run"
PARTIAL = ".partial"


@dataclass(frozen=True)
class Erased:
    """What an erasure removed, as its copies are searched for it: the redacted events' ``seqs``,
    the ids of deleted memories, facts and checkpoints, and ``needles``: identifiers of the target
    searched as whole identifiers (a data subject's id)."""

    seqs: frozenset[int] = frozenset()
    memory_ids: frozenset[str] = frozenset()
    fact_ids: frozenset[int] = frozenset()
    checkpoint_ids: frozenset[int] = frozenset()
    needles: tuple[str, ...] = field(default=())

    @classmethod
    def of(cls, progress: Mapping[str, Any], needles: Sequence[str] = ()) -> Erased:
        """From an erasure's ``progress`` (see ``compliance.services.erasure._progress_add``)."""

        def ids(layer: str, key: str = "ids") -> list[Any]:
            return list(progress.get(layer, {}).get(key, []))

        return cls(
            seqs=frozenset(int(s) for s in ids("episodic")),
            memory_ids=frozenset(
                str(m) for m in ids("semantic") + ids("summaries", "memory_ids") + ids("store", "memory_ids")
            ),
            fact_ids=frozenset(int(f) for f in ids("knowledge")),
            checkpoint_ids=frozenset(int(c) for c in ids("checkpoints")),
            needles=tuple(n for n in needles if n),
        )


# --- export archives -----------------------------------------------------------------------------------


def export_directory() -> Path:
    """Where the current tenant's archives are kept (``ENGRAM_EXPORT_DIR/<schema>``)."""
    return Path(settings.ENGRAM["EXPORT_DIR"]) / current_schema()


def _line_holds(member: str, line: dict[str, Any], erased: Erased) -> bool:
    if member == "events.jsonl":
        return line.get("seq") in erased.seqs and not line.get("redacted")
    if member == "objects/memories.jsonl":
        return str(line.get("id")) in erased.memory_ids
    if member == "objects/facts.jsonl":
        return line.get("id") in erased.fact_ids
    if member == "objects/checkpoints.jsonl":
        return line.get("id") in erased.checkpoint_ids
    return False


def archive_holds(path: Path, erased: Erased) -> bool:
    """Whether the archive at ``path`` holds a row the erasure removed: an event of ``seqs`` not
    redacted in it, a memory, fact or checkpoint of the erased ids (every line of an archive names
    its row), or a needle anywhere in it. An archive that cannot be read through (cut short, not a
    tar) counts as holding: nothing proves otherwise."""
    pattern = identifier_pattern([json.dumps(n)[1:-1] for n in erased.needles])
    try:
        with tarfile.open(path, mode="r:") as archive:
            for member in archive:
                handle = archive.extractfile(member)
                if handle is None:
                    continue
                for raw in handle:
                    if pattern is not None and pattern.search(raw.decode("utf-8", "replace")):
                        return True
                    if member.name.endswith(".jsonl") and raw.strip():
                        line = json.loads(raw)
                        if isinstance(line, dict) and _line_holds(member.name, line, erased):
                            return True
    except (tarfile.TarError, OSError, ValueError, EOFError):
        return True
    return False


def _export_of(path: Path, exports: Mapping[str, Export]) -> Export | None:
    name = path.name.removesuffix(PARTIAL)
    return exports.get(name if name.endswith(".tar") else f"{name}.tar")


def _being_written(export: Export | None) -> bool:
    """Whether an export run holds the lock of ``export`` right now (its archive is being written)."""
    if export is None:
        return False
    with advisory_lock(EXPORT_LOCK, export.pk, wait=False) as free:
        return not free


def archives_holding(erased: Erased) -> list[Path]:
    """The archive files in the tenant's export directory (any export's, in any state, or none's)
    holding what ``erased`` names; a partial one is left out only while its export writes it (a
    run that started after the rows were gone)."""
    directory = export_directory()
    if not directory.is_dir():
        return []
    exports = {e.filename: e for e in Export.objects.all()}
    found = []
    for path in sorted(p for p in directory.iterdir() if p.is_file()):
        if path.name.endswith(PARTIAL) and _being_written(_export_of(path, exports)):
            continue
        if archive_holds(path, erased):
            found.append(path)
    return found


def archives_withdraw(erased: Erased, *, reason: str) -> tuple[list[str], list[str]]:
    """Delete every archive file holding what ``erased`` names, after waiting for the exports being
    written (their runs may have read the rows before they went). The export of a withdrawn archive
    stays listed as ``withdrawn`` (``path`` emptied, ``error`` = ``reason``), whatever its state was. Returns ``(ids of
    the exports withdrawn, names of files of no export deleted)``."""
    for export in Export.objects.filter(status=ExportStatus.RUNNING):
        with advisory_lock(EXPORT_LOCK, export.pk):
            pass  # its run has ended (or died): its archive is what it will stay
    exports = {e.filename: e for e in Export.objects.all()}
    withdrawn: list[str] = []
    strays: list[str] = []
    for path in archives_holding(erased):
        owner = _export_of(path, exports)
        path.unlink(missing_ok=True)
        if owner is None:
            strays.append(path.name)
            continue
        Export.objects.filter(pk=owner.pk).update(status=ExportStatus.WITHDRAWN, path="", error=reason)
        withdrawn.append(str(owner.pk))
    return sorted(set(withdrawn)), strays


# --- Celery's results ----------------------------------------------------------------------------------


def result_backend() -> Any:
    """Celery's result backend when it is Redis (``client``, ``task_keyprefix``), else None."""
    from celery import current_app

    backend = current_app.backend
    return backend if hasattr(backend, "client") and hasattr(backend, "task_keyprefix") else None


def celery_results_holding(needles: Sequence[str]) -> list[str]:
    """The task results (Celery's Redis result backend: every tenant's, kept
    ``CELERY_RESULT_EXPIRES`` seconds) whose stored value or error holds one of ``needles`` as a
    whole identifier. Tasks return statuses, counts and ids (a test walks them); a failure's error
    text may quote what it failed on."""
    pattern = identifier_pattern(list(needles))
    backend = result_backend()
    if pattern is None or backend is None:
        return []
    prefix = backend.task_keyprefix
    prefix = prefix.decode() if isinstance(prefix, bytes) else str(prefix)
    with redis_errors():
        client = backend.client
        found = []
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            value = client.get(key)
            if value is not None and pattern.search(value.decode("utf-8", "replace")):
                found.append(key.decode() if isinstance(key, bytes) else str(key))
        return found


def celery_results_erase(needles: Sequence[str]) -> list[str]:
    """Delete the task results holding one of ``needles`` (``celery_results_holding``); returns them."""
    keys = celery_results_holding(needles)
    backend = result_backend()
    if keys and backend is not None:
        with redis_errors():
            backend.client.delete(*keys)
    return keys


# --- Redis's files on disk -----------------------------------------------------------------------------

# ``redis_files_rewrite`` outcomes: the file holds only what is left, there is no such file, or the
# server refused to rewrite it (a managed Redis without BGREWRITEAOF / BGSAVE)
REWRITTEN, OFF, REFUSED = "rewritten", "off", "refused"


def _nodes() -> list[redis.Redis]:
    """A client per server holding the tenant's keys: the one server, or every node of a Redis
    Cluster (its replicas too: each writes its own files)."""
    client = get_redis()
    if isinstance(client, RedisCluster):
        return [client.get_redis_connection(node) for node in client.get_nodes()]
    return [client]


def _wait(client: redis.Redis, busy: tuple[str, ...], deadline: float) -> dict[str, Any]:
    while True:
        info: dict[str, Any] = client.info("persistence")
        if not any(int(info.get(flag, 0)) for flag in busy):
            return info
        if time.monotonic() > deadline:
            raise TimeoutError(f"Redis is still busy with {', '.join(f for f in busy if info.get(f))}")
        time.sleep(0.1)


def _rewrite(client: redis.Redis, deadline: float) -> dict[str, str]:
    """``redis_files_rewrite`` on one server."""
    outcome = {"aof": OFF, "rdb": OFF}
    info = _wait(client, ("aof_rewrite_in_progress", "rdb_bgsave_in_progress"), deadline)
    try:
        snapshots = bool(client.config_get("save").get("save"))
    except redis.ResponseError:  # CONFIG is not allowed: assume snapshots, try to save one
        snapshots = True
    if int(info.get("aof_enabled", 0)):
        try:
            client.bgrewriteaof()
        except redis.ResponseError as exc:
            if "already in progress" not in str(exc):
                outcome["aof"] = REFUSED
        if outcome["aof"] != REFUSED:
            done = _wait(client, ("aof_rewrite_in_progress", "aof_rewrite_scheduled"), deadline)
            if done.get("aof_last_bgrewrite_status") != "ok":
                raise RuntimeError(f"Redis could not rewrite its append-only file: {done}")
            outcome["aof"] = REWRITTEN
    if snapshots:
        before = int(info.get("rdb_last_save_time", 0))
        try:
            client.bgsave(schedule=True)
        except redis.ResponseError:
            return {**outcome, "rdb": REFUSED}
        while True:  # a scheduled save starts when the rewrite's fork has ended
            done = _wait(client, ("rdb_bgsave_in_progress",), deadline)
            if done.get("rdb_last_bgsave_status") != "ok":
                raise RuntimeError(f"Redis could not save its snapshot: {done}")
            if int(done.get("rdb_last_save_time", 0)) > before:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("Redis did not save its snapshot in time")
            time.sleep(0.1)
        outcome["rdb"] = REWRITTEN
    return outcome


def redis_files_rewrite(*, timeout: float | None = None) -> dict[str, str]:
    """Make Redis's files on disk hold only what is left after an erasure's deletes: the append-only
    file rewritten (``BGREWRITEAOF``: the rewrite writes the dataset as it is; the old file, which
    logged every write since the last rewrite, is replaced), and the snapshot saved again
    (``BGSAVE``) when the server takes snapshots; on every node of a cluster; waits until all are
    done (``timeout`` seconds, default ``ENGRAM_REDIS_REWRITE_TIMEOUT``). Returns ``{"aof": ...,
    "rdb": ...}``, each ``rewritten``, ``off`` or ``refused`` (some server does not allow it: the
    receipt says when its own rewrite will happen). Raises ``ServiceUnavailable`` when Redis cannot
    be reached, ``RuntimeError`` when a rewrite failed, ``TimeoutError`` when one did not end in
    time."""
    deadline = time.monotonic() + (timeout or float(settings.ENGRAM["REDIS_REWRITE_TIMEOUT"]))
    with redis_errors():
        outcomes = [_rewrite(node, deadline) for node in _nodes()]
    merged = {}
    for name in ("aof", "rdb"):
        found = {o[name] for o in outcomes}
        merged[name] = REFUSED if REFUSED in found else REWRITTEN if REWRITTEN in found else OFF
    return merged


def redis_files_pending(outcome: Mapping[str, str]) -> int:
    """For the verification pass: how many servers keep an append-only file that no rewrite after
    the deletes replaced (or whose last rewrite failed); 0 when the rewrite was refused (the
    receipt says so)."""
    if outcome.get("aof") == REFUSED:
        return 0
    pending = 0
    with redis_errors():
        for node in _nodes():
            info = node.info("persistence")
            if int(info.get("aof_enabled", 0)):
                pending += int(
                    outcome.get("aof") != REWRITTEN or info.get("aof_last_bgrewrite_status") != "ok"
                )
    return pending


# --- what an erasure cannot reach at once ----------------------------------------------------------------


def _setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s, true)", [name])
        row = cursor.fetchone()
    return str(row[0]) if row and row[0] is not None else "unknown"


def lingering(redis_files: Mapping[str, str]) -> list[dict[str, str]]:
    """What of the erased data no erasure removes at once, and when it ages out, for the receipt:
    PostgreSQL's write-ahead log (and its archive and the backups), the freed space of its files,
    Neo4j's transaction logs, Redis's files when the server refused their rewrite, replicas' own
    files, task results."""
    days = int(settings.ENGRAM["BACKUP_RETENTION_DAYS"])
    items = [
        {
            "store": "PostgreSQL write-ahead log",
            "holds": "the removed rows as they were written and deleted",
            "until": "its segments are recycled after the next checkpoints (checkpoint_timeout "
            f"{_setting('checkpoint_timeout')}, max_wal_size {_setting('max_wal_size')}); replicas replay "
            "the deletes at once",
        },
        {
            "store": "PostgreSQL WAL archive and backups",
            "holds": "the rows as of each backup",
            "until": f"the backups' retention: {days} days after this erasure (ENGRAM_BACKUP_RETENTION_DAYS)",
        },
        {
            "store": "PostgreSQL data files' free space",
            "holds": "bytes of removed rows, unreachable by SQL (VACUUM has removed their rows and "
            "index entries)",
            "until": "overwritten by new rows of the same tables",
        },
        {
            "store": "Neo4j transaction logs",
            "holds": "the removed relationships and nodes",
            "until": "their rotation (db.tx_log.rotation.retention_policy, 2 days by default)",
        },
        {
            "store": "Celery task results",
            "holds": "statuses, counts and ids (those naming the target were deleted)",
            "until": f"{int(settings.CELERY_RESULT_EXPIRES)} seconds after each task (CELERY_RESULT_EXPIRES)",
        },
        {
            "store": "Redis replicas' own files",
            "holds": "the removed keys in their append-only files or snapshots (the deletes reached "
            "their data at once)",
            "until": "each replica's next rewrite (auto-aof-rewrite-percentage) or snapshot",
        },
    ]
    for name, label in (("aof", "append-only file"), ("rdb", "snapshot")):
        if redis_files.get(name) == REFUSED:
            items.append(
                {
                    "store": f"Redis {label}",
                    "holds": "the removed keys",
                    "until": "the server's own next rewrite or snapshot (it refused one now)",
                }
            )
    return items
