"""Writes to the episodic log: appends only, each one linked into the tenant's hash chain."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection, transaction
from django.utils import timezone

from agents.models import Agent
from agents.services import system_agent_get
from agents.subjects import FIELD, subject_written
from core.canonical_json import canonical_json
from core.errors import InvalidInput
from core.recording import Actor

from .models import (
    CHAIN_VERSION,
    REDACTION_ACTION,
    ChainHead,
    Event,
    EventKind,
    EventRole,
    body_digest,
    chain_hash,
    hashed_header,
    iso_utc,
    runs_text,
    seq_runs,
)


@dataclass(frozen=True)
class EventData:
    """One event to append. ``occurred_at`` must be timezone-aware (client time of the event)."""

    session_id: str
    kind: str
    content: str
    occurred_at: datetime
    role: str = EventRole.ASSISTANT
    payload: dict[str, Any] = field(default_factory=dict)
    execution_id: str | None = None
    actor: str = ""
    data_subject: str = ""


# checked per event: ``EventKind.values`` would build its list on every read
_KINDS = frozenset(EventKind.values)
_ROLES = frozenset(EventRole.values)


def events_append(*, agent: Agent, events: Sequence[EventData]) -> list[Event]:
    """Append ``events`` (all or nothing) for ``agent`` to the current tenant's log.

    The chain head row is locked for the transaction, so concurrent appenders queue and every event
    gets the next ``seq`` and the hash of its predecessor (chain format 2: see ``models``). Returns
    the saved events in order (``agent`` already loaded on each; the generated columns ``search``
    and ``payload_index`` are read from the database on first access). Raises ``InvalidInput`` for
    a naive ``occurred_at``, an unknown kind or role, a payload that is not canonical JSON
    (``core.canonical_json``) or an empty batch.

    What needs no chain position (payload text, salt, body digest, the times in the hashed form)
    is computed before the head is locked: concurrent appenders wait only for each other's hashing
    and insert, not for that work.

    An agent acting for one end user (a bound key) writes its subject on every event
    (``agents.subjects.subject_written``: another one raises ``SubjectRefused``, field
    ``data_subject`` or ``events[<i>].data_subject``).
    """
    if agent.acting_for:
        events = [
            replace(
                e,
                data_subject=subject_written(
                    agent, e.data_subject, field=f"events[{i}].data_subject" if len(events) > 1 else FIELD
                ),
            )
            for i, e in enumerate(events)
        ]
    bodies = _bodies(events)
    # no savepoint inside a caller's transaction (two round trips of every recorded decision): a
    # failure here fails the caller's transaction as a whole, which is what all or nothing asks
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute(_HEAD_SQL)
        head = cursor.fetchone()
        if head is None:
            raise ChainHead.DoesNotExist("The tenant's chain head row is missing.")
        recorded_at = timezone.now()
        rows = _chained(
            events, bodies, agent=agent, head=(int(head[0]), str(head[1])), recorded_at=recorded_at
        )
        seq, prev = rows[-1]["seq"], rows[-1]["hash"]
        cursor.execute(_APPEND_SQL, [agent.pk, recorded_at, CHAIN_VERSION, json.dumps(rows), seq, prev])
        ids = [row[0] for row in cursor.fetchall()]
        alias = connection.alias  # the proxy's thread-local lookup once, not per event
    return [
        _loaded(item, row, pk, agent=agent, recorded_at=recorded_at, alias=alias)
        for item, row, pk in zip(events, rows, ids, strict=True)
    ]


class _Body(NamedTuple):
    """What an event's row holds that needs no chain position: the payload's canonical text, the
    salt, the body digest and ``occurred_at`` as hashed (ISO 8601 UTC)."""

    payload_json: str
    salt: str
    digest: str
    occurred: str


def _bodies(events: Sequence[EventData]) -> list[_Body]:
    """Each event's ``_Body``, after checking the batch (see ``events_append`` for what it raises)."""
    if not events:
        raise InvalidInput("At least one event is required.", field="events")
    payloads = [
        "{}"
        if item.payload.__class__ is dict and not item.payload
        else canonical_json(item.payload, root="payload")
        for item in events
    ]
    for index, item in enumerate(events):
        if timezone.is_naive(item.occurred_at):
            raise InvalidInput(f"events[{index}].occurred_at must include a timezone.", field="occurred_at")
        if item.kind not in _KINDS:
            raise InvalidInput(f"Unknown kind {item.kind!r}.", field="kind")
        if item.role not in _ROLES:
            raise InvalidInput(f"Unknown role {item.role!r}.", field="role")
    # 128 random bits per event, as ``secrets.token_hex(16)`` gives them, from one read of the OS's
    # generator
    salt_hex = secrets.token_hex(16 * len(events))
    salts = [salt_hex[i : i + 32] for i in range(0, len(salt_hex), 32)]
    return [
        _Body(
            payload_json=payload_json,
            salt=salt,
            digest=body_digest(salt=salt, content=item.content, payload_json=payload_json),
            occurred=iso_utc(item.occurred_at),
        )
        for item, salt, payload_json in zip(events, salts, payloads, strict=True)
    ]


