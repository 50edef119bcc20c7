"""The update rule on the fixture of realistic pairs (``tests/fixtures/updates/pairs.jsonl``), through
the real write service and embedder (``benchmarks.updates.run_pairs``, what ``python -m benchmarks
updates`` prints): at least 95% of the update pairs supersede the older memory and 95% of the
rewordings reinforce it; the near statements about someone or something else stay two current
memories; after each update, recall for its question ranks the current memory first and never
returns the superseded one."""

from __future__ import annotations

from collections import Counter

from django_tenants.utils import tenant_context

from benchmarks.updates import CLASSES, EXPECTED, accuracy, confusion, load_pairs, run_pairs
from tenants.models import Tenant
from tests.factories import requires_model

pytestmark = requires_model


def test_the_fixture_has_the_three_classes_hand_written() -> None:
    pairs = load_pairs()
    counts = Counter(p["class"] for p in pairs)
    assert counts["update"] >= 60 and counts["paraphrase"] >= 60 and counts["distinct"] >= 30, counts
    assert set(counts) == set(CLASSES)
    assert all(p["question"].strip() for p in pairs if p["class"] == "update")
    assert len({(p["old"], p["new"]) for p in pairs}) == len(pairs), "a pair written twice"
    assert all(p["old"] != p["new"] for p in pairs)
    kinds = Counter(p["kind"] for p in pairs if p["class"] == "update")
    assert {"time", "date", "price", "address", "count", "preference", "negation", "name"} <= set(kinds)


def test_updates_and_rewordings_are_told_apart(scratch_tenant: Tenant) -> None:
    with tenant_context(scratch_tenant):
        decided = run_pairs(load_pairs())
    table = confusion(decided)
    shares = accuracy(table)
    wrong = [
        (d.pair["class"], d.outcome, d.pair["new"]) for d in decided if d.outcome != EXPECTED[d.pair["class"]]
    ]
    assert shares["update"] >= 0.95, (table, wrong)
    assert shares["paraphrase"] >= 0.95, (table, wrong)
    assert shares["distinct"] >= 0.95, (table, wrong)
    updated = [d for d in decided if d.outcome == "updated"]
    assert updated and all(d.current_first for d in updated), [
        d.pair["question"] for d in updated if not d.current_first
    ]
    assert not any(d.superseded_returned for d in updated)
