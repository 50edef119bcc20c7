"""``manage.py locomo_eval PATH --tenant SLUG --k 1,5,10 [--agent NAME]``: retrieval quality on LoCoMo.

Every QA question is asked through ``memory_search`` (what ``POST /memories/search`` runs) with
``k = max(--k)``, restricted to its conversation's memories by the ``<sample_id>`` tag. A returned
memory stands for the turns whose ``locomo_ingest`` events name it (one turn, or several merged as
duplicates). Metrics are defined in ``benchmarks.locomo``. Searches pass ``touch=False`` so that asking
one question does not move the recency of the memories the next question sees.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django_tenants.utils import tenant_context

from agents.models import Agent
from benchmarks import locomo
from benchmarks.management.commands.locomo_ingest import load_samples
from memory.episodic.models import Event, EventKind
from memory.semantic.selectors import MemoryFilters
from memory.semantic.services.recall import memory_search
from tenants.selectors import tenant_get


def parse_ks(text: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError as exc:
        raise CommandError(f"--k: expected integers like 1,5,10, got {text!r}") from exc
    if not ks or ks[0] < 1:
        raise CommandError("--k: give positive integers")
    return ks


class Command(BaseCommand):
    help = "Ask every LoCoMo question through memory search; print hit@k, recall@k, MRR and latency."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="LoCoMo JSON file (the one given to locomo_ingest)")
        parser.add_argument("--tenant", required=True, help="tenant slug")
        parser.add_argument("--agent", default="locomo", help="agent that ingested (and now asks)")
        parser.add_argument("--k", default="1,5,10", help="cut-offs, comma-separated (default 1,5,10)")
        parser.add_argument("--dump", default="", help="write per-question results as JSON lines here")

    def handle(
        self, *args: Any, path: str, tenant: str, agent: str, k: str, dump: str, **options: Any
    ) -> None:
        ks = parse_ks(k)
        result = locomo_evaluate(path=path, tenant=tenant, agent=agent, ks=ks, dump=dump)
        self.stdout.write(report(result, ks))


@dataclass
class LocomoResult:
    """What ``locomo_evaluate`` measured: scores per group (``locomo.summarise``), what the evidence
    clean-up fixed, and the search latencies in ms."""

    groups: dict[int | str, locomo.GroupScores]
    stats: locomo.EvidenceStats
    latencies: list[float] = field(default_factory=list)

    def figures(self, ks: list[int]) -> dict[str, dict[str, float]]:
        """``{group label: {metric: mean, "n": count}}`` for the categories and ``"headline"``."""
        columns = [f"hit@{k}" for k in ks] + [f"recall@{k}" for k in ks] + ["mrr"]
        out: dict[str, dict[str, float]] = {}
        for key, group in self.groups.items():
            label = key if isinstance(key, str) else f"{key} {locomo.CATEGORY_NAMES[key]}"
            out[label] = {"n": group.n, **{c: round(group.mean(c), 4) for c in columns}}
        return out


def locomo_evaluate(*, path: str, tenant: str, agent: str, ks: list[int], dump: str = "") -> LocomoResult:
    """Ask every question of the LoCoMo file ``path`` through ``memory_search`` as ``agent`` of
    ``tenant`` (ingested by ``locomo_ingest``), ``k = max(ks)``. Raises ``CommandError`` when the
    tenant, the agent or a conversation's memories are missing."""
    samples = load_samples(path)
    obj = tenant_get(schema_name=tenant)
    if obj is None:
        raise CommandError(f"no tenant {tenant!r}: run locomo_ingest first")
    result = LocomoResult({}, locomo.EvidenceStats())
    per_question: list[tuple[int, dict[str, float]]] = []
    dumped: list[dict[str, Any]] = []
    with tenant_context(obj):
        owner = Agent.objects.filter(name=agent).first()
        if owner is None:
            raise CommandError(f"no agent {agent!r} in tenant {tenant!r}")
        policy = obj.retrieval_policy
        for sample in samples:
            sample_id = str(sample["sample_id"])
            stands_for = _memory_turns(owner, sample_id)
            if not stands_for:
                raise CommandError(f"{sample_id}: no ingested events; run locomo_ingest first")
            known = {locomo.normalise_dia_id(t.dia_id) or t.dia_id for t in locomo.iter_turns(sample)}
            for qa in sample["qa"]:
                gold, fixed = locomo.clean_evidence(qa.get("evidence"), known)
                result.stats += fixed
                if not gold:
                    continue
                t0 = time.perf_counter()
                hits = memory_search(
                    agent=owner,
                    query=str(qa["question"]),
                    policy=policy,
                    k=ks[-1],
                    filters=MemoryFilters(tags_any=[sample_id]),
                    touch=False,
                )
                result.latencies.append((time.perf_counter() - t0) * 1000.0)
                ranked = [stands_for.get(str(h.memory.pk), frozenset()) for h in hits]
                scores = locomo.question_scores(ranked, gold, ks)
                per_question.append((int(qa["category"]), scores))
                if dump:
                    dumped.append(
                        {
                            "sample_id": sample_id,
                            "category": qa["category"],
                            "question": qa["question"],
                            "gold": list(gold),
                            "ranked": [sorted(r) for r in ranked],
                            "scores": scores,
                        }
                    )
    if dump:
        with open(dump, "w", encoding="utf-8") as fh:
            for row in dumped:
                fh.write(json.dumps(row) + "\n")
    result.groups = locomo.summarise(per_question)
    return result


