"""Retention: the rule in effect per layer and kind, and the rows it removes now."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from ..models import RetentionRule
from .holds import active_holds, held_q, unheld
from .layers import DAY, LAYERS, Layer


@dataclass(frozen=True)
class RuleInEffect:
    """The retention of one layer and kind: ``days`` (``None``: not by age), and whether it comes
    from a stored rule or the layer's default."""

    layer: str
    kind: str
    days: int | None
    stored: bool


def rules_in_effect() -> list[RuleInEffect]:
    """Every layer's retention per kind: its own stored rule, else the layer's stored rule for
    every kind (``memory_type`` empty), else the declared default."""
    stored = {(r.layer, r.memory_type): r.keep_days for r in RetentionRule.objects.all()}
    result = []
    for layer in LAYERS:
        for kind in layer.kinds:
            if (layer.name, kind) in stored:
                result.append(RuleInEffect(layer.name, kind, stored[(layer.name, kind)], True))
            elif (layer.name, "") in stored:
                result.append(RuleInEffect(layer.name, kind, stored[(layer.name, "")], True))
            else:
                result.append(RuleInEffect(layer.name, kind, layer.default_days.get(kind), False))
    return result


def retention_candidates(layer: Layer, *, now: datetime) -> QuerySet[Any] | None:
    """The rows of ``layer`` its retention removes at ``now``, held rows left out; ``None`` when the
    layer is not kept by age (or everything is held)."""
    if layer.model is None or layer.aged is None:
        return None
    aged: Q | None = layer.aged(now, "") if layer.like_sources else None
    for rule in rules_in_effect() if not layer.like_sources else ():
        if rule.layer != layer.name or rule.days is None:
            continue
        q = layer.aged(now - rule.days * DAY, rule.kind)
        aged = q if aged is None else aged | q
    if aged is None:
        return None
    rows = layer.rows().filter(aged)
    if layer.like_sources:
        # a hold keeps its sources, which stay; the derived rows that summarised a removed
        # source go whatever the hold (their text holds it) and are rebuilt from what is kept
        return rows
    if held_q(layer, active_holds()) == Q():  # a tenant-wide hold: nothing of the layer goes
        return None
    return unheld(layer.name, rows)[0]


def retention_preview(*, now: datetime) -> dict[str, int | None]:
    """The dry run: per layer, how many rows retention would remove at ``now`` (``None``: the layer
    is not kept by age, or all of it is held)."""
    result: dict[str, int | None] = {}
    for layer in LAYERS:
        rows = retention_candidates(layer, now=now)
        result[layer.name] = None if rows is None else rows.count()
    return result