def _chained(
    events: Sequence[EventData],
    bodies: Sequence[_Body],
    *,
    agent: Agent,
    head: tuple[int, str],
    recorded_at: datetime,
) -> list[dict[str, Any]]:
    """The rows of ``events`` as ``_APPEND_SQL`` inserts them, each chained to the one before, the
    first to ``head`` (the chain head's seq and hash)."""
    recorded = iso_utc(recorded_at)
    seq, prev = head
    rows: list[dict[str, Any]] = []
    for item, body in zip(events, bodies, strict=True):
        seq += 1
        header = hashed_header(
            session_id=item.session_id,
            execution_id=item.execution_id,
            agent_id=agent.pk,
            actor=item.actor,
            role=item.role,
            kind=item.kind,
            occurred_at=body.occurred,
            recorded_at=recorded,
        )
        row: dict[str, Any] = {
            "seq": seq,
            "session_id": item.session_id,
            "execution_id": item.execution_id,
            "role": item.role,
            "kind": item.kind,
            "actor": item.actor,
            "data_subject": item.data_subject,
            "content": item.content,
            "payload_json": body.payload_json,
            "occurred_at": body.occurred,
            "body_salt": body.salt,
            "body_digest": body.digest,
            "prev_hash": prev,
        }
        prev = row["hash"] = chain_hash(seq=seq, prev_hash=prev, header=header, digest=body.digest)
        rows.append(row)
    return rows


def _loaded(
    item: EventData, row: dict[str, Any], pk: int, *, agent: Agent, recorded_at: datetime, alias: str
) -> Event:
    """The ``Event`` inserted as ``row`` (id ``pk``), built as if read from the database."""
    event = Event.from_db(
        alias,
        _LOADED,
        [
            pk,
            row["seq"],
            row["session_id"],
            row["execution_id"],
            agent.pk,
            row["role"],
            row["kind"],
            row["actor"],
            row["data_subject"],
            row["content"],
            row["payload_json"],
            item.occurred_at,
            recorded_at,
            CHAIN_VERSION,
            row["body_salt"],
            row["body_digest"],
            row["prev_hash"],
            row["hash"],
            None,
            None,
        ],
    )
    _AGENT_FIELD.set_cached_value(event, agent)
    return event


# The columns ``events_append`` gives ``Event.from_db``, in this order; the generated ones are left
# deferred (read on first access). ``from_db`` hands the model its values positionally (the fast path
# of ``Model.__init__``).
_LOADED = (
    "id",
    "seq",
    "session_id",
    "execution_id",
    "agent_id",
    "role",
    "kind",
    "actor",
    "data_subject",
    "content",
    "payload_json",
    "occurred_at",
    "recorded_at",
    "hash_version",
    "body_salt",
    "body_digest",
    "prev_hash",
    "hash",
    "redacted_at",
    "redacted_by",
)
_AGENT_FIELD = Event._meta.get_field("agent")
_HEAD_SQL = f"SELECT last_seq, last_hash FROM {ChainHead._meta.db_table} WHERE id = 1 FOR UPDATE"

# The batch's rows and the new chain head in one statement, one round trip: the rows travel as one
# JSON document (``jsonb_to_recordset``), six placeholders whatever the batch's size.
_APPEND_SQL = f"""
    WITH ins AS (
        INSERT INTO {Event._meta.db_table} (seq, session_id, execution_id, agent_id, role, kind, actor,
            data_subject, content, payload_json, occurred_at, recorded_at, hash_version, body_salt,
            body_digest, prev_hash, hash)
        SELECT r.seq, r.session_id, r.execution_id, %s, r.role, r.kind, r.actor, r.data_subject,
            r.content, r.payload_json, r.occurred_at, %s, %s, r.body_salt, r.body_digest, r.prev_hash,
            r.hash
        FROM jsonb_to_recordset(%s::jsonb) AS r(seq bigint, session_id text, execution_id text,
            role text, kind text, actor text, data_subject text, content text, payload_json text,
            occurred_at timestamptz, body_salt text, body_digest text, prev_hash text, hash text)
        ORDER BY r.seq
        RETURNING id, seq
    ), head AS (
        UPDATE {ChainHead._meta.db_table} SET last_seq = %s, last_hash = %s WHERE id = 1
    )
    SELECT id FROM ins ORDER BY seq
"""


