"""Updates against rewordings: the fixture ``tests/fixtures/updates/pairs.jsonl`` through the real
write service, as a confusion table of the expected class by the decided outcome.

Each pair (an older memory, then a newer text) is written by an agent of its own in a scratch
tenant, with ``memory_create`` and the configured embedder (all-MiniLM-L6-v2 by default), under
the tenant's default policy. Classes: ``update`` (the newer text changes a time, price, address,
count, preference, negation, date or name of the same thing: it must supersede the older memory),
``paraphrase`` (a rewording: it must reinforce the older memory) and ``distinct`` (a statement
about someone or something else, near by the vectors: both must stay current). The decided
outcome is ``updated`` (stored, superseding the older memory), ``deduplicated`` (reinforced it) or
``stored`` (a memory of its own, both current).

Then, for every update pair, recall (``memory_search``, k=5, default filters) for the pair's
question: how often the current memory ranks first, and how often the superseded one is returned
at all (it never should be).

Needs PostgreSQL (with pgvector) and Redis: ``DATABASE_URL`` / ``REDIS_URL`` from the environment::

    python -m devstack services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    python -m benchmarks updates [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "updates" / "pairs.jsonl"
CLASSES = ("update", "paraphrase", "distinct")
OUTCOMES = ("updated", "deduplicated", "stored")
# the outcome each class must get
EXPECTED = {"update": "updated", "paraphrase": "deduplicated", "distinct": "stored"}


def load_pairs(path: Path = FIXTURE) -> list[dict[str, Any]]:
    """The fixture's pairs: ``{"class", "old", "new", "kind"?, "question"?}`` per line."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass(frozen=True)
class Decided:
    """What the write service did with one pair, and (update pairs) what recall returned."""

    pair: dict[str, Any]
    outcome: str
    current_first: bool | None = None
    superseded_returned: bool | None = None


def run_pairs(pairs: list[dict[str, Any]], *, prefix: str = "pair") -> list[Decided]:
    """Write each pair through ``memory_create`` (an agent ``<prefix>-<i>`` each, in the current
    tenant) and recall each update pair's question; one ``Decided`` per pair, in order."""
    from agents.services import agent_create
    from core.tenancy import current_tenant
    from memory.semantic.services.recall import memory_search
    from memory.semantic.services.writes import MemoryData, memory_create

    policy = current_tenant().retrieval_policy
    out = []
    for i, pair in enumerate(pairs):
        agent = agent_create(by=None, name=f"{prefix}-{i}")
        old = memory_create(agent=agent, data=MemoryData(content=pair["old"]), policy=policy)
        new = memory_create(agent=agent, data=MemoryData(content=pair["new"]), policy=policy)
        if new.updated and str(new.supersedes) == str(old.memory.pk):
            outcome = "updated"
        elif new.deduplicated and new.memory.pk == old.memory.pk:
            outcome = "deduplicated"
        else:
            outcome = "stored"
        first = returned = None
        if pair["class"] == "update":
            hits = memory_search(agent=agent, query=pair["question"], k=5, policy=policy, touch=False)
            ids = [h.memory.pk for h in hits]
            first = bool(ids) and ids[0] == new.memory.pk
            returned = old.memory.pk in ids and old.memory.pk != new.memory.pk
        out.append(Decided(pair, outcome, first, returned))
    return out


def confusion(decided: list[Decided]) -> dict[str, dict[str, int]]:
    """``{class: {outcome: count}}`` over every class and outcome (zeros included)."""
    counts = Counter((d.pair["class"], d.outcome) for d in decided)
    return {c: {o: counts[(c, o)] for o in OUTCOMES} for c in CLASSES}


def accuracy(table: dict[str, dict[str, int]]) -> dict[str, float]:
    """Per class, the share of its pairs that got ``EXPECTED``'s outcome."""
    return {c: table[c][EXPECTED[c]] / max(1, sum(table[c].values())) for c in CLASSES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--limit", type=int, default=0, help="the first N pairs of each class (0: all)")
    args = parser.parse_args()

    from _common import django_setup, record, scratch_tenant

    django_setup()
    from django.conf import settings
    from django_tenants.utils import tenant_context

    from memory.embeddings import get_embedder

    pairs = load_pairs(args.fixture)
    if args.limit:
        pairs = [p for c in CLASSES for p in [q for q in pairs if q["class"] == c][: args.limit]]
    with scratch_tenant("bench_updates", []) as (tenant, _, _):
        with tenant_context(tenant):
            threshold = tenant.retrieval_policy.near_duplicate_threshold
            decided = run_pairs(pairs)
    table = confusion(decided)
    shares = accuracy(table)
    embedder = get_embedder()
    print(
        f"\n{len(pairs)} pairs, {embedder.name} ({embedder.dimensions}-d), near_duplicate_threshold {threshold}"
    )
    print(f"({settings.ENGRAM['EMBEDDER']} embedder)\n")
    head = "expected / decided"
    print(f"  {head:<20}" + "".join(f"{o:>14}" for o in OUTCOMES) + f"{'correct':>10}")
    for c in CLASSES:
        row = "".join(f"{table[c][o]:>14}" for o in OUTCOMES)
        print(f"  {c:<20}{row}{100 * shares[c]:>9.1f}%")
    updates = [d for d in decided if d.pair["class"] == "update"]
    first = sum(bool(d.current_first) for d in updates)
    leaked = sum(bool(d.superseded_returned) for d in updates)
    print(f"\nrecall after an update ({len(updates)} questions, k=5, default filters):")
    print(f"  current memory first: {first}/{len(updates)} ({100 * first / max(1, len(updates)):.1f}%)")
    print(f"  superseded memory returned: {leaked}/{len(updates)}")
    wrong = [d for d in decided if d.outcome != EXPECTED[d.pair["class"]]]
    if wrong:
        print("\nmisdecided pairs:")
        for d in wrong:
            print(f"  [{d.pair['class']} -> {d.outcome}] {d.pair['old']!r} / {d.pair['new']!r}")
    record(
        pairs=len(pairs),
        embedder=embedder.name,
        near_duplicate_threshold=threshold,
        confusion=table,
        accuracy={c: round(v, 4) for c, v in shares.items()},
        recall={"questions": len(updates), "current_first": first, "superseded_returned": leaked},
        misdecided=[
            {"class": d.pair["class"], "outcome": d.outcome, "old": d.pair["old"], "new": d.pair["new"]}
            for d in wrong
        ],
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
