"""The export archive: part of the trail, the objects it touched, a manifest and its signature.

One uncompressed tar (``tar xf`` opens it) holding::

    manifest.json          RFC 8785 JSON: format, tenant, scope, who, when, counts, the chain range,
                           the anchors in it, and for every other file its SHA-256, bytes and lines
    manifest.sig           the Ed25519 signature (hex) of manifest.json's exact bytes
    public_key.pem         the signing key's public half (check it against the admin's download)
    events.jsonl           the events in scope, one RFC 8785 object per line, in seq order, with
                           everything their hash covers: content, payload_json, body_salt, body_digest
    chain.jsonl            every other event of the chain range without content (header fields and
                           body digest): the links between the events in scope can be recomputed
    anchors.jsonl          the signed anchors inside the chain range
    objects/*.jsonl        agents, memories, facts (with provenance) and checkpoints the events touched

The chain range starts at the last anchor at or before the first event in scope (or at the
genesis) and ends at the first anchor at or after the last one (or at the last event in scope), so
an offline verifier (``compliance.verify_export``) recomputes every hash from a signed anchor (or
the genesis) to a signed anchor. Events are read in keyset chunks and written as they come: memory
use does not grow with the number of events.
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import rfc8785
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from agents.models import Agent
from core.canonical_json import canonical_flat
from core.tenancy import current_schema
from memory.checkpoints.models import Checkpoint
from memory.checkpoints.selectors import channels_of, with_channels
from memory.episodic.models import GENESIS_HASH, ISO_SQL, Event
from memory.knowledge.models import Fact, FactProvenance
from memory.semantic.models import MemoryType, SemanticMemory

from . import signing
from .models import Anchor, Export, ScopeKind

FORMAT = "engram-export/1"
CHUNK = 5000
EVENT_TABLE = Event._meta.db_table

# Times as the chain hashes them, written by PostgreSQL (``ISO_SQL``). The offline verifier
# recomputes every hash from these strings, so a difference from the chain's form could not go
# unnoticed (tests/compliance/test_exports.py).
_OCCURRED, _RECORDED = ISO_SQL.format("e.occurred_at"), ISO_SQL.format("e.recorded_at")

_EVENT_COLUMNS = (
    "e.id, e.seq, e.hash, e.prev_hash, e.hash_version, e.session_id, e.execution_id, e.agent_id, "
    f"e.actor, e.role, e.kind, {_OCCURRED}, {_RECORDED}, e.content, e.payload_json, "
    "e.body_salt, e.body_digest, e.redacted_at IS NOT NULL"
)
_CHAIN_COLUMNS = (
    "e.seq, e.hash, e.prev_hash, e.hash_version, e.session_id, e.execution_id, e.agent_id, e.actor, "
    f"e.role, e.kind, {_OCCURRED}, {_RECORDED}, e.body_digest"
)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat(timespec="microseconds")


def scope_where(export: Export) -> tuple[str, list[Any]]:
    """The SQL condition (on ``memory_event e``) and parameters selecting the export's events."""
    clauses: list[str] = []
    params: list[Any] = []
    if export.scope == ScopeKind.SESSION:
        clauses.append("e.session_id = %s")
        params.append(export.session_id)
    elif export.scope == ScopeKind.AGENT:
        clauses.append("e.agent_id = (SELECT id FROM agents_agent WHERE name = %s)")
        params.append(export.agent_name)
    if export.occurred_from is not None:
        clauses.append("e.occurred_at >= %s")
        params.append(export.occurred_from)
    if export.occurred_to is not None:
        clauses.append("e.occurred_at < %s")
        params.append(export.occurred_to)
    return (" AND ".join(clauses) or "TRUE"), params


