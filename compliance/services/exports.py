"""Exports of the trail: requested by a person, written by a task (``compliance.exporting``),
recorded when written and when downloaded."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from agents.models import Agent
from core.errors import InvalidInput, NotFound
from core.locks import advisory_lock
from core.tasks import queue_on_commit
from memory.episodic.models import Event

from .. import copies
from ..exporting import EVENT_TABLE, archive_write, scope_where
from ..models import Export, ExportStatus, ScopeKind
from .records import person_record

logger = logging.getLogger(__name__)


MAX_SESSION_CHARS = 200


def export_request(
    *,
    username: str,
    scope: str,
    session_id: str = "",
    agent_name: str = "",
    occurred_from: datetime | None = None,
    occurred_to: datetime | None = None,
) -> Export:
    """Queue an export of ``scope`` (``session`` needs ``session_id``, ``agent`` an existing
    ``agent_name``; ``range`` needs at least one bound; bounds are timezone-aware, ``occurred_to``
    exclusive) for the person ``username``; the task ``compliance.tasks.export_run`` writes it.
    Raises ``InvalidInput`` naming the field."""
    if scope not in ScopeKind.values:
        raise InvalidInput(f"Unknown scope {scope!r}; use session, agent, range or all.", field="scope")
    session_id, agent_name = session_id.strip(), agent_name.strip()
    if scope == ScopeKind.SESSION and not session_id:
        raise InvalidInput("Name the session to export.", field="session_id")
    if len(session_id) > MAX_SESSION_CHARS:
        raise InvalidInput(f"A session id has at most {MAX_SESSION_CHARS} characters.", field="session_id")
    if scope == ScopeKind.AGENT and not Agent.objects.filter(name=agent_name).exists():
        raise InvalidInput(f"There is no agent {agent_name!r}.", field="agent_name")
    for name, value in (("occurred_from", occurred_from), ("occurred_to", occurred_to)):
        if value is not None and timezone.is_naive(value):
            raise InvalidInput("Give a time with its timezone.", field=name)
    if scope == ScopeKind.RANGE and occurred_from is None and occurred_to is None:
        raise InvalidInput("A time range needs a start, an end or both.", field="occurred_from")
    if occurred_from and occurred_to and occurred_to <= occurred_from:
        raise InvalidInput("The end must come after the start.", field="occurred_to")
    with transaction.atomic():
        export = Export.objects.create(
            requested_by=f"user:{username}",
            scope=scope,
            session_id=session_id if scope == ScopeKind.SESSION else "",
            agent_name=agent_name if scope == ScopeKind.AGENT else "",
            occurred_from=occurred_from,
            occurred_to=occurred_to,
        )
        queue_on_commit("compliance.tasks.export_run", str(export.pk))
    return export


def export_run(*, export_id: str) -> Export:
    """Write the archive of export ``export_id`` (``exporting.archive_write``), then record the
    export in the trail as the person who asked for it: scope, counts, chain range and the
    archive's SHA-256. Runs once: a run holds the export's lock (``copies.EXPORT_LOCK``) while it
    writes, and a second delivery of the task meanwhile returns at once; an export done or failed
    is left as it is; a run that died (its lock gone with it) is started again. A failure leaves
    the export ``failed`` with the error and no archive on disk."""
    export = Export.objects.filter(pk=export_id).first()
    if export is None:
        raise NotFound(f"No export {export_id}.", field="export_id")
    if export.is_done:
        return export
    with advisory_lock(copies.EXPORT_LOCK, export.pk, wait=False) as ours:
        if not ours:  # another worker is writing it (the task was delivered twice)
            return export
        export.refresh_from_db()
        if export.is_done:
            return export
        return _export_write(export)


def _export_write(export: Export) -> Export:
    """The body of ``export_run``, under the export's lock."""
    final = copies.export_directory() / export.filename
    total = _scope_count(export)
    Export.objects.filter(pk=export.pk).update(
        status=ExportStatus.RUNNING, started_at=timezone.now(), events_total=total, events_done=0
    )

    def progress(done: int) -> None:
        Export.objects.filter(pk=export.pk).update(events_done=done)

    try:
        result = archive_write(export, directory=final.parent, progress=progress)
        username = export.requested_by.removeprefix("user:")
        with transaction.atomic():
            Export.objects.filter(pk=export.pk).update(
                status=ExportStatus.DONE,
                finished_at=timezone.now(),
                events_done=result.events,
                first_seq=result.first_seq,
                last_seq=result.last_seq,
                path=str(result.path),
                size=result.size,
                sha256=result.sha256,
            )
            export.refresh_from_db()
            person_record(
                username=username,
                action="export",
                content=f"{username} exported {export.scope_description()}: {result.events} events, "
                f"archive SHA-256 {result.sha256}.",
                payload={
                    "export_id": str(export.pk),
                    "scope": result.manifest["scope"],
                    "events": result.events,
                    "chain": result.manifest["chain"],
                    "sha256": result.sha256,
                    "bytes": result.size,
                },
            )
    except Exception as exc:  # recorded on the export, shown in the admin; the task must not loop
        logger.exception("export %s failed", export.pk)
        final.unlink(missing_ok=True)  # a failed export leaves no archive behind
        Export.objects.filter(pk=export.pk).update(
            status=ExportStatus.FAILED,
            finished_at=timezone.now(),
            path="",
            error=f"{type(exc).__name__}: {exc}",
        )
        export.refresh_from_db()
        return export
    return export


def _scope_count(export: Export) -> int:
    where, params = scope_where(export)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {EVENT_TABLE} e WHERE {where}", params)
        return int(cursor.fetchone()[0])


def export_download_record(*, export: Export, username: str) -> Event:
    """Record that ``username`` downloaded the archive of ``export`` (its SHA-256 named)."""
    return person_record(
        username=username,
        action="export_download",
        content=f"{username} downloaded export {str(export.pk)[:8]} ({export.scope_description()}).",
        payload={"export_id": str(export.pk), "sha256": export.sha256},
    )
