"""Floors of recall quality on both development sets (LoCoMo dev, MADial dev): a ranking change
that lowers any headline figure by more than ``TOLERANCE`` fails here, whichever set it was tuned on.

The whole of both sets is ingested through the services into two committed tenants (one per set:
MADial's protocol ranks its archive alone) and evaluated by ``recall_eval``, the command that
prints both (9 minutes at a load of 13 on two cores, most of it LoCoMo's 2,760 writes). The floors are
the figures of the ranking of docs/explanation/retrieval.md as this test measured them; raise them
when a change raises the figures (never lower them to let a change through).
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command

from tenants.models import Tenant
from tests.factories import LOCOMO_PATH, MADIAL_DIR, needs_shared, requires_model

TOLERANCE = 0.01

# the ingest is most of it (2,760 LoCoMo writes): 9 minutes at a load of 13 on two cores
pytestmark = pytest.mark.timeout(1200)

# LoCoMo dev, categories 1-4 (760 questions), k = 1, 5, 10; mrr is MRR@10
LOCOMO_FLOORS = {
    "hit@1": 0.483,
    "hit@5": 0.780,
    "hit@10": 0.854,
    "recall@1": 0.431,
    "recall@5": 0.716,
    "recall@10": 0.793,
    "mrr": 0.606,
}
# MADial dev (76 dialogues); mrr is MRR@20
MADIAL_FLOORS = {"hit@1": 0.671, "hit@5": 0.921, "recall@5": 0.655, "recall@10": 0.773, "mrr": 0.789}


@pytest.fixture(scope="module")
def figures(
    committed_tenants: tuple[Tenant, Tenant], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    locomo_tenant, madial_tenant = committed_tenants
    output = tmp_path_factory.mktemp("recall") / "recall.json"
    out = io.StringIO()
    call_command(
        "recall_eval",
        locomo=str(LOCOMO_PATH),
        madial=str(MADIAL_DIR),
        locomo_tenant=locomo_tenant.schema_name,
        madial_tenant=madial_tenant.schema_name,
        output=str(output),
        stdout=out,
    )
    print(out.getvalue())  # the figures in the test log (pytest -s, or on failure)
    document: dict[str, Any] = json.loads(output.read_text())
    return document


def _below(measured: dict[str, float], floors: dict[str, float]) -> dict[str, tuple[float, float]]:
    return {m: (measured[m], floor) for m, floor in floors.items() if measured[m] < floor - TOLERANCE}


@requires_model
@needs_shared(LOCOMO_PATH, "the LoCoMo dev file")
@needs_shared(MADIAL_DIR, "the MADial dev folder")
def test_locomo_headline_holds_its_floors(figures: dict[str, Any]) -> None:
    headline = figures["locomo"]["headline"]
    assert headline["n"] == 760
    assert not _below(headline, LOCOMO_FLOORS), (_below(headline, LOCOMO_FLOORS), figures["locomo"])


@requires_model
@needs_shared(LOCOMO_PATH, "the LoCoMo dev file")
@needs_shared(MADIAL_DIR, "the MADial dev folder")
def test_madial_holds_its_floors(figures: dict[str, Any]) -> None:
    madial = figures["madial"]
    assert madial["n"] == 76
    assert not _below(madial, MADIAL_FLOORS), (_below(madial, MADIAL_FLOORS), madial)
