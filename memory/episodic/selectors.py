"""Reads of the episodic log: filtered listings and chain verification."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple

from django.contrib.postgres.search import SearchQuery
from django.db import connection
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from agents.models import Agent
from agents.subjects import subject_asked, subject_filter_q, subject_visible_q

from .models import (
    GENESIS_HASH,
    ISO_SQL,
    REDACTION_ACTION,
    ChainHead,
    Event,
    EventKind,
    body_digest,
    chain_hash,
    hashed_header,
    runs_hold,
)


def event_list(
    *,
    agent: Agent,
    data_subject: str | None = None,
    session_id: str | None = None,
    execution_id: str | None = None,
    agent_name: str | None = None,
    kinds: list[str] | None = None,
    occurred_from: datetime | None = None,
    occurred_to: datetime | None = None,
    q: str | None = None,
) -> QuerySet[Event]:
    """Events of the current tenant ``agent`` may read (all of them, or for an agent acting for one
    end user its subject's and those naming none: ``agents.subjects``) matching every given filter,
    oldest first.

    ``data_subject``: only that end user's events (``SubjectRefused``, 403, when ``agent`` acts for
    another); ``occurred_from`` is inclusive, ``occurred_to`` exclusive; ``q`` is a web-search style
    full-text query (PostgreSQL ``websearch_to_tsquery``, English stemming).
    """
    subject = subject_asked(agent, data_subject)
    qs = (
        Event.objects.select_related("agent")
        .defer("search", "payload_index")
        .filter(subject_visible_q(agent) & subject_filter_q(subject))
    )
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


def session_tail(*, agent: Agent, session_id: str, last: int) -> SessionTail:
    """The session's ``last`` latest events ``agent`` may read (``agents.subjects``: for an agent acting
    for one end user, its subject's and those naming none) and the session's event count,
    in one query: the count is an uncorrelated subquery PostgreSQL runs once, an index-only scan of
    ``event_session_idx``, and the rows a backward scan of the same index that stops after ``last``
    (EXPLAIN ANALYZE at 570 events: 0.1 ms for the count, 0.2 ms in all). A session without events
    gives no row, so its count is 0 without asking."""
    # count(*), not count(id): the index holds no id, and only a count of rows stays index-only
    count = RawSQL(f"SELECT count(*) FROM {Event._meta.db_table} WHERE session_id = %s", [session_id])
    rows = list(
        Event.objects.select_related("agent")
        .filter(subject_visible_q(agent), session_id=session_id)
        .only("id", "seq", "occurred_at", "kind", "role", "content", "agent__name")
        .annotate(session_events=count)
        .order_by("-occurred_at", "-seq")[:last]
    )
    total = rows[0].session_events if rows else 0
    events = rows[::-1]
    return SessionTail(events, total)


class FindingKind(StrEnum):
    """What a broken link of the chain is, as ``chain_verify`` names it."""

    # the body (content and payload, which one digest covers together) no longer matches its digest
    CONTENT_ALTERED = "content_altered"
    FIELDS_ALTERED = "fields_altered"  # a hashed field (session, agent, actor, kind, times...) changed
    GAP = "gap"  # rows missing in the middle: deleted
    REORDERED = "reordered"  # a row sits at another position than the one it was chained at
    REWRITTEN = "rewritten"  # a row whose hash was recomputed after its successor was chained to it
    TRUNCATED = "truncated"  # the last rows are gone: the chain head or an anchor says more existed
    HEAD_MISMATCH = "head_mismatch"  # the chain head row does not describe the last row
    ANCHOR_MISMATCH = "anchor_mismatch"  # the row at an anchored position is not the one anchored
    ANCHOR_SIGNATURE = "anchor_signature"  # an anchor whose signature does not verify (compliance)
    # a redacted event that no redaction decision later in the chain names
    REDACTION_UNDECIDED = "redaction_undecided"
    # a redacted event whose decision does not carry a valid seal (compliance: the signature)
    REDACTION_UNSIGNED = "redaction_unsigned"


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
class Segment:
    """Rows ``first`` to ``last`` of the chain to verify (``last`` ``None``: to the end of the log),
    the first linked to ``prev_hash`` (``None``: the hash stored in the row before ``first``, as
    found). A bounded segment also verifies the row after ``last``, so a row deleted at its end is
    a gap it finds, not one that falls between two segments."""

    first: int = 1
    last: int | None = None
    prev_hash: str | None = GENESIS_HASH


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


# Checks a redaction decision's seal: given its seq, actor and payload (parsed), the problem found
# (a sentence), or None when the seal holds.
SealCheck = Callable[[int, str, dict[str, Any]], str | None]

_COLUMNS = (
    "id, seq, session_id, execution_id, agent_id, actor, role, kind, content, payload_json, "
    f"{ISO_SQL.format('occurred_at')}, {ISO_SQL.format('recorded_at')}, "
    "hash_version, body_salt, body_digest, prev_hash, hash, redacted_at IS NOT NULL, redacted_by"
)
_TABLE = Event._meta.db_table


def _owner_of(hash_value: str) -> int | None:
    """The ``seq`` of the row whose hash is ``hash_value`` (unique index), or None."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT seq FROM {_TABLE} WHERE hash = %s", [hash_value])
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def _last_row() -> tuple[int, str]:
    """The seq and hash of the last row of the log (``0`` and the genesis hash when it is empty)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT seq, hash FROM {_TABLE} ORDER BY seq DESC LIMIT 1")
        row = cursor.fetchone()
    return (0, GENESIS_HASH) if row is None else (int(row[0]), str(row[1]))


def _stored_hash(seq: int) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT hash FROM {_TABLE} WHERE seq = %s", [seq])
        row = cursor.fetchone()
    return None if row is None else str(row[0])


class _Scan:
    """The state of one ``chain_verify``: findings so far, and the redacted events whose decision
    (``redacted_by``, always later in the chain) is still to be read, as runs of seqs per decision."""

    def __init__(self, *, anchors: Sequence[TrustedAnchor], max_findings: int, seal: SealCheck | None):
        self.findings: list[Finding] = []
        self.first_id: int | None = None
        self.max_findings = max_findings
        self.wanted = {a.seq: a for a in anchors}
        self.seal = seal
        self.pending: dict[int, list[list[int]]] = {}
        self.checked = self.redacted = 0

    def found(self, kind: FindingKind, seq: int | None, message: str, row_id: int | None = None) -> None:
        if not self.findings:
            self.first_id = row_id
        if len(self.findings) < self.max_findings:
            self.findings.append(Finding(kind, seq, message))

    def redaction_seen(self, seq: int, decided_by: int | None, row_id: int) -> None:
        """A redacted event: it must point at a decision later in the chain (read when reached)."""
        if decided_by is None or decided_by <= seq:
            self.found(
                FindingKind.REDACTION_UNDECIDED,
                seq,
                f"event #{seq} was redacted (its content, payload and salt removed) and no decision "
                "names it: no erasure or retention decided it",
                row_id,
            )
            return
        runs = self.pending.setdefault(decided_by, [])
        if runs and runs[-1][1] == seq - 1:
            runs[-1][1] = seq
        else:
            runs.append([seq, seq])

    def decision_reached(
        self, seq: int, kind: str, actor: str, payload_json: str, body_ok: bool, redacted: bool
    ) -> None:
        """Settle the redactions that point at row ``seq`` against what it says."""
        runs = self.pending.pop(seq, None)
        if runs is None:
            return
        named: list[list[int]] = []
        problem = ""
        payload: dict[str, Any] = {}
        if redacted or not body_ok:
            problem = f"the decision it points at, #{seq}, was itself altered or redacted"
        else:
            try:
                parsed = json.loads(payload_json)
            except ValueError:
                parsed = None
            payload = parsed if isinstance(parsed, dict) else {}
            named = payload.get("redacts")  # type: ignore[assignment]
            if kind != EventKind.DECISION or payload.get("action") != REDACTION_ACTION:
                problem = f"#{seq}, the event it points at, is no redaction decision"
            elif not _well_formed(named):
                problem = f"the decision it points at, #{seq}, names its events unreadably"
                named = []
        sealed: str | None = None
        for lo, hi in runs:
            for redacted_seq in range(lo, hi + 1):
                if len(self.findings) >= self.max_findings:
                    return
                if problem:
                    self.found(
                        FindingKind.REDACTION_UNDECIDED,
                        redacted_seq,
                        f"event #{redacted_seq} was redacted, but {problem}",
                    )
                elif not runs_hold(named, redacted_seq):
                    self.found(
                        FindingKind.REDACTION_UNDECIDED,
                        redacted_seq,
                        f"event #{redacted_seq} was redacted, but the decision it points at, #{seq}, "
                        "does not name it",
                    )
                elif self.seal is not None:
                    if sealed is None:
                        sealed = self.seal(seq, actor, payload) or ""
                    if sealed:
                        self.found(
                            FindingKind.REDACTION_UNSIGNED,
                            redacted_seq,
                            f"event #{redacted_seq} was redacted by decision #{seq}, which {sealed}",
                        )

    def settle_rest(self) -> None:
        """The decisions still pending lie outside the rows scanned: read them (and check their body
        digest, as the scan would)."""
        if not self.pending:
            return
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT seq, kind, actor, content, payload_json, hash_version, body_salt, body_digest, "
                f"redacted_at IS NOT NULL FROM {_TABLE} WHERE seq = ANY(%s)",
                [sorted(self.pending)],
            )
            rows = cursor.fetchall()
        for seq, kind, actor, content, payload_json, version, salt, digest, redacted in rows:
            body_ok = (
                version != 1
                and bool(salt)
                and body_digest(salt=salt, content=content, payload_json=payload_json) == digest
            )
            self.decision_reached(seq, kind, actor, payload_json, body_ok, redacted)
        for seq in sorted(self.pending):  # pointing at no row at all
            for lo, hi in self.pending.pop(seq):
                for redacted_seq in range(lo, hi + 1):
                    self.found(
                        FindingKind.REDACTION_UNDECIDED,
                        redacted_seq,
                        f"event #{redacted_seq} was redacted, but #{seq}, the decision it points at, "
                        "does not exist",
                    )

    def report(self, last_seq: int, last_hash: str) -> ChainReport:
        """The outcome, the log's last row being ``last_seq`` with ``last_hash``."""
        if not self.findings:
            return ChainReport(
                True, self.checked, last_seq=last_seq, last_hash=last_hash, redacted=self.redacted
            )
        first = self.findings[0]
        return ChainReport(
            False,
            self.checked,
            first.seq,
            self.first_id,
            first.message,
            tuple(self.findings),
            last_seq,
            last_hash,
            self.redacted,
        )


