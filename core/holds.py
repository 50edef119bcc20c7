"""Legal holds, as every hard delete asks about them.

A legal hold (``compliance.models.LegalHold``) keeps rows from being deleted; which rows of a layer
it covers is the business of the lifecycle's map of the stores (``compliance.lifecycle``), which
sits above the layers that delete. So a layer's delete asks here, ``holds_check``, and compliance
answers: it registers ``compliance.lifecycle.unheld`` when the app loads
(``compliance.apps.ComplianceConfig.ready``). Retention asks ``unheld`` directly; an erasure refuses
a target that any hold meets before it starts. With nobody answering, every delete is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.db.models import Model, QuerySet

from core.errors import Conflict

M = TypeVar("M", bound=Model)

# (layer name, rows) -> (the rows no active hold covers, the descriptions of the holds covering the others)
Unheld = Callable[[str, QuerySet[Any]], tuple[QuerySet[Any], list[str]]]
# schema name -> the descriptions of the active holds in that tenant's schema
Active = Callable[[str], list[str]]

_answer: list[Unheld] = []
_active: list[Active] = []


def holds_answer(unheld: Unheld, active: Active) -> None:
    """Register the functions that say which rows a hold covers and which holds a tenant's schema
    has (once; a second call replaces them)."""
    _answer[:] = [unheld]
    _active[:] = [active]


def holds_in_tenant(*, schema_name: str) -> list[str]:
    """The active legal holds in the tenant schema ``schema_name``, described (``legal hold #N on
    … (reason)``). Raises ``RuntimeError`` when nothing answers (the compliance app is not loaded)."""
    if not _active:
        raise RuntimeError("no legal-hold check is registered (compliance.apps registers it)")
    return _active[0](schema_name)


def holds_refuse_tenant_delete(*, schema_name: str) -> None:
    """Refuse to delete the tenant whose schema is ``schema_name`` while any legal hold in it is
    active: deleting a tenant deletes (or strands) every row a hold keeps.

    Raises ``Conflict`` (409, on ``schema_name``) naming the holds; ``RuntimeError`` as
    ``holds_in_tenant``."""
    holds = holds_in_tenant(schema_name=schema_name)
    if holds:
        raise Conflict(
            f"Refused: {'; '.join(holds)} is active in this tenant. Release it before deleting the tenant.",
            field="schema_name",
        )


def holds_check(
    *, layer: str, rows: QuerySet[M], refuse: bool = True, field: str | None = None
) -> QuerySet[M]:
    """The ``rows`` (of the lifecycle layer named ``layer``) that no active legal hold covers.

    ``refuse``: raise ``Conflict`` (409, on ``field``) naming the holds when any of ``rows`` is
    held, for a delete that must go whole or not at all (an agent's DELETE); without it the held
    rows are left out (a sweep deletes the others). Raises ``RuntimeError`` when nothing answers
    (the compliance app is not loaded): no delete goes unasked."""
    if not _answer:
        raise RuntimeError("no legal-hold check is registered (compliance.apps registers it)")
    free, holds = _answer[0](layer, rows)
    if holds and refuse:
        raise Conflict(
            f"Refused: {'; '.join(holds)} covers this. Release the hold first, or ask a compliance officer.",
            field=field,
        )
    return free
