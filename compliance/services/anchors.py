"""Anchors: the chain head signed on a schedule, stored apart from the rows it covers and sent to
the sink (a file or an http(s) URL)."""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.db import connection
from django.utils import timezone

from core.tenancy import current_schema
from memory.episodic.models import Event

from .. import signing
from ..models import Anchor
from ..verification import AnchorRecord, anchor_statement, sink_records

logger = logging.getLogger(__name__)


def anchor_sink_file() -> str:
    """The anchor sink when it is a file (``ENGRAM_ANCHOR_SINK``), else "" (none, or an http(s) URL)."""
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