def _well_formed(runs: object) -> bool:
    """Whether ``runs`` is ``[[first, last], ...]`` of integers, sorted and disjoint."""
    if not isinstance(runs, list):
        return False
    previous = 0
    for run in runs:
        if not (
            isinstance(run, list)
            and len(run) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in run)
            and previous < run[0] <= run[1]
        ):
            return False
        previous = run[1]
    return True


def chain_verify(
    *,
    chunk_size: int = 10_000,
    anchors: Sequence[TrustedAnchor] = (),
    progress: Callable[[int], None] | None = None,
    max_findings: int = 100,
    segments: Sequence[Segment] = (Segment(),),
    seal: SealCheck | None = None,
) -> ChainReport:
    """Recompute the hashes of the current tenant's chain in ``seq`` order, and name what is wrong.

    ``segments``: the rows to verify, in order (default: all of them, from the genesis hash); the
    last one should run to the end of the log, which the chain head and the anchors are then held
    against. Each row is checked in its own chain format. Findings (``FindingKind``): a body that no
    longer matches its digest (content or payload altered), fields that no longer match the hash
    (fields altered), a gap in ``seq`` (rows deleted), a row chained at another position (reordered:
    its ``prev_hash`` is the hash of a row elsewhere and its hash verifies at that position), a
    predecessor whose hash was recomputed (rewritten), a log shorter than the chain head or an
    anchor says (truncated), a head that does not describe the last row, and an anchored position
    holding another hash. After a finding the check goes on from the row found, so later damage is
    reported too.

    Redactions: a redacted event (erasure, retention) is checked without its body, by its stored
    body digest, counted in ``redacted``, and must be accounted for: it points (``redacted_by``) at
    a decision later in the chain, intact, whose payload names it (``REDACTION_ACTION``); else it is
    ``redaction_undecided``. ``seal`` (the compliance app's signature check) is asked about each
    decision that accounts for a redaction; what it finds makes the events ``redaction_unsigned``.

    ``anchors``: signed heads whose signatures the caller verified (see ``compliance``); they catch
    what the chain alone cannot: deleting the last rows together with rolling the head back, or
    rewriting the tail with recomputed hashes. ``progress(checked)`` is called after each chunk.
    Reads a raw cursor in keyset chunks of ``chunk_size`` rows: memory use is O(chunk_size), plus
    the runs of redacted events whose decision is not reached yet.
    """
    scan = _Scan(anchors=anchors, max_findings=max_findings, seal=seal)
    last_seq, last_hash, to_end = 0, GENESIS_HASH, False
    for segment in segments:
        expected_prev = segment.prev_hash
        if expected_prev is None:
            expected_prev = _stored_hash(segment.first - 1) if segment.first > 1 else GENESIS_HASH
        stop = None if segment.last is None else segment.last + 1
        rows_before = scan.checked
        last_seq, last_hash = _scan_segment(
            scan, segment.first, stop, expected_prev, chunk_size=chunk_size, progress=progress
        )
        to_end = segment.last is None
        if to_end and scan.checked == rows_before and segment.first > 1:
            # no row from ``first`` on: the head and the anchors are held against the last row
            # there is, not the one the segment was linked to (it may be gone)
            last_seq, last_hash = _last_row()
    scan.settle_rest()

    if to_end:
        _check_end(scan, last_seq, last_hash, anchors)
    return scan.report(last_seq, last_hash)


