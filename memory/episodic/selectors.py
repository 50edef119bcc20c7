"""Reads of the episodic log: filtered listings and chain verification."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from django.contrib.postgres.search import SearchQuery
from django.db import connection
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from .models import GENESIS_HASH, ISO_SQL, ChainHead, Event, body_digest, chain_hash, hashed_header


def event_list(
    *,
    session_id: str | None = None,
    execution_id: str | None = None,
    agent_name: str | None = None,
    kinds: list[str] | None = None,
    occurred_from: datetime | None = None,
    occurred_to: datetime | None = None,
    q: str | None = None,
) -> QuerySet[Event]:
    """Events of the current tenant matching every given filter, oldest first.

    ``occurred_from`` is inclusive, ``occurred_to`` exclusive; ``q`` is a web-search style full-text
    query (PostgreSQL ``websearch_to_tsquery``, English stemming).
    """
    qs = Event.objects.select_related("agent").defer("search", "payload_index")
    if session_id is not None:
        qs = qs.filter(session_id=session_id)
    if execution_id is not None:
        qs = qs.filter(execution_id=execution_id)
    if agent_name is not None:
        qs = qs.filter(agent__name=agent_name)
    if kinds:
        qs = qs.filter(kind__in=kinds)
    if occurred_from is not None:
        qs = qs.filter(occurred_at__gte=occurred_from)
    if occurred_to is not None:
        qs = qs.filter(occurred_at__lt=occurred_to)
    if q:
        qs = qs.filter(search=SearchQuery(q, search_type="websearch", config="english"))
    return qs.order_by("occurred_at", "seq")


@dataclass(frozen=True)
class SessionTail:
    """The latest ``events`` of a session, oldest first (loaded with ``id``, ``seq``,
    ``occurred_at``, ``kind``, ``role``, ``content`` and ``agent.name`` only), and ``total``, how
    many events the session holds."""

    events: Sequence[Event]
    total: int


def session_tail(*, session_id: str, last: int) -> SessionTail:
    """The session's ``last`` latest events (by ``occurred_at``, then ``seq``) and its event count,
    in one query: the count is an uncorrelated subquery PostgreSQL runs once, an index-only scan of
    ``event_session_idx``, and the rows a backward scan of the same index that stops after ``last``
    (EXPLAIN ANALYZE at 570 events: 0.1 ms for the count, 0.2 ms in all). A session without events
    gives no row, so its count is 0 without asking."""
    # count(*), not count(id): the index holds no id, and only a count of rows stays index-only
    count = RawSQL(f"SELECT count(*) FROM {Event._meta.db_table} WHERE session_id = %s", [session_id])
    rows = list(
        Event.objects.select_related("agent")
        .filter(session_id=session_id)
        .only("id", "seq", "occurred_at", "kind", "role", "content", "agent__name")
        .annotate(session_events=count)
        .order_by("-occurred_at", "-seq")[:last]
    )
    total = rows[0].session_events if rows else 0
    events = rows[::-1]
    return SessionTail(events, total)


class FindingKind(StrEnum):
    """What a broken link of the chain is, as ``chain_verify`` names it."""

    CONTENT_ALTERED = "content_altered"  # content or payload no longer match the row's body digest
    FIELDS_ALTERED = "fields_altered"  # a hashed field (session, agent, actor, kind, times...) changed
    GAP = "gap"  # rows missing in the middle: deleted
    REORDERED = "reordered"  # a row sits at another position than the one it was chained at
    REWRITTEN = "rewritten"  # a row whose hash was recomputed after its successor was chained to it
    TRUNCATED = "truncated"  # the last rows are gone: the chain head or an anchor says more existed
    HEAD_MISMATCH = "head_mismatch"  # the chain head row does not describe the last row
    ANCHOR_MISMATCH = "anchor_mismatch"  # the row at an anchored position is not the one anchored
    ANCHOR_SIGNATURE = "anchor_signature"  # an anchor whose signature does not verify (compliance)


@dataclass(frozen=True)
class Finding:
    """One broken link: its ``kind``, the position (``seq``) where it shows and what it means."""

    kind: FindingKind
    seq: int | None
    message: str

    def as_dict(self) -> dict[str, object]:
        return {"kind": str(self.kind), "seq": self.seq, "message": self.message}


@dataclass(frozen=True)
class TrustedAnchor:
    """A signed statement that the chain once had ``hash`` at ``seq`` (at ``anchored_at``, ISO 8601),
    whose signature the caller has checked."""

    seq: int
    hash: str
    anchored_at: str


@dataclass(frozen=True)
class ChainReport:
    """Outcome of ``chain_verify``: ``ok``, how many events were checked, every finding (the first
    ``max_findings``) and, for the first one, ``broken_seq`` / ``broken_id`` / ``reason``.
    ``last_seq`` / ``last_hash``: the last row of the log as found; ``redacted``: events checked
    whose content was erased (their body digest stands in for it)."""

    ok: bool
    checked: int
    broken_seq: int | None = None
    broken_id: int | None = None
    reason: str = ""
    findings: tuple[Finding, ...] = ()
    last_seq: int = 0
    last_hash: str = GENESIS_HASH
    redacted: int = 0


_COLUMNS = (
    "id, seq, session_id, execution_id, agent_id, actor, role, kind, content, payload_json, "
    f"{ISO_SQL.format('occurred_at')}, {ISO_SQL.format('recorded_at')}, "
    "hash_version, body_salt, body_digest, prev_hash, hash, redacted_at IS NOT NULL"
)


def _owner_of(hash_value: str) -> int | None:
    """The ``seq`` of the row whose hash is ``hash_value`` (unique index), or None."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT seq FROM {Event._meta.db_table} WHERE hash = %s", [hash_value])
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def chain_verify(
    *,
    chunk_size: int = 10_000,
    anchors: Sequence[TrustedAnchor] = (),
    progress: Callable[[int], None] | None = None,
    max_findings: int = 100,
) -> ChainReport:
    """Recompute every hash of the current tenant's chain in ``seq`` order, and name what is wrong.

    Each row is checked in its own chain format. Findings (``FindingKind``): a body that no longer
    matches its digest (content altered), fields that no longer match the hash (fields altered), a
    gap in ``seq`` (rows deleted), a row chained at another position (reordered: its ``prev_hash``
    is the hash of a row elsewhere and its hash verifies at that position), a predecessor whose hash
    was recomputed (rewritten), a log shorter than the chain head or an anchor says (truncated),
    a head that does not describe the last row, and an anchored position holding another hash.
    After a finding the check goes on from the row found, so later damage is reported too.

    ``anchors``: signed heads whose signatures the caller verified (see ``compliance``); they catch
    what the chain alone cannot: deleting the last rows together with rolling the head back, or
    rewriting the tail with recomputed hashes. A redacted event (erasure, retention) is checked
    without its body, by its stored body digest, and counted in ``redacted``. ``progress(checked)`` is called after each chunk.
    Reads a raw cursor in keyset chunks of ``chunk_size`` rows: memory use is O(chunk_size).
    """
    findings: list[Finding] = []
    first_id: int | None = None

    def found(kind: FindingKind, seq: int | None, message: str, row_id: int | None = None) -> None:
        nonlocal first_id
        if not findings:
            first_id = row_id
        if len(findings) < max_findings:
            findings.append(Finding(kind, seq, message))

    wanted = {a.seq: a for a in anchors}
    expected_seq, expected_prev, checked, redacted_count = 1, GENESIS_HASH, 0, 0
    last_seq, last_hash = 0, GENESIS_HASH
    query = f"SELECT {_COLUMNS} FROM {Event._meta.db_table} WHERE seq > %s ORDER BY seq LIMIT %s"
    while True:
        with connection.cursor() as cursor:
            cursor.execute(query, [last_seq, chunk_size])
            rows = cursor.fetchall()
        for (
            row_id,
            seq,
            session_id,
            execution_id,
            agent_id,
            actor,
            role,
            kind,
            content,
            payload_json,
            occurred_at,
            recorded_at,
            version,
            salt,
            digest,
            prev_hash,
            stored_hash,
            redacted,
        ) in rows:
            redacted_count += redacted
            if version == 1 and redacted:
                # format 1 hashed the content itself, so a redacted format-1 row cannot be
                # recomputed: its links (prev_hash here, and its successor's) are still checked
                body_ok, computed = True, stored_hash
            elif version == 1:
                # format 1 hashed Python's own rendering of the row: recompute it from the model
                legacy = Event.objects.defer("search", "payload_index").get(pk=row_id)
                body_ok, computed = True, legacy.compute_hash()
            else:
                # a redacted row has lost its body for good; the digest it was chained with stays
                body_ok = redacted or (
                    bool(salt)
                    and body_digest(salt=salt, content=content, payload_json=payload_json) == digest
                )
                header = hashed_header(
                    session_id=session_id,
                    execution_id=execution_id,
                    agent_id=agent_id,
                    actor=actor,
                    role=role,
                    kind=kind,
                    occurred_at=occurred_at,
                    recorded_at=recorded_at,
                )
                computed = chain_hash(seq=seq, prev_hash=prev_hash, header=header, digest=digest)
            if not body_ok:
                found(
                    FindingKind.CONTENT_ALTERED,
                    seq,
                    f"event #{seq}: content altered: the content does not match its hash (its body digest)",
                    row_id,
                )
            if seq > expected_seq:
                missing = f"#{expected_seq}" if seq == expected_seq + 1 else f"#{expected_seq}-#{seq - 1}"
                found(FindingKind.GAP, seq, f"events {missing} were deleted (a gap before #{seq})", row_id)
            elif prev_hash != expected_prev:
                owner = _owner_of(prev_hash)
                if owner is not None and owner + 1 != seq and version != 1:
                    header_there = chain_hash(
                        seq=owner + 1, prev_hash=prev_hash, header=header, digest=digest
                    )
                    where = f"; its hash verifies at #{owner + 1}" if header_there == stored_hash else ""
                    found(
                        FindingKind.REORDERED,
                        seq,
                        f"events were reordered: #{seq} was chained after #{owner}{where}",
                        row_id,
                    )
                elif computed == stored_hash and seq > 1:
                    found(
                        FindingKind.REWRITTEN,
                        seq - 1,
                        f"event #{seq - 1} was rewritten after #{seq} was chained to it "
                        f"(its hash is not the one #{seq} links to)",
                        row_id,
                    )
                else:
                    found(
                        FindingKind.FIELDS_ALTERED,
                        seq,
                        f"event #{seq}: its link to the previous event (prev_hash) was altered",
                        row_id,
                    )
            elif computed != stored_hash and body_ok:
                found(
                    FindingKind.FIELDS_ALTERED,
                    seq,
                    f"event #{seq}: its hashed fields (session, agent, actor, role, kind, times or "
                    "body digest) were altered",
                    row_id,
                )
            anchor = wanted.get(seq)
            if anchor is not None and anchor.hash != stored_hash:
                found(
                    FindingKind.ANCHOR_MISMATCH,
                    seq,
                    f"event #{seq} is not the one anchored at {anchor.anchored_at}: the chain was "
                    "rewritten from there on",
                    row_id,
                )
            expected_seq, expected_prev, checked = seq + 1, stored_hash, checked + 1
            last_seq, last_hash = seq, stored_hash
        if progress is not None:
            progress(checked)
        if len(rows) < chunk_size:
            break

    head = ChainHead.objects.get(pk=1)
    if head.last_seq > last_seq:
        found(
            FindingKind.TRUNCATED,
            last_seq + 1,
            f"the last events were deleted: the chain head says #{head.last_seq}, the log ends at #{last_seq}",
        )
    elif head.last_seq != last_seq or head.last_hash != last_hash:
        found(
            FindingKind.HEAD_MISMATCH,
            head.last_seq,
            f"the chain head (#{head.last_seq}) does not describe the last event (#{last_seq}): "
            "the head was rolled back or the last event rewritten",
        )
    beyond = [a for a in anchors if a.seq > last_seq]
    if beyond:
        top = max(beyond, key=lambda a: a.seq)
        found(
            FindingKind.TRUNCATED,
            last_seq + 1,
            f"the last events were deleted: an anchor signed at {top.anchored_at} says #{top.seq} "
            f"existed, the log ends at #{last_seq}",
        )
    if findings:
        first = findings[0]
        return ChainReport(
            False,
            checked,
            first.seq,
            first_id,
            first.message,
            tuple(findings),
            last_seq,
            last_hash,
            redacted_count,
        )
    return ChainReport(True, checked, last_seq=last_seq, last_hash=last_hash, redacted=redacted_count)