class _TarWriter:
    """A tar archive (GNU format, what ``tarfile`` and ``tar`` read) written member by member
    straight into ``raw`` (opened ``"w+b"``): each member's content streams in with a placeholder
    header, which is filled in with the size once the member is complete. Nothing is staged in
    temporary files, so a 1M-event archive is written once, not written and copied."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.mtime = int(timezone.now().timestamp())

    def member(self, name: str) -> _Member:
        return _Member(self, name)

    def close(self) -> None:
        """Two zero blocks end the archive, padded to tar's 10 KiB record like ``tarfile`` does."""
        self.raw.write(b"\0" * (2 * tarfile.BLOCKSIZE))
        remainder = self.raw.tell() % tarfile.RECORDSIZE
        if remainder:
            self.raw.write(b"\0" * (tarfile.RECORDSIZE - remainder))


class _Member:
    """One file of a ``_TarWriter``; a context manager giving the ``_HashingWriter`` to write it."""

    def __init__(self, tar: _TarWriter, name: str) -> None:
        self.tar, self.name = tar, name

    def __enter__(self) -> _HashingWriter:
        self.header_at = self.tar.raw.tell()
        self.tar.raw.write(b"\0" * tarfile.BLOCKSIZE)
        self.out = _HashingWriter(self.tar.raw)
        return self.out

    def __exit__(self, *exc: object) -> None:
        raw, size = self.tar.raw, self.out.size
        if size % tarfile.BLOCKSIZE:
            raw.write(b"\0" * (tarfile.BLOCKSIZE - size % tarfile.BLOCKSIZE))
        end = raw.tell()
        info = tarfile.TarInfo(self.name)
        info.size, info.mtime, info.mode = size, self.tar.mtime, 0o644
        header = info.tobuf(format=tarfile.GNU_FORMAT)
        if len(header) != tarfile.BLOCKSIZE:  # names are short and fixed here; a long one needs more
            raise ValueError(f"tar member name too long: {self.name}")
        raw.seek(self.header_at)
        raw.write(header)
        raw.seek(end)


