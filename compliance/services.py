"""Writes of the compliance console: chain checks, anchors, exports, and the trail of people's
actions in the admin (logins, agents, keys, users and groups), each recorded by the service that
makes the change.

A person's decision is an event of the tenant's system agent with ``actor`` ``user:<username>``,
in the session of the object it concerns or else the person's own ``admin:<username>`` session
(``memory.episodic.services.person_session``); a job's with ``actor`` ``job:<name>``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import connection, transaction
from django.utils import timezone
from django_tenants.utils import get_public_schema_name

from agents.models import Agent, ApiKey
from agents.services import api_key_create, api_key_revoke, system_agent_get
from core.errors import InvalidInput, NotFound, ServiceUnavailable
from core.tasks import queue_on_commit
from core.tenancy import current_schema
from memory.episodic.models import Event
from memory.episodic.services import decision_record, person_session

from . import signing
from .exporting import EVENT_TABLE, archive_write, scope_where
from .models import Anchor, ChainCheck, CheckStatus, Export, ExportStatus, ScopeKind
from .verification import AnchorRecord, anchor_statement, sink_records, trail_verify

logger = logging.getLogger(__name__)

MAX_SESSION_CHARS = 200


def person_record(
    *, username: str, action: str, content: str, payload: dict[str, Any], session_id: str | None = None
) -> Event:
    """Append a decision made by the person ``username`` (actor ``user:<username>``) in
    ``session_id`` or their ``admin:<username>`` session; ``payload`` gets ``action``."""
    return decision_record(
        agent=system_agent_get(),
        session_id=session_id or person_session(username),
        actor=f"user:{username}",
        content=content,
        payload={"action": action, **payload},
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


# --- agents and keys ------------------------------------------------------------------------------------


def agent_save(*, agent: Agent, username: str, changed: Sequence[str], created: bool) -> Agent:
    """Save ``agent`` (validated) as changed in the admin by ``username`` and record it, naming the
    changed fields with their new values."""
    with transaction.atomic():
        agent.full_clean()
        agent.save()
        values = {name: getattr(agent, name) for name in changed if name in ("name", "role", "is_active")}
        person_record(
            username=username,
            action="agent_create" if created else "agent_update",
            content=f"{username} {'created' if created else 'changed'} agent {agent.name}"
            + (": " + ", ".join(f"{k} → {v!r}" for k, v in values.items()) if values else "."),
            payload={"agent": agent.name, "agent_id": agent.pk, "changes": values},
        )
    return agent


def api_key_issue(*, agent: Agent, scopes: Iterable[str], name: str, username: str) -> tuple[ApiKey, str]:
    """Mint a key for ``agent`` (``agents.services.api_key_create``) on behalf of the person
    ``username`` and record it (the key id and scopes, never the secret). Returns ``(key, raw)``."""
    with transaction.atomic():
        key, raw = api_key_create(agent=agent, scopes=scopes, name=name)
        person_record(
            username=username,
            action="api_key_create",
            content=f"{username} created API key {key.key_id} for {agent.name} ({', '.join(key.scopes)}).",
            payload={"agent": agent.name, "key_id": key.key_id, "scopes": list(key.scopes), "name": name},
        )
    return key, raw


def api_key_revoke_by(*, api_key: ApiKey, username: str) -> ApiKey:
    """Revoke ``api_key`` on behalf of ``username`` and record it (once: revoking a revoked key
    changes and records nothing)."""
    with transaction.atomic():
        was_revoked = api_key.revoked_at is not None
        api_key_revoke(api_key=api_key)
        if not was_revoked:
            person_record(
                username=username,
                action="api_key_revoke",
                content=f"{username} revoked API key {api_key.key_id} of {api_key.agent.name}.",
                payload={"agent": api_key.agent.name, "key_id": api_key.key_id},
            )
    return api_key


def api_key_rename(*, api_key: ApiKey, name: str, username: str) -> ApiKey:
    """Change a key's label on behalf of ``username`` (its scopes and agent are fixed) and record it."""
    with transaction.atomic():
        old = ApiKey.objects.get(pk=api_key.pk).name
        if old == name:
            return api_key
        api_key.name = name
        api_key.full_clean()
        api_key.save(update_fields=["name"])
        person_record(
            username=username,
            action="api_key_update",
            content=f"{username} renamed API key {api_key.key_id}: {old!r} → {name!r}.",
            payload={"key_id": api_key.key_id, "changes": {"name": [old, name]}},
        )
    return api_key


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


def chain_check_request(*, requested_by: str) -> ChainCheck:
    """Queue a verification of the current tenant's trail (``compliance.tasks.chain_check``) for
    ``requested_by`` (``user:<name>`` or ``job:<name>``); returns the queued check."""
    with transaction.atomic():
        check = ChainCheck.objects.create(requested_by=requested_by)
        queue_on_commit("compliance.tasks.chain_check", check.pk)
    return check


def chain_check_run(*, check_id: int, chunk_size: int = 10_000, sink_file: str | None = None) -> ChainCheck:
    """Run the check ``check_id``: every signed anchor (and those of ``sink_file``), then every link
    of the chain, saving progress after each chunk so the admin's progress bar moves. Ends
    ``intact`` or ``broken`` with the findings, or ``failed`` with the error when it could not run
    (no signing key, say). Running a check that already finished does nothing (tasks may repeat)."""
    check = ChainCheck.objects.filter(pk=check_id).first()
    if check is None:
        raise NotFound(f"No chain check {check_id}.", field="check_id")
    if check.is_done:
        return check
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT coalesce(max(seq), 0) FROM {Event._meta.db_table}")
        total = int(cursor.fetchone()[0])
    ChainCheck.objects.filter(pk=check.pk).update(
        status=CheckStatus.RUNNING, started_at=timezone.now(), total=total
    )

    def progress(checked: int) -> None:
        ChainCheck.objects.filter(pk=check.pk).update(checked=checked)

    try:
        extra = []
        sink = sink_file or _sink_file()
        if sink and os.path.exists(sink):
            extra = sink_records(sink)
        report = trail_verify(extra_anchors=extra, progress=progress, chunk_size=chunk_size)
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


def export_directory() -> Path:
    """Where the current tenant's archives are kept (``ENGRAM_EXPORT_DIR/<schema>``)."""
    return Path(settings.ENGRAM["EXPORT_DIR"]) / current_schema()


def export_run(*, export_id: str) -> Export:
    """Write the archive of export ``export_id`` (``exporting.archive_write``), then record the
    export in the trail as the person who asked for it: scope, counts, chain range and the
    archive's SHA-256. A failure leaves the export ``failed`` with the error; an export already
    done is left as it is (tasks may repeat)."""
    export = Export.objects.filter(pk=export_id).first()
    if export is None:
        raise NotFound(f"No export {export_id}.", field="export_id")
    if export.is_done:
        return export
    total = _scope_count(export)
    Export.objects.filter(pk=export.pk).update(
        status=ExportStatus.RUNNING, started_at=timezone.now(), events_total=total, events_done=0
    )

    def progress(done: int) -> None:
        Export.objects.filter(pk=export.pk).update(events_done=done)

    try:
        result = archive_write(export, directory=export_directory(), progress=progress)
    except Exception as exc:  # recorded on the export, shown in the admin; the task must not loop
        logger.exception("export %s failed", export.pk)
        Export.objects.filter(pk=export.pk).update(
            status=ExportStatus.FAILED, finished_at=timezone.now(), error=f"{type(exc).__name__}: {exc}"
        )
        export.refresh_from_db()
        return export
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
