"""What a legal hold keeps: ``unheld``, the one rule every hard delete asks (the layers through
``core.holds``), and the holds an erasure would meet."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet

from core.tenancy import maintenance
from memory.knowledge.models import entity_key

from ..models import LegalHold, TargetKind
from .layers import Layer, layer_get, stored_layers, target_q


def active_holds() -> list[LegalHold]:
    return list(LegalHold.objects.filter(released_at__isnull=True).order_by("pk"))


def tenant_holds(schema_name: str) -> list[str]:
    """The active holds in the tenant schema ``schema_name``, described (``legal hold #N on … (reason)``);
    ``[]`` when the schema or its holds table does not exist (a tenant whose creation failed).

    Read as the maintenance role by the table's qualified name, on the connection at hand: the
    caller (``Tenant.delete``) is inside the platform's transaction, where a switch to the tenant's
    own login is refused."""
    table = f"{connection.ops.quote_name(schema_name)}.{LegalHold._meta.db_table}"
    with maintenance(), connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [table])
        if cursor.fetchone()[0] is None:
            return []
        cursor.execute(
            f"SELECT id, kind, value, value_digest, reason FROM {table} WHERE released_at IS NULL ORDER BY id"
        )
        rows = cursor.fetchall()
    holds = [
        LegalHold(pk=pk, kind=kind, value=value, value_digest=digest, reason=reason)
        for pk, kind, value, digest, reason in rows
    ]
    return [f"{hold} ({hold.reason})" for hold in holds]


def held_q(layer: Layer, holds: Sequence[LegalHold]) -> Q | None:
    """The rows of ``layer`` under any of ``holds`` (``Q()`` = all of them, ``None`` = none)."""
    parts = [q for h in holds if (q := target_q(layer, h.kind, h.value)) is not None]
    if not parts:
        return None
    if any(not q for q in parts):  # a tenant-wide hold
        return Q()
    combined = parts[0]
    for q in parts[1:]:
        combined |= q
    return combined


def unheld(layer_name: str, rows: QuerySet[Any]) -> tuple[QuerySet[Any], list[str]]:
    """``rows`` of the layer ``layer_name`` less those an active hold covers, and the holds covering
    any of them (described as ``legal hold #N on subject X (reason)``). The one rule of what a hold
    keeps: every hard delete asks it, retention directly and the layers through
    ``core.holds.holds_check`` (registered by ``compliance.apps``)."""
    layer = layer_get(layer_name)
    covering = [
        hold
        for hold in active_holds()
        if (q := target_q(layer, hold.kind, hold.value)) is not None and rows.filter(q).exists()
    ]
    held = held_q(layer, covering)
    if held is None:
        return rows, []
    return (rows.none() if not held else rows.exclude(held)), [f"{h} ({h.reason})" for h in covering]


def holds_meeting(kind: str, value: str) -> list[LegalHold]:
    """The active holds an erasure of (``kind``, ``value``) would touch: a tenant-wide hold, a hold
    on the same target, or one on another target that shares a row with it in some layer (a hold on
    session S meets the erasure of a subject with an event in S)."""
    met = []
    for hold in active_holds():
        same = hold.kind == kind and (
            entity_key(hold.value) == entity_key(value) if kind == TargetKind.ENTITY else hold.value == value
        )
        if hold.kind == TargetKind.TENANT or same:
            met.append(hold)
            continue
        for layer in stored_layers():
            mine, theirs = target_q(layer, kind, value), target_q(layer, hold.kind, hold.value)
            if mine is None or theirs is None:
                continue
            if layer.rows().filter(mine).filter(theirs).exists():
                met.append(hold)
                break
    return met
