"""Erasures re-applied to a restored tenant (decision 0091): a backup holds what was in the
tenant when it was made, so restoring one made before an erasure would bring the erased target
back. Every completed erasure is also kept in the public schema's ledger
(``tenants.models.ErasureLedgerEntry``); after a restore, each ledger entry of the tenant that the
restored data does not hold as done is executed again, by the erasure itself."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from tenants.services import erasure_ledger

from .. import lifecycle
from ..models import ErasureRequest, ErasureStatus
from .erasure import erasure_run

#: the actor of the erasures a restore executes again (four eyes decided them the first time)
REAPPLIER = "job:tenant_restore"


@dataclass(frozen=True)
class Reapplied:
    """Per ledger entry not done in the restored data: the original erasure's id, and the new
    request that executed it again (``None``: nothing of its target is in the restored data)."""

    erasure_id: str
    request_id: str | None
    status: str


def erasures_reapply(*, schema_name: str) -> list[Reapplied]:
    """Execute again, in the current tenant (``schema_name``, just restored), every erasure of the
    ledger that its data does not hold as done, oldest first: the target is found by its digest
    (``lifecycle.target_value_find``), a request approved by ``REAPPLIER`` is made with the original's
    legal basis and run (``erasure_run``: every store, verified, signed receipt, recorded). Call
    outside a transaction. Returns what was done for each entry."""
    entries = erasure_ledger(schema_name=schema_name)
    done = {
        str(pk)
        for pk in ErasureRequest.objects.filter(status=ErasureStatus.DONE).values_list("pk", flat=True)
    }
    out = []
    for entry in entries:
        if str(entry.erasure_id) in done:
            continue
        value = lifecycle.target_value_find(entry.kind, entry.value_digest)
        if value is None:
            out.append(Reapplied(str(entry.erasure_id), None, "nothing left"))
            continue
        now = timezone.now()
        request = ErasureRequest.objects.create(
            kind=entry.kind,
            value=value,
            value_digest=entry.value_digest,
            legal_basis=f"erasure {entry.erasure_id} re-applied after a restore",
            note=f"The backup restored was made before erasure {entry.erasure_id} (finished {entry.finished_at:%Y-%m-%d %H:%M} UTC).",
            status=ErasureStatus.APPROVED,
            requested_by=REAPPLIER,
            requested_at=now,
            approved_by=REAPPLIER,
            approved_at=now,
        )
        ran = erasure_run(request_id=request.pk)
        out.append(Reapplied(str(entry.erasure_id), str(ran.pk), ran.status))
    return out