def _check_end(scan: _Scan, last_seq: int, last_hash: str, anchors: Sequence[TrustedAnchor]) -> None:
    """Hold the last row of the log (``last_seq``, ``last_hash``) against the chain head and the
    anchors: fewer rows than either says is a truncation; a head that does not describe it, a
    mismatch."""
    head = ChainHead.objects.get(pk=1)
    if head.last_seq > last_seq:
        scan.found(
            FindingKind.TRUNCATED,
            last_seq + 1,
            f"the last events were deleted: the chain head says #{head.last_seq}, the log ends at #{last_seq}",
        )
    elif head.last_seq != last_seq or head.last_hash != last_hash:
        scan.found(
            FindingKind.HEAD_MISMATCH,
            head.last_seq,
            f"the chain head (#{head.last_seq}) does not describe the last event (#{last_seq}): "
            "the head was rolled back or the last event rewritten",
        )
    beyond = [a for a in anchors if a.seq > last_seq]
    if beyond:
        top = max(beyond, key=lambda a: a.seq)
        scan.found(
            FindingKind.TRUNCATED,
            last_seq + 1,
            f"the last events were deleted: an anchor signed at {top.anchored_at} says #{top.seq} "
            f"existed, the log ends at #{last_seq}",
        )


class _Row(NamedTuple):
    """A row of the log as ``_COLUMNS`` reads it (times as ISO 8601 text, as hashed)."""

    id: int
    seq: int
    session_id: str
    execution_id: str | None
    agent_id: int
    actor: str
    role: str
    kind: str
    content: str
    payload_json: str
    occurred_at: str
    recorded_at: str
    version: int
    salt: str
    digest: str
    prev_hash: str
    hash: str
    redacted: bool
    redacted_by: int | None


