"""Writes of the compliance console: chain checks, anchors, exports, and the trail of people's
actions in the admin (logins, users and groups), each recorded by the service that makes the change
(agents and keys are recorded by ``agents.services``, through ``core.recording``).

A person's decision is an event of the tenant's system agent with ``actor`` ``user:<username>``,
in the session of the object it concerns or else the person's own ``admin:<username>`` session
(``memory.episodic.services.person_session``); a job's with ``actor`` ``job:<name>``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import connection, transaction
from django.utils import timezone
from django_tenants.utils import get_public_schema_name

from agents.models import Agent
from agents.services import replay_answers_withdraw, system_agent_get
from core.errors import Conflict, DomainError, InvalidInput, NotFound, PermissionDenied, ServiceUnavailable
from core.locks import advisory_lock, advisory_xact_lock
from core.tasks import queue_on_commit
from core.tenancy import current_schema
from memory.consolidation.services import summaries_paused
from memory.episodic.models import Event
from memory.episodic.services import decision_record, person_session

from . import copies, lifecycle, redaction, signing
from .exporting import EVENT_TABLE, archive_write, scope_where
from .models import (
    Anchor,
    ChainCheck,
    CheckScope,
    CheckStatus,
    ErasureRequest,
    ErasureStatus,
    Export,
    ExportStatus,
    LegalHold,
    RetentionRule,
    RetentionRun,
    RunStatus,
    ScopeKind,
    TargetKind,
)
from .verification import AnchorRecord, Segment, anchor_statement, sink_records, trail_verify

logger = logging.getLogger(__name__)

MAX_SESSION_CHARS = 200


def person_record(
    *,
    username: str,
    action: str,
    content: str,
    payload: dict[str, Any],
    session_id: str | None = None,
    data_subject: str = "",
) -> Event:
    """Append a decision made by the person ``username`` (actor ``user:<username>``) in
    ``session_id`` or their ``admin:<username>`` session; ``payload`` gets ``action``; a decision
    naming a data subject carries it (``data_subject``: its erasure redacts the record)."""
    return decision_record(
        agent=system_agent_get(),
        session_id=session_id or person_session(username),
        actor=f"user:{username}",
        content=content,
        payload={"action": action, **payload},
        data_subject=data_subject,
    )


def job_record(*, job: str, action: str, content: str, payload: dict[str, Any], session_id: str) -> Event:
    """Append a decision made by the system job ``job`` (actor ``job:<job>``)."""
    return decision_record(
        agent=system_agent_get(),
        session_id=session_id,
        actor=f"job:{job}",
        content=content,
        payload={"action": action, **payload},
    )


# --- logins -------------------------------------------------------------------------------------------


def login_record(*, username: str, succeeded: bool, address: str = "") -> Event | None:
    """Record a login (``succeeded``) or failed login to the current tenant's admin by ``username``
    (as typed, for a failure) from ``address``; nothing outside a tenant (the platform admin)."""
    if current_schema() == get_public_schema_name():
        return None
    name = username[:150]
    with transaction.atomic():
        if succeeded:
            return person_record(
                username=name,
                action="login",
                content=f"{name} logged in to the admin.",
                payload={"address": address},
            )
        return decision_record(
            agent=system_agent_get(),
            session_id=person_session(name),
            actor="anonymous",  # nobody proved who they are: the name is what was typed
            content=f"Failed login to the admin as {name!r}.",
            payload={"action": "login_failed", "username": name, "address": address},
        )


# --- users and groups of the tenant admin ------------------------------------------------------------------

_SECRET_FIELDS = {"password"}


def account_change_record(
    *, username: str, model: str, object_label: str, object_id: object, action: str, changed: Sequence[str]
) -> Event:
    """Record that ``username`` added, changed or deleted (``action``: ``create``, ``update``,
    ``delete``) a user or group of the admin; ``changed`` names fields (a password is named, never
    shown)."""
    fields = sorted(set(changed))
    verb = {"create": "created", "update": "changed", "delete": "deleted"}[action]
    return person_record(
        username=username,
        action=f"{model}_{action}",
        content=f"{username} {verb} {model} {object_label}" + (f" ({', '.join(fields)})." if fields else "."),
        payload={"object": object_label, "object_id": str(object_id), "fields": fields},
    )


def user_save(*, user: User, username: str, created: bool, changed: Sequence[str]) -> User:
    """Save an admin user (the admin's form has set its fields and password hash) and record it."""
    with transaction.atomic():
        user.save()
        account_change_record(
            username=username,
            model="user",
            object_label=user.get_username(),
            object_id=user.pk,
            action="create" if created else "update",
            changed=changed,
        )
    return user


def group_save(*, group: Group, username: str, created: bool, changed: Sequence[str]) -> Group:
    """Save an admin group and record it."""
    with transaction.atomic():
        group.save()
        account_change_record(
            username=username,
            model="group",
            object_label=group.name,
            object_id=group.pk,
            action="create" if created else "update",
            changed=changed,
        )
    return group


def account_delete(*, obj: User | Group, username: str) -> None:
    """Delete an admin user or group and record it."""
    with transaction.atomic():
        label = obj.get_username() if isinstance(obj, User) else obj.name
        model = "user" if isinstance(obj, User) else "group"
        object_id = obj.pk
        obj.delete()
        account_change_record(
            username=username,
            model=model,
            object_label=label,
            object_id=object_id,
            action="delete",
            changed=[],
        )


# --- chain checks -------------------------------------------------------------------------------------------


SCHEDULED_CHECK_JOB = "job:scheduled-verify"
SCHEDULED_CHECKS_KEPT_DAYS = 7  # intact incremental checks kept in the history


def chain_check_request(*, requested_by: str, scope: str = CheckScope.FULL) -> ChainCheck:
    """Queue a verification of the current tenant's trail (``compliance.tasks.chain_check``) for
    ``requested_by`` (``user:<name>`` or ``job:<name>``); ``scope`` full (every event) or
    incremental (see ``chain_check_run``). Returns the queued check."""
    with transaction.atomic():
        check = ChainCheck.objects.create(requested_by=requested_by, scope=scope)
        queue_on_commit("compliance.tasks.chain_check", check.pk)
    return check


@dataclass(frozen=True)
class _Plan:
    """What a check verifies: ``segments`` of the chain, the first new event ``from_seq``, the older
    events re-verified (``recheck``, inclusive, or None) and how many events that is (``total``)."""

    scope: str
    segments: tuple[Segment, ...]
    from_seq: int
    recheck: tuple[int, int] | None
    total: int


def recheck_rounds() -> int:
    """How many scheduled checks share the older events between them: every older event is
    re-verified once per ``CHAIN_RECHECK_SECONDS`` when a check runs every ``CHAIN_CHECK_SECONDS``."""
    every, within = settings.ENGRAM["CHAIN_CHECK_SECONDS"], settings.ENGRAM["CHAIN_RECHECK_SECONDS"]
    return max(1, int(within // every))


def _check_plan(check: ChainCheck, last_seq: int) -> _Plan:
    """The plan of ``check`` over a log that ends at ``last_seq``. An incremental check builds on the
    last finished check: when that one is intact, it verifies the events after it, linked to the
    hash it ended on, and re-verifies the next window of older events (rotating from where the last
    window ended, back to #1 past the end): ``ceil(last_seq / recheck_rounds())`` of them, at least
    ``CHAIN_RECHECK_MIN_ROWS``. Otherwise (none yet, or broken or failed) it runs in full, so a
    finding stays named until a full check no longer finds it."""
    full = _Plan(CheckScope.FULL, (Segment(),), 1, None, last_seq)
    if check.scope != CheckScope.INCREMENTAL:
        return full
    finished = ChainCheck.objects.filter(finished_at__isnull=False).exclude(pk=check.pk)
    base = finished.order_by("-finished_at", "-id").first()
    if base is None or base.status != CheckStatus.INTACT or not base.head_seq:
        return full
    base_seq, base_hash = base.head_seq, base.head_hash
    rotated = (
        finished.filter(recheck_to__isnull=False)
        .order_by("-finished_at", "-id")
        .values_list("recheck_to", flat=True)
        .first()
    )
    start = (rotated or 0) + 1
    if start > base_seq:
        start = 1
    size = max(settings.ENGRAM["CHAIN_RECHECK_MIN_ROWS"], math.ceil(last_seq / recheck_rounds()))
    end = start + size - 1
    new = max(0, last_seq - base_seq)
    if end >= base_seq:  # the window reaches the new events: one segment to the end
        return _Plan(
            CheckScope.INCREMENTAL,
            (Segment(start, None, None),),
            base_seq + 1,
            (start, base_seq),
            base_seq - start + 1 + new,
        )
    return _Plan(
        CheckScope.INCREMENTAL,
        (Segment(start, end, None), Segment(base_seq + 1, None, base_hash)),
        base_seq + 1,
        (start, end),
        size + 1 + new,
    )


def chain_check_run(*, check_id: int, chunk_size: int = 10_000, sink_file: str | None = None) -> ChainCheck:
    """Run the check ``check_id``: every signed anchor (and those of ``sink_file``), then the links
    of the chain its plan covers (``_check_plan``: every event, or the new ones and a window of the
    older ones), the decisions behind redactions included, saving progress after each chunk so the
    admin's progress bar moves. Ends ``intact`` or ``broken`` with the findings, or ``failed`` with
    the error when it could not run (no public key, say). Running a check that already finished
    does nothing (tasks may repeat)."""
    check = ChainCheck.objects.filter(pk=check_id).first()
    if check is None:
        raise NotFound(f"No chain check {check_id}.", field="check_id")
    if check.is_done:
        return check
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT coalesce(max(seq), 0) FROM {Event._meta.db_table}")
        last_seq = int(cursor.fetchone()[0])
    plan = _check_plan(check, last_seq)
    ChainCheck.objects.filter(pk=check.pk).update(
        status=CheckStatus.RUNNING,
        started_at=timezone.now(),
        total=plan.total,
        scope=plan.scope,
        from_seq=plan.from_seq,
        recheck_from=plan.recheck[0] if plan.recheck else None,
        recheck_to=plan.recheck[1] if plan.recheck else None,
    )

    def progress(checked: int) -> None:
        ChainCheck.objects.filter(pk=check.pk).update(checked=checked)

    try:
        extra = []
        sink = sink_file or _sink_file()
        if sink and os.path.exists(sink):
            extra = sink_records(sink)
        report = trail_verify(
            extra_anchors=extra, progress=progress, chunk_size=chunk_size, segments=plan.segments
        )
    except ServiceUnavailable as exc:
        ChainCheck.objects.filter(pk=check.pk).update(
            status=CheckStatus.FAILED, finished_at=timezone.now(), error=exc.message
        )
    else:
        ChainCheck.objects.filter(pk=check.pk).update(
            status=CheckStatus.INTACT if report.ok else CheckStatus.BROKEN,
            finished_at=timezone.now(),
            checked=report.chain.checked,
            head_seq=report.chain.last_seq,
            head_hash=report.chain.last_hash,
            anchors_checked=report.anchors_trusted,
            redacted=report.chain.redacted,
            findings=[f.as_dict() for f in report.findings],
        )
        if not report.ok:
            logger.error(
                "trail of tenant %s broken: %s",
                current_schema(),
                "; ".join(f.message for f in report.findings[:5]),
            )
    check.refresh_from_db()
    return check


def chain_check_scheduled() -> ChainCheck | None:
    """The scheduled check of the tenant's trail (Celery beat, every ``CHAIN_CHECK_SECONDS``): an
    incremental check, run now (a full one when the last check was not intact). So a change to
    a new event is named by the next check, and a change to an older one within
    ``CHAIN_RECHECK_SECONDS`` (+ one interval). Nothing (None) while another check of the tenant,
    queued or running, was started within the last hour or ten intervals (one left by a killed
    worker stops blocking after that). Intact incremental checks older than
    ``SCHEDULED_CHECKS_KEPT_DAYS`` are deleted from the history."""
    interval = float(settings.ENGRAM["CHAIN_CHECK_SECONDS"])
    recent = timezone.now() - timedelta(seconds=max(3600.0, 10 * interval))
    with transaction.atomic():
        advisory_xact_lock("chain-check-scheduled")
        if ChainCheck.objects.filter(
            status__in=[CheckStatus.QUEUED, CheckStatus.RUNNING], created_at__gte=recent
        ).exists():
            return None
        check = ChainCheck.objects.create(
            requested_by=SCHEDULED_CHECK_JOB, scope=CheckScope.INCREMENTAL, status=CheckStatus.RUNNING
        )
    done = chain_check_run(check_id=check.pk)
    # one a minute would bury the history: routine intact ones go after a week (broken, failed and
    # full checks stay)
    ChainCheck.objects.filter(
        scope=CheckScope.INCREMENTAL,
        status=CheckStatus.INTACT,
        finished_at__lt=timezone.now() - timedelta(days=SCHEDULED_CHECKS_KEPT_DAYS),
    ).delete()
    return done


# --- anchors -----------------------------------------------------------------------------------------------


def _sink_file() -> str:
    sink = settings.ENGRAM.get("ANCHOR_SINK") or ""
    return "" if sink.startswith(("http://", "https://")) else sink


def _sink_send(sink: str, record: dict[str, Any]) -> str:
    """Send one anchor to the sink; returns the error, or "" when it was delivered."""
    try:
        if sink.startswith(("http://", "https://")):
            response = httpx.post(sink, json=record, timeout=settings.ENGRAM.get("ANCHOR_SINK_TIMEOUT", 5.0))
            response.raise_for_status()
        else:
            Path(sink).parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(sink, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record, sort_keys=True) + "\n")
    except (httpx.HTTPError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def anchor_head(*, now: datetime | None = None, force: bool = False) -> Anchor | None:
    """Sign the current tenant's chain head (the last event: its seq and hash) with the signing key
    and store the anchor, then send a copy to ``ENGRAM_ANCHOR_SINK`` (a file or an http(s) URL;
    a failed delivery is kept in ``sink_error`` and logged, the anchor still counts). Nothing when
    the log is empty or the head was anchored already (unless ``force``), or when the chain head
    row disagrees with the last event (that is tampering for a check to report, not to sign).
    Raises ``ServiceUnavailable`` without a signing key."""
    key_id = signing.key_id()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT seq, hash FROM {Event._meta.db_table} ORDER BY seq DESC LIMIT 1")
        row = cursor.fetchone()
        cursor.execute("SELECT last_seq, last_hash FROM memory_chainhead WHERE id = 1")
        head = cursor.fetchone()
    if row is None:
        return None
    seq, hash_value = int(row[0]), str(row[1])
    if head is None or (int(head[0]), head[1]) != (seq, hash_value):
        logger.error("tenant %s: chain head and last event disagree; not anchoring", current_schema())
        return None
    if not force and Anchor.objects.filter(seq=seq, hash=hash_value).exists():
        return None
    moment = now or timezone.now()
    statement = anchor_statement(tenant=current_schema(), seq=seq, hash_value=hash_value, anchored_at=moment)
    signature = signing.sign(statement)
    sink = settings.ENGRAM.get("ANCHOR_SINK") or ""
    record = {
        "tenant": current_schema(),
        "seq": seq,
        "hash": hash_value,
        "anchored_at": moment.isoformat(),
        "key_id": key_id,
        "statement": statement.decode(),
        "signature": signature,
    }
    error = _sink_send(sink, record) if sink else ""
    if error:
        logger.warning("anchor of tenant %s #%s not delivered to %s: %s", current_schema(), seq, sink, error)
    return Anchor.objects.create(
        seq=seq,
        hash=hash_value,
        anchored_at=moment,
        key_id=key_id,
        statement=statement.decode(),
        signature=signature,
        sink=sink,
        sink_error=error,
    )


def sink_anchor_records(path: str) -> list[AnchorRecord]:
    """The tenant's anchors as read back from a sink file (for ``verify_chain --anchors-file``)."""
    return sink_records(path)


# --- exports ------------------------------------------------------------------------------------------------


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


# --- the data lifecycle: retention rules, legal holds, erasure -----------------------------------------------

LIFECYCLE_SESSION = redaction.LIFECYCLE_SESSION  # the trail session of retention passes and erasures
RETENTION_JOB = "retention"


def _layer_or_error(name: str) -> lifecycle.Layer:
    try:
        return lifecycle.layer_get(name)
    except KeyError:
        raise InvalidInput(
            f"Unknown layer {name!r}; use one of {', '.join(lifecycle.LAYER_NAMES)}.", field="layer"
        ) from None


def retention_rule_save(*, rule: RetentionRule, username: str) -> RetentionRule:
    """Save a retention rule as changed in the admin by ``username`` and record it (old and new
    days). Raises ``InvalidInput`` for an unknown layer or memory type, or a layer kept by its
    TTLs rather than by age."""
    layer = _layer_or_error(rule.layer)
    if rule.memory_type and rule.memory_type not in layer.kinds:
        raise InvalidInput(f"The {layer.name} layer has no type {rule.memory_type!r}.", field="memory_type")
    if layer.aged is None or layer.like_sources:
        raise InvalidInput(f"The {layer.label} are kept by {layer.counts_from}.", field="layer")
    with transaction.atomic():
        old = RetentionRule.objects.filter(pk=rule.pk).values_list("keep_days", flat=True).first()
        rule.updated_by, rule.updated_at = f"user:{username}", timezone.now()
        rule.full_clean()
        rule.save()
        kind = f" ({rule.memory_type})" if rule.memory_type else ""
        person_record(
            username=username,
            action="retention_rule_update" if old is not None else "retention_rule_create",
            content=f"{username} set the retention of {layer.label}{kind} to {rule.keep_days} days"
            + (f" (was {old})." if old is not None else "."),
            payload={
                "layer": rule.layer,
                "memory_type": rule.memory_type,
                "keep_days": rule.keep_days,
                "previous": old,
            },
            session_id=LIFECYCLE_SESSION,
        )
    return rule


def retention_rule_delete(*, rule: RetentionRule, username: str) -> None:
    """Delete a stored rule (the layer's default applies again) and record it."""
    with transaction.atomic():
        layer, kind, days = rule.layer, rule.memory_type, rule.keep_days
        rule.delete()
        person_record(
            username=username,
            action="retention_rule_delete",
            content=f"{username} removed the retention rule of {layer}"
            + (f" ({kind})" if kind else "")
            + f" ({days} days): the default applies.",
            payload={"layer": layer, "memory_type": kind, "previous": days},
            session_id=LIFECYCLE_SESSION,
        )


def retention_run_start(*, requested_by: str) -> RetentionRun:
    """The unfinished retention run of the tenant (one interrupted), else a new one."""
    with transaction.atomic():
        advisory_xact_lock("retention-run")
        run = RetentionRun.objects.filter(status=RunStatus.RUNNING).order_by("pk").first()
        return run or RetentionRun.objects.create(requested_by=requested_by)


def retention_run(*, run_id: int, now: datetime | None = None, batch: int | None = None) -> RetentionRun:
    """Apply the retention rules (``compliance.lifecycle``) for run ``run_id``: per layer, rows past
    their rule and under no legal hold, ``batch`` at a time (``ENGRAM_LIFECYCLE_BATCH``), each batch
    one transaction that locks only its rows (``SKIP LOCKED``: rows another transaction holds wait
    for the next run; batches follow the primary key) and adds its count to the run, so
    no lock is held long and a run that was interrupted resumes where it stopped. Each batch of
    events redacted is named by a signed decision of ``job:retention`` (``compliance.redaction``;
    the run fails at once without a signing key). When every layer is done, logs one system
    decision (``job:retention``) with what was removed per layer.
    A run already finished is returned as it is. On an error the run is ``failed`` (logged) and
    the next run takes over."""
    run = RetentionRun.objects.filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"No retention run {run_id}.", field="run_id")
    if run.status != RunStatus.RUNNING:
        return run
    now = now or timezone.now()
    size = batch or settings.ENGRAM["LIFECYCLE_BATCH"]
    try:
        decided = redaction.redactions_decided(
            job=RETENTION_JOB, label=f"Retention run #{run.pk}", basis={"retention_run": run.pk}
        )
        with summaries_paused(), decided:  # see erasure_run: redactions and the summaries covering them
            _retention_layers(run, now=now, size=size)
    except Exception as exc:  # recorded on the run; the next daily run starts afresh
        logger.exception("retention run %s failed", run.pk)
        RetentionRun.objects.filter(pk=run.pk).update(
            status=RunStatus.FAILED, finished_at=timezone.now(), error=f"{type(exc).__name__}: {exc}"
        )
        run.refresh_from_db()
        return run
    lifecycle.vacuum([layer.model._meta.db_table for layer in lifecycle.stored_layers() if layer.model])
    with transaction.atomic():
        run = RetentionRun.objects.select_for_update().get(pk=run.pk)
        run.status, run.finished_at = RunStatus.DONE, timezone.now()
        run.save(update_fields=["status", "finished_at"])
        totals: dict[str, int] = {name: run.removed.get(name, 0) for name in lifecycle.LAYER_NAMES}
        job_record(
            job=RETENTION_JOB,
            action="retention_purge",
            content="Retention removed "
            + ", ".join(f"{n} {lifecycle.layer_get(name).label}" for name, n in totals.items() if n)
            + "."
            if any(totals.values())
            else "Retention removed nothing.",
            payload={"run_id": run.pk, "removed": totals, "as_of": now.isoformat()},
            session_id=LIFECYCLE_SESSION,
        )
    return run


def _retention_layers(run: RetentionRun, *, now: datetime, size: int) -> None:
    """Every stored layer's retention for ``run``, in committed batches (see ``retention_run``)."""
    for layer in lifecycle.stored_layers():
        after: Any = None  # keyset: the batches behind stay dead tuples until the vacuum
        while True:
            with transaction.atomic():
                rows = lifecycle.retention_candidates(layer, now=now)
                if rows is None:
                    break
                if after is not None:
                    rows = rows.filter(pk__gt=after)
                chosen = list(
                    rows.order_by("pk")
                    .select_for_update(skip_locked=True, of=("self",))
                    .values(*layer.load)[:size]
                )
                if not chosen:
                    break
                after = chosen[-1]["pk"]
                assert layer.remove is not None
                removed = layer.remove(chosen)
                counts = RetentionRun.objects.select_for_update().get(pk=run.pk).removed
                counts[layer.name] = counts.get(layer.name, 0) + len(removed.ids)
                RetentionRun.objects.filter(pk=run.pk).update(removed=counts)


# legal holds


def hold_place(*, kind: str, value: str, reason: str, username: str, four_eyes: bool = True) -> LegalHold:
    """Place a legal hold on (``kind``, ``value``) for ``reason`` as ``username`` and record it;
    with ``four_eyes`` its release will need a second officer (``hold_release``). Raises
    ``InvalidInput`` naming the field (unknown kind, missing value or reason)."""
    if kind not in TargetKind.values:
        raise InvalidInput(f"Unknown target kind {kind!r}.", field="kind")
    value = lifecycle.normalise_value(kind, value)
    if kind != TargetKind.TENANT and not value:
        raise InvalidInput("Name what the hold is on.", field="value")
    if not reason.strip():
        raise InvalidInput("Give the reason for the hold.", field="reason")
    with transaction.atomic():
        hold = LegalHold(
            kind=kind, value=value, reason=reason.strip(), four_eyes=four_eyes, placed_by=f"user:{username}"
        )
        hold.full_clean()
        hold.save()
        person_record(
            username=username,
            action="legal_hold_place",
            content=f"{username} placed {hold}: {hold.reason}"
            + (" (its release needs a second officer)" if four_eyes else ""),
            payload={
                "hold_id": hold.pk,
                "kind": kind,
                "value": value,
                "reason": hold.reason,
                "four_eyes": four_eyes,
            },
            session_id=LIFECYCLE_SESSION,
            data_subject=value if kind == TargetKind.SUBJECT else "",
        )
    return hold


def _hold_locked(hold: LegalHold | int) -> LegalHold:
    pk = hold.pk if isinstance(hold, LegalHold) else hold
    found = LegalHold.objects.select_for_update().filter(pk=pk).first()
    if found is None:
        raise NotFound(f"No legal hold {pk}.", field="hold_id")
    if not found.active:
        raise Conflict(f"{found} was released by {found.released_by} already.", field="hold_id")
    return found


def hold_release(*, hold: LegalHold | int, username: str, reason: str) -> LegalHold:
    """Release the active ``hold`` as ``username`` for ``reason``, recorded. A hold placed with four
    eyes is not released by one person: this asks for its release (recorded as
    ``legal_hold_release_request``; the hold stays active, and still holds) and a second officer
    releases it with ``hold_release_confirm``. Returns the hold as it is now.

    Raises ``InvalidInput`` without a reason, ``NotFound``, and ``Conflict`` when it is released
    already or its release is already waiting for a second officer."""
    reason = reason.strip()
    if not reason:
        raise InvalidInput("Give the reason for releasing the hold.", field="reason")
    with transaction.atomic():
        found = _hold_locked(hold)
        if found.release_waiting:
            raise Conflict(
                f"{found.release_requested_by} asked for the release of {found} already: a second "
                "officer confirms it.",
                field="hold_id",
            )
        now = timezone.now()
        found.release_reason = reason
        if found.four_eyes:
            found.release_requested_by, found.release_requested_at = f"user:{username}", now
            found.save(update_fields=["release_requested_by", "release_requested_at", "release_reason"])
            person_record(
                username=username,
                action="legal_hold_release_request",
                content=f"{username} asked for the release of {found}: {reason}. A second officer "
                "must confirm it.",
                payload={"hold_id": found.pk, "kind": found.kind, "value": found.value, "reason": reason},
                session_id=LIFECYCLE_SESSION,
                data_subject=found.value if found.kind == TargetKind.SUBJECT else "",
            )
            return found
        found.released_at, found.released_by = now, f"user:{username}"
        found.save(update_fields=["released_at", "released_by", "release_reason"])
        person_record(
            username=username,
            action="legal_hold_release",
            content=f"{username} released {found}: {reason}",
            payload={"hold_id": found.pk, "kind": found.kind, "value": found.value, "reason": reason},
            session_id=LIFECYCLE_SESSION,
            data_subject=found.value if found.kind == TargetKind.SUBJECT else "",
        )
    return found


def hold_release_confirm(*, hold: LegalHold | int, username: str) -> LegalHold:
    """As a second officer ``username``, release the hold whose release another officer asked for
    (``hold_release``), recorded naming both and the reason given.

    Raises ``NotFound``; ``PermissionDenied`` for the officer who asked; ``Conflict`` when the hold
    is released already or nobody asked for its release."""
    with transaction.atomic():
        found = _hold_locked(hold)
        if not found.release_waiting:
            raise Conflict(
                f"Nobody asked for the release of {found}: ask first, with the reason.", field="hold_id"
            )
        if found.release_requested_by == f"user:{username}":
            raise PermissionDenied(
                "You asked for this release: a second officer must confirm it.", field="released_by"
            )
        found.released_at, found.released_by = timezone.now(), f"user:{username}"
        found.save(update_fields=["released_at", "released_by"])
        asked_by = found.release_requested_by.removeprefix("user:")
        person_record(
            username=username,
            action="legal_hold_release",
            content=f"{username} released {found}, as {asked_by} asked: {found.release_reason}",
            payload={
                "hold_id": found.pk,
                "kind": found.kind,
                "value": found.value,
                "reason": found.release_reason,
                "requested_by": found.release_requested_by,
            },
            session_id=LIFECYCLE_SESSION,
            data_subject=found.value if found.kind == TargetKind.SUBJECT else "",
        )
    return found


# erasure (four eyes)


def _refuse_if_held(kind: str, value: str) -> None:
    met = lifecycle.holds_meeting(kind, value)
    if met:
        names = "; ".join(f"{h} ({h.reason})" for h in met)
        raise Conflict(f"Refused: the erasure meets {names}. Release the hold first.", field="kind")


def erasure_request(*, kind: str, value: str, legal_basis: str, note: str, username: str) -> ErasureRequest:
    """Request the erasure of everything of (``kind``, ``value``) (a data subject, a session, an
    agent, a memory tag or an entity) as ``username``, on ``legal_basis``; a second person must
    approve it (``erasure_approve``). Recorded in the trail by the value's digest, never the value.

    Raises ``InvalidInput`` naming the field, and ``Conflict`` naming the legal hold the erasure
    would meet."""
    if kind not in TargetKind.values or kind == TargetKind.TENANT:
        raise InvalidInput("Erase a subject, a session, an agent, a tag or an entity.", field="kind")
    value = lifecycle.normalise_value(kind, value)
    if not value:
        raise InvalidInput("Name what to erase.", field="value")
    if len(value) > 300:
        raise InvalidInput("At most 300 characters.", field="value")
    if not legal_basis.strip():
        raise InvalidInput("Give the legal basis (e.g. GDPR Art. 17(1)(a)).", field="legal_basis")
    _refuse_if_held(kind, value)
    with transaction.atomic():
        request = ErasureRequest.objects.create(
            kind=kind,
            value=value,
            value_digest=lifecycle.value_digest(kind, value),
            legal_basis=legal_basis.strip(),
            note=note.strip(),
            requested_by=f"user:{username}",
        )
        person_record(
            username=username,
            action="erasure_request",
            content=f"{username} requested erasure {str(request.pk)[:8]} of a {kind} "
            f"({legal_basis.strip()}).",
            payload={
                "erasure_id": str(request.pk),
                "kind": kind,
                "value_digest": request.value_digest,
                "legal_basis": request.legal_basis,
            },
            session_id=LIFECYCLE_SESSION,
        )
    return request


def erasure_approve(*, request_id: Any, username: str) -> ErasureRequest:
    """Approve a requested erasure as ``username`` (not its requester: four eyes) and queue its
    execution (``compliance.tasks.erasure_run``); recorded. A failed erasure may be approved again
    to run it once more (it resumes). Raises ``NotFound``, ``PermissionDenied`` for the requester,
    ``Conflict`` when it is not waiting for approval or meets a legal hold."""
    with transaction.atomic():
        request = ErasureRequest.objects.select_for_update().filter(pk=request_id).first()
        if request is None:
            raise NotFound("No such erasure request.", field="id")
        if request.requested_by == f"user:{username}":
            raise PermissionDenied(
                "You requested this erasure: a second person must approve it.", field="approved_by"
            )
        if request.status not in (ErasureStatus.REQUESTED, ErasureStatus.FAILED):
            raise Conflict(f"This erasure is {request.status}, not waiting for approval.", field="status")
        _refuse_if_held(request.kind, request.value)
        request.status, request.approved_by, request.approved_at = (
            ErasureStatus.APPROVED,
            f"user:{username}",
            timezone.now(),
        )
        request.error = ""
        request.save(update_fields=["status", "approved_by", "approved_at", "error"])
        person_record(
            username=username,
            action="erasure_approve",
            content=f"{username} approved erasure {str(request.pk)[:8]} requested by "
            f"{request.requested_by.removeprefix('user:')}.",
            payload={"erasure_id": str(request.pk), "value_digest": request.value_digest},
            session_id=LIFECYCLE_SESSION,
        )
        queue_on_commit("compliance.tasks.erasure_run", str(request.pk))
    return request


# knowledge before semantic: a fact promoted from a memory of the target is found through it;
# procedural before episodic: a subject's skill runs are found through the sessions of its events;
# summaries after episodic, with the summary job paused over both (see ``erasure_run``)
ERASURE_STEPS = ("checkpoints", "knowledge", "semantic", "store", "procedural", "episodic", "summaries")
PAUSED_STEPS = ("episodic", "summaries")


def erasure_run(*, request_id: Any, batch: int | None = None) -> ErasureRequest:
    """Execute an approved erasure: every layer in bounded batches (each batch commits with its
    progress, so a run killed midway resumes without redoing or losing anything), with the trail's
    records of the working memory that goes, the entity itself for an entity, then every copy
    beyond the layers' rows (``_erase_copies``: Redis, archives, replayed answers, task results,
    holds, vacuum and index rebuilds, Redis's files); then the verification pass over every store
    of ``lifecycle.STORES``, and the signed receipt, which also says what no erasure removes at
    once (``copies.lingering``). Recorded in the trail as ``job:erasure``. A legal hold placed
    since the approval stops it (``failed``, naming the hold). Requests not approved or running
    are returned as they are, and so is one another worker is running (tasks may repeat: a run
    holds the request's lock; one that died frees it, and the next resumes)."""
    with advisory_lock("erasure-run", request_id, wait=False) as ours:
        if not ours:  # another worker runs it (the task was delivered twice)
            request = ErasureRequest.objects.filter(pk=request_id).first()
            if request is None:
                raise NotFound("No such erasure request.", field="id")
            return request
        return _erasure_execute(request_id=request_id, batch=batch)


class _StepClock:
    """Adds the seconds since the previous call (or since it was made) to ``timings[step]``."""

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings, self.clock = timings, time.monotonic()

    def restart(self) -> None:
        """Count the next step from now (what ran since was timed by itself)."""
        self.clock = time.monotonic()

    def __call__(self, step: str) -> None:
        now = time.monotonic()
        self.timings[step] = round(self.timings.get(step, 0.0) + now - self.clock, 3)
        self.clock = now


def _erasure_execute(*, request_id: Any, batch: int | None) -> ErasureRequest:
    """The body of ``erasure_run``, under the request's lock."""
    with transaction.atomic():
        request = ErasureRequest.objects.select_for_update().filter(pk=request_id).first()
        if request is None:
            raise NotFound("No such erasure request.", field="id")
        if request.status not in (ErasureStatus.APPROVED, ErasureStatus.RUNNING):
            return request
        request.status = ErasureStatus.RUNNING
        request.started_at = request.started_at or timezone.now()
        request.save(update_fields=["status", "started_at"])
    size = batch or settings.ENGRAM["LIFECYCLE_BATCH"]
    kind, value = request.kind, request.value
    timings: dict[str, float] = {}  # seconds per step, kept in the progress (the benchmark prints them)
    lap = _StepClock(timings)

    try:
        signing.key_id()  # no receipt can be signed without the key: stop before erasing anything
        _refuse_if_held(kind, value)
        lap("holds")
        # each batch of events redacted is named by a signed decision of the erasure
        decided = redaction.redactions_decided(
            job="erasure", label=f"Erasure {str(request.pk)[:8]}", basis={"erasure_id": str(request.pk)}
        )
        with decided:
            for name in ERASURE_STEPS:
                if name in PAUSED_STEPS:
                    continue
                _erase_layer(request.pk, name, kind, value, size)
                lap(name)
            # no summary pass may read an event before its redaction and write its text after the
            # summaries covering it were removed
            with summaries_paused():
                for name in PAUSED_STEPS:
                    _erase_layer(request.pk, name, kind, value, size)
                    if name == "episodic":  # the trail's copies of the working memory that goes
                        with transaction.atomic():
                            sessions = lifecycle.Target(
                                kind, value, ErasureRequest.objects.get(pk=request.pk).progress
                            ).sessions
                            records = lifecycle.erase_working_memory_records(sessions)
                            if records is not None:
                                _progress_add(request.pk, "episodic", records)
                    lap(name)
        with transaction.atomic():
            if kind == TargetKind.ENTITY:
                gone = lifecycle.erase_entity_rows(value)
                _progress_add(request.pk, "knowledge", lifecycle.Removed([], set(), {"entity_ids": gone}))
        lap("entity")
        _erase_copies(request.pk, kind, value, timings)  # timed by itself
        lap.restart()
        request.refresh_from_db()
        report = lifecycle.verification_pass(
            kind=kind, value=value, progress=request.progress, timings=timings
        )
        lap.restart()
        if not lifecycle.verification_clean(report):
            raise RuntimeError(f"the verification pass found erased data left: {report}")
        done = _erasure_finish(request, report)
        # the request's earlier row versions held the identifier the finish cleared
        lifecycle.vacuum([ErasureRequest._meta.db_table])
        lap("receipt")
        _timings_add(done.pk, timings)
        done.refresh_from_db()
        return done
    except Exception as exc:  # shown on the request; approving it again resumes
        logger.exception("erasure %s failed", request.pk)
        ErasureRequest.objects.filter(pk=request.pk).update(
            status=ErasureStatus.FAILED,
            finished_at=timezone.now(),
            error=exc.message if isinstance(exc, DomainError) else f"{type(exc).__name__}: {exc}",
        )
        _timings_add(request.pk, timings)
        request.refresh_from_db()
        return request


def _erase_copies(request_pk: Any, kind: str, value: str, timings: dict[str, float]) -> None:
    """The steps of an erasure after the layers' rows: the working memory of the sessions touched
    (Redis), the export archives holding erased rows (any export's, in any state), the replay
    cache's answers, task results naming the subject, the subject's released holds; the tables
    vacuumed and analysed, their GIN indexes rebuilt; Redis's files rewritten. Each step's
    findings join the request's ``progress`` (a resumed run does them again: all are idempotent);
    ``timings`` gets their seconds."""
    lap = _StepClock(timings)

    target = lifecycle.Target(kind, value, ErasureRequest.objects.get(pk=request_pk).progress)
    agent_ids = list(Agent.objects.filter(name=value).values_list("pk", flat=True)) if kind == "agent" else []
    keys = lifecycle.erase_working_memory(
        sessions=target.sessions, agent_ids=agent_ids, needles=target.needles
    )
    _progress_merge(request_pk, "redis", {"keys": keys})
    lap("redis")
    withdrawn, strays = copies.archives_withdraw(
        target.erased(), reason=f"archive withdrawn by erasure {str(request_pk)[:8]}"
    )
    _progress_merge(request_pk, "exports", {"ids": withdrawn, "strays": strays})
    lap("exports")
    answers, watermark = replay_answers_withdraw()
    with transaction.atomic():
        locked = ErasureRequest.objects.select_for_update().get(pk=request_pk)
        before = locked.progress.get("replay", {}).get("withdrawn", 0)
        locked.progress["replay"] = {"withdrawn": before + answers, "watermark": watermark}
        locked.save(update_fields=["progress"])
    lap("replay")
    _progress_merge(request_pk, "task_results", {"keys": copies.celery_results_erase(target.needles)})
    lap("task results")
    _progress_merge(request_pk, "records", {"hold_ids": _holds_forget(kind, value)})
    lap("records")
    progress = ErasureRequest.objects.get(pk=request_pk).progress
    tables = lifecycle.touched_tables(progress)
    tables += [t for t in lifecycle.statistics_naming(target.needles) if t not in tables]
    vacuumed = lifecycle.vacuum(tables, timings=timings)
    forgotten = lifecycle.statistics_forget(tables)
    reindexed = lifecycle.gin_rebuild(tables, timings=timings)
    lap.restart()  # the vacuum and the rebuild timed themselves
    files = copies.redis_files_rewrite()
    lap("redis files")
    with transaction.atomic():
        locked = ErasureRequest.objects.select_for_update().get(pk=request_pk)
        locked.progress.update(
            {
                "vacuumed": vacuumed,
                "statistics_dropped": forgotten,
                "reindexed": reindexed,
                "redis_files": files,
            }
        )
        locked.save(update_fields=["progress"])


def _erase_layer(request_pk: Any, name: str, kind: str, value: str, size: int) -> None:
    """Erase the rows of layer ``name`` about the target: their keys read in one indexed query,
    then removed ``size`` per committed batch by key; again until the query finds none (rows
    written meanwhile, or beyond a round)."""
    layer = lifecycle.layer_get(name)
    while pks := lifecycle.erase_candidates(layer, kind, value):
        progressed = False
        for start in range(0, len(pks), size):
            with transaction.atomic():
                removed = lifecycle.erase_rows(layer, kind, value, pks[start : start + size])
                if removed is not None and removed.ids:
                    _progress_add(request_pk, name, removed)
                    progressed = True
        if not progressed:  # rows that match but cannot be removed: fail rather than spin
            raise RuntimeError(f"the {layer.label} of the target could not be removed")


def _timings_add(request_pk: Any, timings: dict[str, float]) -> None:
    """Add this run's seconds per step to ``progress["timings"]`` (a resumed run adds its own)."""
    with transaction.atomic():
        request = ErasureRequest.objects.select_for_update().get(pk=request_pk)
        kept = request.progress.setdefault("timings", {})
        for step, seconds in timings.items():
            kept[step] = round(kept.get(step, 0.0) + seconds, 3)
        request.save(update_fields=["progress"])


def _progress_add(request_pk: Any, layer: str, removed: lifecycle.Removed) -> None:
    """Add a batch's removals to the request's progress (inside the batch's transaction)."""
    request = ErasureRequest.objects.select_for_update().get(pk=request_pk)
    progress = request.progress
    part = progress.setdefault(layer, {})
    part["ids"] = part.get("ids", []) + list(removed.ids)
    for key, values in removed.details.items():
        part[key] = part.get(key, []) + list(values)
    progress["sessions"] = sorted(set(progress.get("sessions", [])) | removed.sessions)
    request.progress = progress
    request.save(update_fields=["progress"])


def _progress_merge(request_pk: Any, step: str, found: dict[str, list[Any]]) -> None:
    """Add what a step over the copies removed to ``progress[step]`` (lists, merged with a resumed
    run's; committed at once)."""
    with transaction.atomic():
        locked = ErasureRequest.objects.select_for_update().get(pk=request_pk)
        part = locked.progress.setdefault(step, {})
        for key, values in found.items():
            part[key] = sorted(set(part.get(key, [])) | set(values))
        locked.save(update_fields=["progress"])


def _holds_forget(kind: str, value: str) -> list[int]:
    """After the erasure of a data subject or an entity: its released legal holds keep the keyed
    digest instead of the identifier (as the erasure request does), and the admin's log of them
    (``LogEntry.object_repr``) says so. Their trail records carried the subject and were redacted
    with its events. Returns the holds changed."""
    from django.contrib.admin.models import LogEntry
    from django.contrib.contenttypes.models import ContentType

    if kind not in (TargetKind.SUBJECT, TargetKind.ENTITY) or not value:
        return []
    with transaction.atomic():
        holds = list(
            LegalHold.objects.select_for_update().filter(kind=kind, value=value, released_at__isnull=False)
        )
        for hold in holds:
            hold.value, hold.value_digest = "", lifecycle.value_digest(kind, value)
            hold.save(update_fields=["value", "value_digest"])
            LogEntry.objects.filter(
                content_type=ContentType.objects.get_for_model(LegalHold), object_id=str(hold.pk)
            ).update(object_repr=str(hold)[:200])
    return [hold.pk for hold in holds]


def _erasure_finish(request: ErasureRequest, report: dict[str, Any]) -> ErasureRequest:
    """Sign the receipt, clear the identifier, mark the request done and record it."""
    progress = request.progress
    now = timezone.now()
    stores = {
        "postgres": {
            "events_redacted": len(progress.get("episodic", {}).get("ids", [])),
            "event_seqs": progress.get("episodic", {}).get("ids", []),
            "event_body_digests": progress.get("episodic", {}).get("body_digests", []),
            "memories_deleted": len(progress.get("semantic", {}).get("ids", [])),
            "memory_ids": progress.get("semantic", {}).get("ids", []),
            "facts_deleted": len(progress.get("knowledge", {}).get("ids", [])),
            "fact_ids": progress.get("knowledge", {}).get("ids", []),
            "entity_ids": sorted(set(progress.get("knowledge", {}).get("entity_ids", []))),
            "checkpoints_deleted": len(progress.get("checkpoints", {}).get("ids", [])),
            "checkpoint_ids": progress.get("checkpoints", {}).get("ids", []),
            "summary_nodes_deleted": len(progress.get("summaries", {}).get("ids", [])),
            "summary_node_ids": progress.get("summaries", {}).get("ids", []),
            "summary_memory_ids": progress.get("summaries", {}).get("memory_ids", []),
            "summary_trees_rebuilt": sorted(set(progress.get("summaries", {}).get("rebuilt_sessions", []))),
            "promotions_deleted": progress.get("semantic", {}).get("promotion_ids", []),
            "promotions_detached": progress.get("knowledge", {}).get("promotions_detached", []),
            "skill_runs_deleted": len(progress.get("procedural", {}).get("ids", [])),
            "skill_run_ids": progress.get("procedural", {}).get("ids", []),
            "store_items_deleted": len(progress.get("store", {}).get("ids", [])),
            "store_item_ids": progress.get("store", {}).get("ids", []),
            "store_memory_ids": progress.get("store", {}).get("memory_ids", []),
            "tables_vacuumed": progress.get("vacuumed", []),
            "indexes_rebuilt": progress.get("reindexed", []),
        },
        "pgvector": {
            "embeddings_deleted": len(progress.get("semantic", {}).get("ids", []))
            + len(progress.get("summaries", {}).get("memory_ids", []))
            + len(progress.get("store", {}).get("memory_ids", [])),
            # keyed digests of the erased texts: comparable by whoever holds the server's secret,
            # never reversible into the short texts they stand for
            "content_digests": sorted(
                lifecycle.keyed_digest(h) for h in progress.get("semantic", {}).get("content_hashes", [])
            ),
        },
        "neo4j": {
            "relationships_removed": len(progress.get("knowledge", {}).get("ids", [])),
            "fact_ids": progress.get("knowledge", {}).get("ids", []),
            "entity_ids": sorted(set(progress.get("knowledge", {}).get("entity_ids", []))),
        },
        "redis": {
            "keys_deleted": len(progress.get("redis", {}).get("keys", []))
            + len(progress.get("checkpoints", {}).get("redis_keys", [])),
            "keys": sorted(
                set(progress.get("redis", {}).get("keys", []))
                | set(progress.get("checkpoints", {}).get("redis_keys", []))
            ),
        },
        "exports": {
            "archives_withdrawn": progress.get("exports", {}).get("ids", []),
            "stray_archives_deleted": progress.get("exports", {}).get("strays", []),
        },
        "replay": {"answers_withdrawn": progress.get("replay", {}).get("withdrawn", 0)},
        "task_results": {"deleted": len(progress.get("task_results", {}).get("keys", []))},
        "records": {"legal_holds_digested": progress.get("records", {}).get("hold_ids", [])},
        "redis_files": progress.get("redis_files", {}),
    }
    document = {
        "v": 1,
        "type": "engram-erasure-receipt",
        "tenant": current_schema(),
        "erasure_id": str(request.pk),
        "target": {"kind": request.kind, "value_digest": request.value_digest},
        "legal_basis": request.legal_basis,
        "requested_by": request.requested_by,
        "requested_at": request.requested_at.isoformat(),
        "approved_by": request.approved_by,
        "approved_at": request.approved_at.isoformat() if request.approved_at else None,
        "executed_at": now.isoformat(),
        "stores": stores,
        "verification": {
            "clean": True,
            **{store: counts for store, counts in report.items()},
        },
        # what no erasure removes at once, and until when
        "lingering": copies.lingering(progress.get("redis_files", {})),
        "key_id": signing.key_id(),
    }
    statement = lifecycle.receipt_bytes(document)
    signature = signing.sign(statement)
    sha = hashlib.sha256(statement).hexdigest()
    with transaction.atomic():
        done = ErasureRequest.objects.select_for_update().get(pk=request.pk)
        done.status, done.finished_at = ErasureStatus.DONE, now
        done.receipt, done.receipt_signature, done.receipt_key_id = (
            statement.decode(),
            signature,
            signing.key_id(),
        )
        if done.kind in (TargetKind.SUBJECT, TargetKind.ENTITY):
            done.value = ""  # only the digest stays
        # the working lists held the erased texts' plain digests: only the receipt's keyed ones stay
        done.progress.get("semantic", {}).pop("content_hashes", None)
        done.save()
        job_record(
            job="erasure",
            action="erasure_done",
            content=f"Erasure {str(done.pk)[:8]} of a {done.kind} done: "
            f"{stores['postgres']['events_redacted']} events redacted, "
            f"{stores['postgres']['memories_deleted']} memories, {stores['postgres']['facts_deleted']} facts, "
            f"{stores['postgres']['checkpoints_deleted']} checkpoints and {stores['redis']['keys_deleted']} "
            f"Redis keys deleted; receipt SHA-256 {sha}.",
            payload={
                "erasure_id": str(done.pk),
                "value_digest": done.value_digest,
                "counts": {
                    "events_redacted": stores["postgres"]["events_redacted"],
                    "memories": stores["postgres"]["memories_deleted"],
                    "facts": stores["postgres"]["facts_deleted"],
                    "entities": len(stores["postgres"]["entity_ids"]),
                    "checkpoints": stores["postgres"]["checkpoints_deleted"],
                    "redis_keys": stores["redis"]["keys_deleted"],
                    "exports_withdrawn": len(stores["exports"]["archives_withdrawn"]),
                },
                "receipt_sha256": sha,
            },
            session_id=LIFECYCLE_SESSION,
        )
    return done


def erasure_receipt_download_record(*, request: ErasureRequest, username: str) -> Event:
    """Record that ``username`` downloaded the receipt of ``request``."""
    return person_record(
        username=username,
        action="erasure_receipt_download",
        content=f"{username} downloaded the receipt of erasure {str(request.pk)[:8]}.",
        payload={"erasure_id": str(request.pk)},
        session_id=LIFECYCLE_SESSION,
    )