def _memory_turns(owner: Agent, sample_id: str) -> dict[str, frozenset[str]]:
    """``{memory id: canonical dia_ids it stands for}`` from the ingest events of one sample."""
    turns: dict[str, set[str]] = defaultdict(set)
    payloads = Event.objects.filter(
        agent=owner, kind=EventKind.MESSAGE, payload_index__sample_id=sample_id
    ).values_list("payload_index", flat=True)
    for payload in payloads:
        dia_id = locomo.normalise_dia_id(str(payload.get("dia_id", ""))) or payload.get("dia_id")
        if payload.get("memory_id") and dia_id:
            turns[payload["memory_id"]].add(dia_id)
    return {memory_id: frozenset(ids) for memory_id, ids in turns.items()}


def report(result: LocomoResult, ks: list[int]) -> str:
    """The printed table of ``result``: one row per category and the headline, then latency and
    what the evidence clean-up fixed."""
    groups, stats, latencies = result.groups, result.stats, result.latencies
    columns = [f"hit@{k}" for k in ks] + [f"recall@{k}" for k in ks] + ["mrr"]
    header = f"{'category':<22}{'n':>5}" + "".join(f"{c:>11}" for c in columns)
    lines = [header, "-" * len(header)]
    rows: list[tuple[str, int | str]] = [
        (f"{c} {locomo.CATEGORY_NAMES[c]}", c) for c in sorted(locomo.CATEGORY_NAMES) if c in groups
    ]
    rows.append(("headline (1-4)", "headline"))
    for label, key in rows:
        group = groups.get(key, locomo.GroupScores())
        if key == "headline":
            lines.append("-" * len(header))
        lines.append(f"{label:<22}{group.n:>5}" + "".join(f"{group.mean(c):>11.3f}" for c in columns))
    lines.append("")
    lines.append(
        f"search latency over {len(latencies)} queries: p50 {locomo.percentile(latencies, 50):.1f} ms, "
        f"p95 {locomo.percentile(latencies, 95):.1f} ms"
    )
    lines.append(
        f"evidence over {stats.questions} questions: {stats.split} multi-id strings split, "
        f"{stats.repaired} ids repaired, {stats.malformed} malformed tokens dropped, "
        f"{stats.unknown} unknown ids dropped, {stats.duplicates} duplicates dropped, "
        f"{stats.empty} questions without evidence skipped"
    )
    return "\n".join(lines)
