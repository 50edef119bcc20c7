"""Verification of the trail with its anchors: the signatures of the anchors, then the chain
(``memory.episodic.selectors.chain_verify``) held against what they say, with the signatures of the
decisions that account for redactions. Everything here needs the public key alone."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from core.canonical_json import canonical_flat
from core.tenancy import current_schema
from memory.episodic.selectors import ChainReport, Finding, FindingKind, Segment, TrustedAnchor, chain_verify

from . import signing
from .models import Anchor
from .redaction import seal_check

ANCHOR_VERSION = 1


def anchor_statement(*, tenant: str, seq: int, hash_value: str, anchored_at: datetime) -> bytes:
    """The bytes an anchor signs: the RFC 8785 text of ``{"v": 1, "tenant", "seq", "hash",
    "anchored_at"}`` (``anchored_at`` ISO 8601 UTC with microseconds)."""
    return canonical_flat(
        {
            "v": ANCHOR_VERSION,
            "tenant": tenant,
            "seq": seq,
            "hash": hash_value,
            "anchored_at": anchored_at.astimezone(UTC).isoformat(timespec="microseconds"),
        }
    )


@dataclass(frozen=True)
class AnchorRecord:
    """An anchor as stored or as received from a sink: the statement text and its signature (hex)."""

    statement: str
    signature: str
    source: str = "database"


def anchors_checked(
    records: Iterable[AnchorRecord], key: Ed25519PublicKey | None = None
) -> tuple[list[TrustedAnchor], list[Finding]]:
    """Split anchor records into those whose signature verifies with ``key`` (default: the
    configured public key) and whose statement is about this tenant (as ``TrustedAnchor``, each
    anchor once however many copies were read: the database's and the sink's), and a finding for
    each of the others."""
    tenant = current_schema()
    trusted: dict[tuple[str, str], TrustedAnchor] = {}
    problems: list[Finding] = []
    key = key or signing.public_key()
    for record in records:
        try:
            statement: dict[str, Any] = json.loads(record.statement)
            seq, hash_value = int(statement["seq"]), str(statement["hash"])
        except (ValueError, KeyError, TypeError):
            problems.append(
                Finding(FindingKind.ANCHOR_SIGNATURE, None, f"an anchor ({record.source}) is unreadable")
            )
            continue
        if not signing.signature_valid(record.statement.encode(), record.signature, key):
            problems.append(
                Finding(
                    FindingKind.ANCHOR_SIGNATURE,
                    seq,
                    f"the anchor of #{seq} ({record.source}) has a signature that does not verify with "
                    "the signing key: it was forged or altered",
                )
            )
            continue
        if statement.get("tenant") != tenant:
            problems.append(
                Finding(
                    FindingKind.ANCHOR_SIGNATURE,
                    seq,
                    f"the anchor of #{seq} ({record.source}) was signed for tenant {statement.get('tenant')!r}",
                )
            )
            continue
        trusted.setdefault(
            (record.statement, record.signature),
            TrustedAnchor(seq, hash_value, str(statement.get("anchored_at", ""))),
        )
    return list(trusted.values()), problems


def stored_anchor_records() -> list[AnchorRecord]:
    """Every anchor of the current tenant's database, as records to check."""
    return [
        AnchorRecord(statement, signature)
        for statement, signature in Anchor.objects.order_by("seq").values_list("statement", "signature")
    ]


@dataclass(frozen=True)
class TrailReport:
    """``chain`` (the chain check with the anchors applied) plus anchor problems, and how many
    anchors were trusted."""

    chain: ChainReport
    anchor_problems: tuple[Finding, ...]
    anchors_trusted: int

    @property
    def ok(self) -> bool:
        return self.chain.ok and not self.anchor_problems

    @property
    def findings(self) -> list[Finding]:
        return [*self.anchor_problems, *self.chain.findings]


def trail_verify(
    *,
    extra_anchors: Sequence[AnchorRecord] = (),
    progress: Callable[[int], None] | None = None,
    chunk_size: int = 10_000,
    segments: Sequence[Segment] = (Segment(),),
    key: Ed25519PublicKey | None = None,
) -> TrailReport:
    """Verify the current tenant's anchors (and ``extra_anchors``, e.g. read back from the sink) and
    its chain (``segments`` of it: all by default) against them, the decisions that account for
    redactions included, with ``key`` (default: the configured public key; no private key is
    needed). Raises ``ServiceUnavailable`` without a public key."""
    key = key or signing.public_key()
    trusted, problems = anchors_checked([*stored_anchor_records(), *extra_anchors], key)
    report = chain_verify(
        anchors=trusted, progress=progress, chunk_size=chunk_size, segments=segments, seal=seal_check(key)
    )
    return TrailReport(report, tuple(problems), len(trusted))


def sink_records(path: str) -> list[AnchorRecord]:
    """The anchors of the current tenant in a sink file (one JSON object per line, as
    ``services.anchor_head`` writes them); lines of other tenants are skipped."""
    tenant = current_schema()
    records = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            item = json.loads(line)
            if item.get("tenant") == tenant:
                records.append(AnchorRecord(item["statement"], item["signature"], source=f"sink {path}"))
    return records
