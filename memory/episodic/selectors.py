"""Reads of the episodic log: filtered listings and chain verification."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.postgres.search import SearchQuery
from django.db.models import QuerySet

from .models import GENESIS_HASH, ChainHead, Event


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
class ChainReport:
    """Outcome of ``chain_verify``: ``ok``, how many events were checked, and the first broken link."""

    ok: bool
    checked: int
    broken_seq: int | None = None
    broken_id: int | None = None
    reason: str = ""


def chain_verify(*, chunk_size: int = 5000) -> ChainReport:
    """Recompute every hash of the current tenant's chain in ``seq`` order.

    Detects an altered row (its content or payload no longer matches its body digest, or its fields
    its hash), a removed or inserted row (a gap in ``seq`` or a ``prev_hash`` that is not the
    predecessor's hash) and a truncated tail (the last row differs from the chain head). Each row
    is checked in its own chain format (``Event.hash_version``). Reads in chunks; memory use is
    O(chunk_size).
    """
    expected_seq, expected_prev, checked = 1, GENESIS_HASH, 0
    rows = Event.objects.defer("search", "payload_index").order_by("seq")
    for event in rows.iterator(chunk_size=chunk_size):
        if event.seq != expected_seq:
            return ChainReport(False, checked, event.seq, event.pk, f"sequence gap: expected #{expected_seq}")
        if event.prev_hash != expected_prev:
            return ChainReport(
                False, checked, event.seq, event.pk, "prev_hash does not match the previous event"
            )
        if event.hash_version != 1 and (
            not event.body_salt or event.compute_body_digest() != event.body_digest
        ):
            return ChainReport(False, checked, event.seq, event.pk, "content does not match its hash")
        if event.compute_hash() != event.hash:
            reason = (
                "content does not match its hash"
                if event.hash_version == 1
                else "fields do not match its hash"
            )
            return ChainReport(False, checked, event.seq, event.pk, reason)
        expected_seq, expected_prev, checked = expected_seq + 1, event.hash, checked + 1
    head = ChainHead.objects.get(pk=1)
    if head.last_seq != checked or head.last_hash != expected_prev:
        return ChainReport(
            False,
            checked,
            checked + 1 if head.last_seq > checked else head.last_seq,
            None,
            f"chain head says #{head.last_seq}, the log ends at #{checked}",
        )
    return ChainReport(True, checked)