def person_session(username: str) -> str:
    """The trail session of the changes a person makes in the admin that concern no session
    (``admin:<username>``)."""
    return f"admin:{username}"


def agent_session(agent: Agent) -> str:
    """The trail session of an agent's decision on an object that has no session, when its request
    names none (``agent:<name>``): the agent's counterpart of ``person_session``."""
    return f"agent:{agent.name}"


def trail_record(
    *, by: Actor, action: str, content: str, payload: dict[str, Any], session_id: str | None = None
) -> Event:
    """The trail's recorder for the apps below it (``core.recording.change_record``): one
    ``decision`` of the tenant's system agent made by ``by`` (actor ``str(by)``), in ``session_id``
    or else a person's ``admin:<username>`` session, a command's or job's ``command:<name>`` /
    ``job:<name>``; the payload is ``{"action": action, **payload}``."""
    own_session = person_session(by.name) if by.kind == "user" else str(by)
    return decision_record(
        agent=system_agent_get(),
        session_id=session_id or own_session,
        actor=str(by),
        content=content,
        payload={"action": action, **payload},
    )


def decision_record(
    *,
    agent: Agent,
    session_id: str,
    content: str,
    payload: dict[str, Any],
    execution_id: str | None = None,
    actor: str = "",
    data_subject: str = "",
) -> Event:
    """Append one ``decision`` event made by the system on ``agent``'s behalf (e.g. a forget);
    ``actor`` names the person or job who decided when it was not the agent (``user:<username>``);
    ``data_subject`` the person the decision concerns (an erasure of them redacts it)."""
    return events_append(
        agent=agent,
        events=[
            EventData(
                session_id=session_id,
                execution_id=execution_id,
                kind=EventKind.DECISION,
                role=EventRole.SYSTEM,
                content=content,
                payload=payload,
                occurred_at=timezone.now(),
                actor=actor,
                data_subject=data_subject,
            )
        ],
    )[0]


@dataclass(frozen=True)
class RedactionDecision:
    """Who decides a redaction and on what grounds. ``events_redact`` records it as a ``decision``
    event of ``agent`` in ``session_id`` (``actor``: the job or person, e.g. ``job:retention``) whose
    payload names the events it redacts: ``{**basis, "action": "events_redact", "redacts": [[first,
    last], ...], "count": n}``, plus what ``seal(payload)`` adds (the compliance app's signature).
    ``label`` opens the event's text ("Retention redacted 3 events: #4-#6.")."""

    agent: Agent
    actor: str
    session_id: str
    label: str
    basis: Mapping[str, Any] = field(default_factory=dict)
    seal: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None


def events_redact(*, event_ids: Sequence[int], decision: RedactionDecision) -> list[int]:
    """Remove for good the content, payload, salt and data subject of the events ``event_ids`` of
    the current tenant, as ``decision`` decides: the events still to redact are locked, the decision
    naming exactly them is appended, and each redacted event points at it (``redacted_by``), in one
    transaction. The append-only trigger allows this one update, and only with such a decision; the
    full-text vector and the ``jsonb`` copy are generated from the body, so they empty too; hash,
    body digest and the hashed header stay, so ``chain_verify`` still passes and checks the account.

    Events already redacted, and decisions that account for redactions (kept for good), are left
    as they are. Returns the seqs redacted now (none: no decision is recorded)."""
    if not event_ids:
        return []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT seq FROM {Event._meta.db_table} WHERE id = ANY(%s) AND redacted_at IS NULL "
            "AND NOT (kind = %s AND payload_index @> jsonb_build_object('action', %s::text)) "
            "ORDER BY seq FOR UPDATE",
            [list(event_ids), EventKind.DECISION, REDACTION_ACTION],
        )
        seqs = [int(row[0]) for row in cursor.fetchall()]
        if not seqs:
            return []
        runs = seq_runs(seqs)
        payload: dict[str, Any] = {**decision.basis, "action": REDACTION_ACTION, "redacts": runs}
        payload["count"] = len(seqs)
        if decision.seal is not None:
            payload.update(decision.seal(payload))
        recorded = decision_record(
            agent=decision.agent,
            session_id=decision.session_id,
            actor=decision.actor,
            content=f"{decision.label} redacted {len(seqs)} event{'s' if len(seqs) != 1 else ''}: "
            f"{runs_text(runs)}.",
            payload=payload,
        )
        cursor.execute(
            f"UPDATE {Event._meta.db_table} SET content = '', payload_json = '{{}}', body_salt = '', "
            "data_subject = '', redacted_at = now(), redacted_by = %s WHERE seq = ANY(%s) "
            "RETURNING seq",
            [recorded.seq, seqs],
        )
        return sorted(int(row[0]) for row in cursor.fetchall())