def _scan_segment(
    scan: _Scan,
    first: int,
    stop: int | None,
    expected_prev: str | None,
    *,
    chunk_size: int,
    progress: Callable[[int], None] | None,
) -> tuple[int, str]:
    """Verify the rows ``first`` to ``stop`` (inclusive; ``None``: to the end) into ``scan``, the first
    linked to ``expected_prev`` (``None``: not checked, its predecessor being gone). Returns the
    last row found (its seq and hash; ``first - 1`` and ``expected_prev`` when there is none)."""
    expected_seq = first
    last_seq, last_hash = first - 1, expected_prev or GENESIS_HASH
    # the scan's counters and maps as locals in the loop: it runs once per row (1M rows: seconds)
    wanted, pending = scan.wanted, scan.pending
    checked, redacted_count = scan.checked, scan.redacted
    bound = "" if stop is None else " AND seq <= %s"
    query = f"SELECT {_COLUMNS} FROM {_TABLE} WHERE seq > %s{bound} ORDER BY seq LIMIT %s"
    while True:
        params: list[Any] = [last_seq] + ([] if stop is None else [stop]) + [chunk_size]
        with connection.cursor() as cursor:
            cursor.execute(query, params)
            rows = cursor.fetchall()
        for row in map(_Row._make, rows):
            seq, stored_hash = row.seq, row.hash
            redacted_count += row.redacted
            body_ok, computed, header = _recompute(row)
            if not body_ok:
                scan.found(
                    FindingKind.CONTENT_ALTERED,
                    seq,
                    f"event #{seq}: content or payload altered: the content does not match its hash "
                    "(its body digest), or the payload does not (one digest covers both)",
                    row.id,
                )
            _check_link(
                scan, row, expected_seq, expected_prev, computed=computed, header=header, body_ok=body_ok
            )
            anchor = wanted.get(seq)
            if anchor is not None and anchor.hash != stored_hash:
                scan.found(
                    FindingKind.ANCHOR_MISMATCH,
                    seq,
                    f"event #{seq} is not the one anchored at {anchor.anchored_at}: the chain was "
                    "rewritten from there on",
                    row.id,
                )
            if row.redacted:
                scan.redaction_seen(seq, row.redacted_by, row.id)
            if seq in pending:
                scan.decision_reached(seq, row.kind, row.actor, row.payload_json, body_ok, row.redacted)
            expected_seq, expected_prev = seq + 1, stored_hash
            checked += 1
            last_seq, last_hash = seq, stored_hash
        scan.checked, scan.redacted = checked, redacted_count
        if progress is not None:
            progress(checked)
        if len(rows) < chunk_size:
            break
    return last_seq, last_hash