class _HashingWriter:
    """A binary file that hashes (SHA-256) and counts what is written to it."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0
        self.lines = 0

    def write(self, data: bytes) -> int:
        self.handle.write(data)
        self.digest.update(data)
        self.size += len(data)
        self.lines += data.count(b"\n")
        return len(data)

    def line(self, data: bytes) -> None:
        self.write(data + b"\n")

    def tell(self) -> int:
        return self.size

    def summary(self) -> dict[str, Any]:
        return {"sha256": self.digest.hexdigest(), "bytes": self.size, "lines": self.lines}


@dataclass
class _Touched:
    """What the events in scope refer to (ids), gathered while they stream past."""

    agents: set[int] = field(default_factory=set)
    memories: set[str] = field(default_factory=set)
    facts: set[int] = field(default_factory=set)

    def note(self, kind: str, agent_id: int, payload_json: str) -> None:
        self.agents.add(agent_id)
        if kind != "decision":
            return
        payload = json.loads(payload_json)
        if isinstance(payload.get("memory_id"), str):
            self.memories.add(payload["memory_id"])
        for name in ("fact_id", "existing_fact", "new_fact"):
            if isinstance(payload.get(name), int):
                self.facts.add(payload[name])


@dataclass(frozen=True)
class ArchiveResult:
    """The archive written: where, its SHA-256 (hex) and size (bytes), the events in scope, the
    chain range and the manifest."""

    path: Path
    sha256: str
    size: int
    events: int
    first_seq: int | None
    last_seq: int | None
    manifest: dict[str, Any]


def _stream(sql: str, params: list[Any], key_index: int = 1) -> Iterator[tuple[Any, ...]]:
    """Rows of ``sql`` (which must end ``AND <seq column> > %s ORDER BY <seq> LIMIT %s``) in keyset
    chunks of ``CHUNK``; ``key_index`` is the position of the seq column in each row."""
    last = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, last, CHUNK])
            rows = cursor.fetchall()
        yield from rows
        if len(rows) < CHUNK:
            return
        last = rows[-1][key_index]


def _scope_bounds(where: str, params: list[Any], end_seq: int) -> tuple[int, int, int] | None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT min(e.seq), max(e.seq), count(*) FROM {EVENT_TABLE} e WHERE {where} AND e.seq <= %s",
            [*params, end_seq],
        )
        low, high, count = cursor.fetchone()
    return None if low is None else (int(low), int(high), int(count))


def _object_filters(export: Export, touched: _Touched) -> tuple[Q, Q, Q]:
    """The memories, facts and checkpoints the export holds (a ``Q`` each): those of its session,
    its agent or its time window, and those its events touched."""
    scope = export.scope
    agent = Agent.objects.filter(name=export.agent_name).first() if scope == ScopeKind.AGENT else None
    window = Q()
    if export.occurred_from is not None:
        window &= Q(created_at__gte=export.occurred_from)
    if export.occurred_to is not None:
        window &= Q(created_at__lt=export.occurred_to)

    if scope == ScopeKind.ALL and export.occurred_from is None and export.occurred_to is None:
        memories, facts, checkpoints = Q(), Q(), Q()
    elif scope == ScopeKind.SESSION:
        memories = Q(session_id=export.session_id) | Q(pk__in=touched.memories)
        facts = (
            Q(session_id=export.session_id)
            | Q(pk__in=touched.facts)
            | Q(pk__in=FactProvenance.objects.filter(session_id=export.session_id).values("fact_id"))
        )
        checkpoints = Q(session_id=export.session_id)
    elif scope == ScopeKind.AGENT:
        memories = (Q(agent=agent) & window) | Q(pk__in=touched.memories)
        facts = Q(agent=agent) | Q(pk__in=touched.facts)
        checkpoints = Q(agent=agent) & window
    else:
        memories = window | Q(pk__in=touched.memories)
        fact_window = Q()
        if export.occurred_from is not None:
            fact_window &= Q(recorded_at__gte=export.occurred_from)
        if export.occurred_to is not None:
            fact_window &= Q(recorded_at__lt=export.occurred_to)
        facts = fact_window | Q(pk__in=touched.facts)
        checkpoints = window
    return memories, facts, checkpoints


def _agent_lines(agent_ids: set[int]) -> Iterator[bytes]:
    for a in Agent.objects.filter(pk__in=agent_ids).order_by("pk").iterator(chunk_size=2000):
        yield rfc8785.dumps(
            {
                "id": a.pk,
                "name": a.name,
                "role": a.role,
                "is_active": a.is_active,
                "created_at": _iso(a.created_at),
            }
        )


def _memory_lines(memories: Q) -> Iterator[bytes]:
    rows = (
        SemanticMemory.objects.filter(memories)
        # the store's linked rows copy its items' text: the trail holds the items' changes
        .exclude(memory_type=MemoryType.STORE)
        .select_related("agent", "forgotten_by")
        .defer("embedding", "search")
    )
    for m in rows.order_by("created_at", "pk").iterator(chunk_size=2000):
        yield rfc8785.dumps(
            {
                "id": str(m.pk),
                "agent": m.agent.name,
                "scope": m.scope,
                "memory_type": m.memory_type,
                "session_id": m.session_id,
                "tags": list(m.tags),
                "content": m.content,
                "metadata": m.metadata,
                "importance": m.importance,
                "confidence": m.confidence,
                "embedding_model": m.embedding_model,
                "created_at": _iso(m.created_at),
                "forgotten_at": _iso(m.forgotten_at),
                "forgotten_by": m.forgotten_by.name if m.forgotten_by else None,
            }
        )


def _fact_lines(facts: Q) -> Iterator[bytes]:
    rows = Fact.objects.filter(facts).select_related("subject", "predicate", "object_entity", "agent")
    for f in rows.order_by("pk").iterator(chunk_size=2000):
        provenance = [
            {
                "agent": p.agent.name,
                "session_id": p.session_id,
                "source_event_seq": p.source_event.seq if p.source_event else None,
                "confidence": p.confidence,
                "asserted_at": _iso(p.asserted_at),
            }
            for p in f.provenance.select_related("agent", "source_event").defer("source_event__search")
        ]
        yield rfc8785.dumps(
            {
                "id": f.pk,
                "subject": f.subject.name,
                "predicate": f.predicate.name,
                "object_entity": f.object_entity.name if f.object_entity else None,
                "literal_type": f.literal_type,
                "literal_value": f.literal_value,
                "status": f.status,
                "confidence": f.confidence,
                "valid_from": _iso(f.valid_from),
                "valid_to": _iso(f.valid_to),
                "recorded_at": _iso(f.recorded_at),
                "agent": f.agent.name,
                "session_id": f.session_id,
                "provenance": provenance,
            }
        )


def _checkpoint_lines(checkpoints: Q) -> Iterator[bytes]:
    """Each checkpoint's document and fingerprint; with its channel values (``channels``) when it
    names any (one saved whole has them inside ``serialized``)."""
    rows = with_channels(Checkpoint.objects.filter(checkpoints).select_related("agent"))
    for c in rows.order_by("session_id", "agent_id", "step_index").iterator(chunk_size=500):
        document = c.document(channels=channels_of(c))
        yield rfc8785.dumps({**document, "fingerprint": c.fingerprint})


def _object_lines(export: Export, touched: _Touched) -> dict[str, Iterator[bytes]]:
    """Per file name, the RFC 8785 lines of the objects the scope touched."""
    memories, facts, checkpoints = _object_filters(export, touched)
    return {
        "objects/agents.jsonl": _agent_lines(touched.agents),
        "objects/memories.jsonl": _memory_lines(memories),
        "objects/facts.jsonl": _fact_lines(facts),
        "objects/checkpoints.jsonl": _checkpoint_lines(checkpoints),
    }


def archive_write(
    export: Export, *, directory: Path, progress: Callable[[int], None] | None = None
) -> ArchiveResult:
    """Write the archive of ``export``'s scope into ``directory`` (see the module docstring) and
    return what was written. ``progress(events written)`` is called after every chunk. Raises
    ``ServiceUnavailable`` without a signing key (nothing is written then)."""
    key_id = signing.key_id()  # refuse before any work when nothing could sign the manifest
    directory.mkdir(parents=True, exist_ok=True)
    tenant = current_schema()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT coalesce(max(seq), 0) FROM {EVENT_TABLE}")
        end_of_log = int(cursor.fetchone()[0])  # appends during the export are not part of it
    where, params = scope_where(export)
    bounds = _scope_bounds(where, params, end_of_log)
    anchors_in = Anchor.objects.none()
    start_seq = end_seq = 0
    start_prev = GENESIS_HASH
    if bounds is not None:
        first, last, _ = bounds
        before = Anchor.objects.filter(seq__lte=first).order_by("-seq").first()
        after = Anchor.objects.filter(seq__gte=last, seq__lte=end_of_log).order_by("seq").first()
        start_seq = before.seq if before else 1
        end_seq = after.seq if after else last
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT prev_hash FROM {EVENT_TABLE} WHERE seq = %s", [start_seq])
            row = cursor.fetchone()
        start_prev = row[0] if row else GENESIS_HASH
        anchors_in = Anchor.objects.filter(seq__gte=start_seq, seq__lte=end_seq).order_by("seq", "pk")

    final = directory / export.filename
    partial = final.with_suffix(".partial")
    try:
        result = _write(
            export,
            partial,
            _Range(where, params, bounds, start_seq, end_seq, start_prev, end_of_log, anchors_in),
            key_id=key_id,
            tenant=tenant,
            progress=progress,
        )
    except BaseException:
        partial.unlink(missing_ok=True)  # no half-written archive is left behind
        raise
    os.replace(partial, final)
    return ArchiveResult(final, *result)


@dataclass(frozen=True)
class _Range:
    """What an export covers: the scope's SQL condition, its (first seq, last seq, count), the chain
    range from ``start_seq`` (whose predecessor's hash is ``start_prev``) to ``end_seq``, the end of
    the log when the export began, and the anchors in the range."""

    where: str
    params: list[Any]
    bounds: tuple[int, int, int] | None
    start_seq: int
    end_seq: int
    start_prev: str
    end_of_log: int
    anchors: Any


def _write(
    export: Export,
    partial: Path,
    span: _Range,
    *,
    key_id: str,
    tenant: str,
    progress: Callable[[int], None] | None,
) -> tuple[str, int, int, int | None, int | None, dict[str, Any]]:
    """The body of ``archive_write``: writes ``partial``; returns (SHA-256, size, events, first
    seq, last seq, manifest)."""
    bounds = span.bounds
    files: dict[str, dict[str, Any]] = {}
    touched = _Touched()
    with open(partial, "w+b", buffering=1024 * 1024) as raw:
        tar = _TarWriter(raw)
        with tar.member("events.jsonl") as out:
            written = _events_write(out, span, touched, progress)
        files["events.jsonl"] = out.summary()
        with tar.member("chain.jsonl") as out:
            _chain_write(out, export, span)
        files["chain.jsonl"] = out.summary()
        with tar.member("anchors.jsonl") as out:
            anchor_seqs = _anchors_write(out, span.anchors)
        files["anchors.jsonl"] = out.summary()

        counts = {"events": written}
        for name, lines in _object_lines(export, touched).items():
            with tar.member(name) as out:
                for line in lines:
                    out.line(line)
            files[name] = out.summary()
            counts[Path(name).stem] = out.lines

        with tar.member("public_key.pem") as out:
            out.write(signing.public_key_pem())
        files["public_key.pem"] = out.summary()

        manifest = _manifest(
            export, span, tenant=tenant, key_id=key_id, counts=counts, anchor_seqs=anchor_seqs, files=files
        )
        manifest_bytes = rfc8785.dumps(manifest)
        with tar.member("manifest.json") as out:
            out.write(manifest_bytes)
        with tar.member("manifest.sig") as out:
            out.write((signing.sign(manifest_bytes) + "\n").encode())
        tar.close()
        sha256, size = _sealed_digest(raw)
    return (sha256, size, written, bounds[0] if bounds else None, bounds[1] if bounds else None, manifest)


def _events_write(
    out: _HashingWriter, span: _Range, touched: _Touched, progress: Callable[[int], None] | None
) -> int:
    """Write the events in scope to ``out`` in seq order (noting in ``touched`` what they refer
    to, calling ``progress`` every ``CHUNK``); returns how many."""
    sql = (
        f"SELECT {_EVENT_COLUMNS} FROM {EVENT_TABLE} e "
        f"WHERE {span.where} AND e.seq <= %s AND e.seq > %s ORDER BY e.seq LIMIT %s"
    )
    # agents are few: their names from one query instead of a join per row
    names = dict(Agent.objects.values_list("pk", "name"))
    written = 0
    for row in _stream(sql, [*span.params, span.end_of_log]):
        doc = _event_doc(row)
        agent_name = names.get(doc["agent_id"])
        if agent_name is None:  # an agent made during the export
            names = dict(Agent.objects.values_list("pk", "name"))
            agent_name = names.get(doc["agent_id"], "")
        doc["agent"] = agent_name
        out.line(canonical_flat(doc))
        touched.note(doc["kind"], doc["agent_id"], doc["payload_json"])
        written += 1
        if progress is not None and written % CHUNK == 0:
            progress(written)
    return written


def _event_doc(row: tuple[Any, ...]) -> dict[str, Any]:
    """One line of events.jsonl: a row of ``_EVENT_COLUMNS``, with everything its hash covers
    (``agent``, the agent's name, left for the caller to fill in)."""
    (row_id, seq, hash_value, prev, version, session_id, execution_id, agent_id,
     actor, role, kind, occurred_at, recorded_at, content, payload_json, salt, digest, redacted) = row  # fmt: skip
    return {
        "id": row_id,
        "seq": seq,
        "hash": hash_value,
        "prev_hash": prev,
        "hash_version": version,
        "session_id": session_id,
        "execution_id": execution_id,
        "agent_id": agent_id,
        "agent": "",
        "actor": actor,
        "role": role,
        "kind": kind,
        "occurred_at": occurred_at,
        "recorded_at": recorded_at,
        "content": content,
        "payload_json": payload_json,
        "body_salt": salt,
        "body_digest": digest,
        "redacted": redacted,
    }


def _chain_write(out: _HashingWriter, export: Export, span: _Range) -> None:
    """Write the rest of the chain range (the events out of scope) to ``out``, without content."""
    if span.bounds is None or (export.scope == ScopeKind.ALL and span.where == "TRUE"):
        return
    sql = (
        f"SELECT {_CHAIN_COLUMNS} FROM {EVENT_TABLE} e WHERE e.seq >= %s AND e.seq <= %s "
        f"AND NOT ({span.where}) AND e.seq > %s ORDER BY e.seq LIMIT %s"
    )
    for row in _stream(sql, [span.start_seq, span.end_seq, *span.params], key_index=0):
        (seq, hash_value, prev, version, session_id, execution_id, agent_id, actor, role, kind,
         occurred_at, recorded_at, digest) = row  # fmt: skip
        out.line(
            canonical_flat(
                {
                    "seq": seq,
                    "hash": hash_value,
                    "prev_hash": prev,
                    "hash_version": version,
                    "session_id": session_id,
                    "execution_id": execution_id,
                    "agent_id": agent_id,
                    "actor": actor,
                    "role": role,
                    "kind": kind,
                    "occurred_at": occurred_at,
                    "recorded_at": recorded_at,
                    "body_digest": digest,
                }
            )
        )


def _anchors_write(out: _HashingWriter, anchors: Any) -> list[int]:
    """Write the signed ``anchors`` of the range to ``out``; returns their seqs."""
    anchor_seqs = []
    for anchor in anchors:
        out.line(
            canonical_flat(
                {
                    "statement": anchor.statement,
                    "signature": anchor.signature,
                    "key_id": anchor.key_id,
                }
            )
        )
        anchor_seqs.append(anchor.seq)
    return anchor_seqs


def _manifest(
    export: Export,
    span: _Range,
    *,
    tenant: str,
    key_id: str,
    counts: dict[str, int],
    anchor_seqs: list[int],
    files: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """The archive's manifest: format, tenant, scope, who, when, ``counts``, the chain range, the
    anchors in it (``anchor_seqs``), and every other file's SHA-256, bytes and lines (``files``)."""
    bounds = span.bounds
    return {
        "format": FORMAT,
        "tenant": tenant,
        "export_id": str(export.pk),
        "created_at": _iso(timezone.now()),
        "created_by": export.requested_by,
        "scope": {
            "kind": export.scope,
            "session_id": export.session_id or None,
            "agent": export.agent_name or None,
            "occurred_from": _iso(export.occurred_from),
            "occurred_to": _iso(export.occurred_to),
        },
        "counts": counts,
        "chain": {
            "start_seq": span.start_seq,
            "start_prev_hash": span.start_prev,
            "end_seq": span.end_seq,
            "first_event_seq": bounds[0] if bounds else None,
            "last_event_seq": bounds[1] if bounds else None,
            "log_end_seq": span.end_of_log,
            "anchored_start": span.start_seq == 1 or span.start_seq in anchor_seqs,
            "anchored_end": span.end_seq in anchor_seqs,
        },
        "anchors": anchor_seqs,
        "key_id": key_id,
        "files": files,
    }


def _sealed_digest(raw: IO[bytes]) -> tuple[str, int]:
    """Flush ``raw`` to disk and read it back once: the archive's SHA-256 (hex) and size (the
    tar headers were filled in after their contents, so it cannot be hashed as it is written)."""
    raw.flush()
    os.fsync(raw.fileno())
    raw.seek(0)
    digest_all = hashlib.sha256()
    while block := raw.read(4 * 1024 * 1024):
        digest_all.update(block)
    return digest_all.hexdigest(), raw.tell()
