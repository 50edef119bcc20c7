"""Erasure (four eyes): requested by one person, approved by another, run by a task over every
layer and every copy, checked by the verification pass and closed by a signed receipt."""

from __future__ import annotations

import hashlib
import logging
import time
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.models import Agent
from agents.services import replay_answers_withdraw
from core.errors import Conflict, DomainError, InvalidInput, NotFound, PermissionDenied
from core.locks import advisory_lock
from core.tasks import queue_on_commit
from core.tenancy import current_schema
from memory.consolidation.services.lifecycle import summaries_paused
from memory.episodic.models import Event
from tenants.services import erasure_ledger_note

from .. import copies, lifecycle, redaction, signing
from ..models import ErasureRequest, ErasureStatus, LegalHold, TargetKind
from .records import LIFECYCLE_SESSION, job_record, person_record

logger = logging.getLogger(__name__)


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
ERASURE_STEPS = (
    "checkpoints",
    "knowledge",
    "semantic",
    "store",
    "procedural",
    "extractions",
    "episodic",
    "summaries",
)
PAUSED_STEPS = ("episodic", "summaries")


def erasure_run(*, request_id: Any, batch: int | None = None) -> ErasureRequest:
    """Execute an approved erasure: every layer in bounded batches (each batch commits with its
    progress, so a run killed midway resumes without redoing or losing anything), with the trail's
    records of the working memory that goes, the entity itself for an entity, then every copy
    beyond the layers' rows (``_erase_copies``: Redis, archives, replayed answers, task results,
    holds, vacuum and index rebuilds, Redis's files); then the verification pass over every store
    of ``lifecycle.STORES``, and the signed receipt, which also says what no erasure removes at
    once (``copies.lingering``); once done, the erasure is kept in the public schema's ledger
    (``tenants.services.erasure_ledger_note``) for restores of older backups. Recorded in the
    trail as ``job:erasure``. A legal hold placed
    since the approval stops it (``failed``, naming the hold). Requests not approved or running
    are returned as they are, and so is one another worker is running (tasks may repeat: a run
    holds the request's lock; one that died frees it, and the next resumes)."""
    with advisory_lock("erasure-run", request_id, wait=False) as ours:
        if not ours:  # another worker runs it (the task was delivered twice)
            request = ErasureRequest.objects.filter(pk=request_id).first()
            if request is None:
                raise NotFound("No such erasure request.", field="id")
            return request
        request = _erasure_execute(request_id=request_id, batch=batch)
    if request.status == ErasureStatus.DONE and request.finished_at is not None:
        # kept outside the tenant's schema: a restore of an older backup re-applies it (0091)
        erasure_ledger_note(
            schema_name=current_schema(),
            erasure_id=request.pk,
            kind=request.kind,
            value_digest=request.value_digest,
            finished_at=request.finished_at,
            receipt_sha256=hashlib.sha256(request.receipt.encode()).hexdigest(),
        )
    return request


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


def _receipt_postgres(progress: dict[str, Any]) -> dict[str, Any]:
    """The receipt's account of PostgreSQL: per layer, the rows removed (counts and ids) and what
    went with them, the tables vacuumed and the indexes rebuilt (from the run's ``progress``)."""
    return {
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
        "extraction_jobs_deleted": len(progress.get("extractions", {}).get("ids", [])),
        "extraction_job_ids": progress.get("extractions", {}).get("ids", []),
        "store_items_deleted": len(progress.get("store", {}).get("ids", [])),
        "store_item_ids": progress.get("store", {}).get("ids", []),
        "store_memory_ids": progress.get("store", {}).get("memory_ids", []),
        "tables_vacuumed": progress.get("vacuumed", []),
        "indexes_rebuilt": progress.get("reindexed", []),
    }


def _receipt_stores(progress: dict[str, Any]) -> dict[str, Any]:
    """The receipt's ``stores``: what the erasure removed, per store, from the run's ``progress``."""
    return {
        "postgres": _receipt_postgres(progress),
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


def _receipt_document(
    request: ErasureRequest, stores: dict[str, Any], report: dict[str, Any], now: datetime
) -> dict[str, Any]:
    """The receipt of ``request`` executed at ``now``: the target by its digest, who asked and
    approved, what each store lost (``stores``), the verification pass's ``report``, what lingers."""
    return {
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
        "lingering": copies.lingering(request.progress.get("redis_files", {})),
        "key_id": signing.key_id(),
    }


def _erasure_finish(request: ErasureRequest, report: dict[str, Any]) -> ErasureRequest:
    """Sign the receipt, clear the identifier, mark the request done and record it."""
    now = timezone.now()
    stores = _receipt_stores(request.progress)
    statement = lifecycle.receipt_bytes(_receipt_document(request, stores, report, now))
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
        _erasure_done_record(done, stores, sha)
    return done


def _erasure_done_record(done: ErasureRequest, stores: dict[str, Any], sha: str) -> None:
    """Record the erasure ``done`` in the trail (``job:erasure``): its counts and the receipt's
    SHA-256 ``sha``."""
    postgres = stores["postgres"]
    job_record(
        job="erasure",
        action="erasure_done",
        content=f"Erasure {str(done.pk)[:8]} of a {done.kind} done: "
        f"{postgres['events_redacted']} events redacted, "
        f"{postgres['memories_deleted']} memories, {postgres['facts_deleted']} facts, "
        f"{postgres['checkpoints_deleted']} checkpoints and {stores['redis']['keys_deleted']} "
        f"Redis keys deleted; receipt SHA-256 {sha}.",
        payload={
            "erasure_id": str(done.pk),
            "value_digest": done.value_digest,
            "counts": {
                "events_redacted": postgres["events_redacted"],
                "memories": postgres["memories_deleted"],
                "facts": postgres["facts_deleted"],
                "entities": len(postgres["entity_ids"]),
                "checkpoints": postgres["checkpoints_deleted"],
                "redis_keys": stores["redis"]["keys_deleted"],
                "exports_withdrawn": len(stores["exports"]["archives_withdrawn"]),
            },
            "receipt_sha256": sha,
        },
        session_id=LIFECYCLE_SESSION,
    )


def erasure_receipt_download_record(*, request: ErasureRequest, username: str) -> Event:
    """Record that ``username`` downloaded the receipt of ``request``."""
    return person_record(
        username=username,
        action="erasure_receipt_download",
        content=f"{username} downloaded the receipt of erasure {str(request.pk)[:8]}.",
        payload={"erasure_id": str(request.pk)},
        session_id=LIFECYCLE_SESSION,
    )