def _recompute(row: _Row) -> tuple[bool, str, dict[str, Any] | None]:
    """Whether ``row``'s body matches its digest, the hash the row should have by its chain format,
    and (format 2) the hashed header it was computed from."""
    if row.version == 1 and row.redacted:
        # format 1 hashed the content itself, so a redacted format-1 row cannot be
        # recomputed: its links (prev_hash here, and its successor's) are still checked
        return True, row.hash, None
    if row.version == 1:
        # format 1 hashed Python's own rendering of the row: recompute it from the model
        legacy = Event.objects.defer("search", "payload_index").get(pk=row.id)
        return True, legacy.compute_hash(), None
    # a redacted row has lost its body for good; the digest it was chained with stays
    body_ok = row.redacted or (
        bool(row.salt)
        and body_digest(salt=row.salt, content=row.content, payload_json=row.payload_json) == row.digest
    )
    header = hashed_header(
        session_id=row.session_id,
        execution_id=row.execution_id,
        agent_id=row.agent_id,
        actor=row.actor,
        role=row.role,
        kind=row.kind,
        occurred_at=row.occurred_at,
        recorded_at=row.recorded_at,
    )
    return body_ok, chain_hash(seq=row.seq, prev_hash=row.prev_hash, header=header, digest=row.digest), header


def _check_link(
    scan: _Scan,
    row: _Row,
    expected_seq: int,
    expected_prev: str | None,
    *,
    computed: str,
    header: dict[str, Any] | None,
    body_ok: bool,
) -> None:
    """Whether ``row`` sits where it was chained: right after ``expected_seq - 1`` (else a gap),
    linked to ``expected_prev`` (else reordered, its predecessor rewritten, or its link altered) and
    with the hash its fields give (``computed``; else its fields were altered)."""
    seq = row.seq
    if seq > expected_seq:
        missing = f"#{expected_seq}" if seq == expected_seq + 1 else f"#{expected_seq}-#{seq - 1}"
        scan.found(FindingKind.GAP, seq, f"events {missing} were deleted (a gap before #{seq})", row.id)
    elif expected_prev is not None and row.prev_hash != expected_prev:
        owner = _owner_of(row.prev_hash)
        if owner is not None and owner + 1 != seq and header is not None:
            there = chain_hash(seq=owner + 1, prev_hash=row.prev_hash, header=header, digest=row.digest)
            where = f"; its hash verifies at #{owner + 1}" if there == row.hash else ""
            scan.found(
                FindingKind.REORDERED,
                seq,
                f"events were reordered: #{seq} was chained after #{owner}{where}",
                row.id,
            )
        elif computed == row.hash and seq > 1:
            scan.found(
                FindingKind.REWRITTEN,
                seq - 1,
                f"event #{seq - 1} was rewritten after #{seq} was chained to it "
                f"(its hash is not the one #{seq} links to)",
                row.id,
            )
        else:
            scan.found(
                FindingKind.FIELDS_ALTERED,
                seq,
                f"event #{seq}: its link to the previous event (prev_hash) was altered",
                row.id,
            )
    elif computed != row.hash and body_ok:
        scan.found(
            FindingKind.FIELDS_ALTERED,
            seq,
            f"event #{seq}: its hashed fields (session, agent, actor, role, kind, times or "
            "body digest) were altered",
            row.id,
        )
