"""LoCoMo: evidence clean-up, metrics, and one real conversation ingested and evaluated end to end."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django_tenants.utils import tenant_context

from benchmarks.locomo import clean_evidence, hit_at_k, normalise_dia_id, recall_at_k, reciprocal_rank
from memory.episodic.models import Event
from memory.semantic.models import SemanticMemory
from tests.factories import LOCOMO_PATH, needs_shared, requires_model

KNOWN = {"D1:1", "D1:2", "D8:6", "D9:17", "D11:26", "D30:5"}


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("D8:6", "D8:6"),
        ("D:11:26", "D11:26"),
        ("D30:05", "D30:5"),
        (" d3:1 ", "D3:1"),
        ("D", None),
        ("", None),
    ],
)
def test_dia_ids_are_normalised(token: str, expected: str | None) -> None:
    assert normalise_dia_id(token) == expected


def test_evidence_gotchas_are_cleaned_and_counted() -> None:
    ids, stats = clean_evidence(["D8:6; D9:17", "D:11:26", "D30:05", "D8:6", "D", "D99:1"], KNOWN)
    assert ids == ("D8:6", "D9:17", "D11:26", "D30:5")
    assert (stats.split, stats.repaired, stats.duplicates, stats.malformed, stats.unknown) == (1, 2, 1, 1, 1)
    empty_ids, empty_stats = clean_evidence([], KNOWN)
    assert empty_ids == () and empty_stats.empty == 1
    assert clean_evidence(None, KNOWN)[1].empty == 1


def test_metrics() -> None:
    ranked = [frozenset({"D1:1"}), frozenset({"D8:6", "D9:17"}), frozenset({"D1:2"})]
    gold = {"D9:17", "D1:2"}
    assert [hit_at_k(ranked, gold, k) for k in (1, 2, 3)] == [0.0, 1.0, 1.0]
    assert [recall_at_k(ranked, gold, k) for k in (1, 2, 3)] == [0.0, 0.5, 1.0]
    assert reciprocal_rank(ranked, gold) == pytest.approx(0.5)
    assert reciprocal_rank([frozenset({"D1:1"})], gold) == 0.0


@requires_model
@needs_shared(LOCOMO_PATH, "the LoCoMo dev file")
def test_one_conversation_ingested_and_evaluated(scratch_tenant, tmp_path) -> None:  # type: ignore[no-untyped-def]
    conversations = json.loads(LOCOMO_PATH.read_text())
    subset = tmp_path / "one.json"  # a temporary file for this run only, never kept in the project
    subset.write_text(json.dumps(conversations[:1]))
    turns = sum(
        len(v)
        for k, v in conversations[0]["conversation"].items()
        if k.startswith("session_") and isinstance(v, list)
    )

    call_command("locomo_ingest", str(subset), tenant=scratch_tenant.schema_name, stdout=io.StringIO())
    call_command(
        "locomo_ingest", str(subset), tenant=scratch_tenant.schema_name, stdout=io.StringIO()
    )  # re-run
    with tenant_context(scratch_tenant):
        assert Event.objects.filter(kind="message").count() == turns  # and a decision per update
        assert turns - 5 <= SemanticMemory.objects.count() <= turns  # a few near-duplicates may merge
        # image turns are indexed by their caption; the image search "query" (it leaks answers) never
        leaky = [
            t
            for k, v in conversations[0]["conversation"].items()
            if k.startswith("session_") and isinstance(v, list)
            for t in v
            if t.get("query") and t["query"] not in t.get("text", "") + t.get("blip_caption", "")
        ]
        assert leaky, "the sample should have image turns"
        for turn in leaky:
            memory = SemanticMemory.objects.filter(metadata__dia_id=turn["dia_id"]).first()
            if memory is not None:  # None: merged into a near-duplicate of another turn
                assert turn["query"] not in memory.content, turn["dia_id"]
                assert turn["blip_caption"] in memory.content

    out = io.StringIO()
    call_command("locomo_eval", str(subset), tenant=scratch_tenant.schema_name, k="1,5,10", stdout=out)
    report = out.getvalue()
    headline = next(line for line in report.splitlines() if line.startswith("headline"))
    hit_at_10 = float(headline.split()[5])
    assert 0.6 <= hit_at_10 <= 1.0, report
    assert "search latency" in report
