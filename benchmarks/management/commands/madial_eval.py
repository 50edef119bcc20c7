"""``manage.py madial_eval DIR --tenant SLUG [--agent NAME]``: memory recall on MADial-Bench (English).

``DIR`` holds the dev part (``../shared/data/madial``; its README gives the protocol). The archive is
written once through ``memory_create`` (shared scope, one memory per archive entry, its text the
``event``, its id in ``metadata["madial_id"]`` and the tag ``madial``; skipped when the agent already
holds it), then every dialogue's query (``benchmarks.madial``) is asked through ``memory_search``
(``k = 20``, ``touch=False``, the tenant's retrieval policy) and hit@1, hit@5, recall@5, recall@10
and MRR@20 are printed (LoCoMo's metrics, ``benchmarks.locomo``, over archive ids).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django_tenants.utils import tenant_context

from agents.models import Agent
from agents.services import agent_create
from benchmarks import locomo, madial
from benchmarks.management.commands.locomo_ingest import embed_by_length, statistics_refresh
from memory.embeddings import get_embedder
from memory.semantic.models import MemoryScope, MemoryType, SemanticMemory
from memory.semantic.services.recall import memory_search
from memory.semantic.services.writes import MemoryData, memories_create
from tenants.models import Tenant
from tenants.selectors import tenant_get
from tenants.services import tenant_create

TAG = "madial"


@dataclass
class MadialResult:
    """Mean scores over the dialogues (``locomo.GroupScores``) and the search latencies in ms."""

    scores: locomo.GroupScores
    latencies: list[float] = field(default_factory=list)

    def figures(self) -> dict[str, float]:
        """``{metric: mean}`` for ``madial.HEADLINE`` (``mrr`` is MRR@20) and ``n``."""
        return {"n": self.scores.n, **{m: round(self.scores.mean(m), 4) for m in madial.HEADLINE}}


def _ingest(folder: Path, owner: Agent, tenant: Tenant) -> dict[str, frozenset[str]]:
    """Write the archive once; ``{memory id: archive ids it stands for}`` (a near-duplicate write
    merged into another memory credits that memory)."""
    archive = madial.load_archive(folder)
    stored = SemanticMemory.objects.filter(agent=owner, tags__contains=[TAG], forgotten_at__isnull=True)
    if not stored.exists():
        embedder = get_embedder()
        vectors = embed_by_length(embedder, [m.event for m in archive])
        items = [
            MemoryData(
                content=m.event,
                memory_type=MemoryType.OBSERVATION,
                scope=MemoryScope.SHARED,
                tags=[TAG],
                metadata={"source": TAG, "madial_id": m.id, "time": m.time, "scene": m.scene},
                embedding=v.tolist(),
                embedding_model=embedder.name,
            )
            for m, v in zip(archive, vectors, strict=True)
        ]
        results = memories_create(agent=owner, items=items, policy=tenant.retrieval_policy, embedder=embedder)
        merged = [m.id for m, r in zip(archive, results, strict=True) if r.outcome != "created"]
        if merged:  # the credit of a merged write would be lost on the next run: say so now
            raise CommandError(f"archive ids {merged} were merged into other memories; ids would be lost")
        statistics_refresh()
    turns: dict[str, frozenset[str]] = {
        str(pk): frozenset([str(meta.get("madial_id"))]) for pk, meta in stored.values_list("pk", "metadata")
    }
    if len(turns) != len(archive):
        raise CommandError(f"{len(turns)} memories for {len(archive)} archive entries: use a fresh tenant")
    return turns


def madial_evaluate(*, folder: str, tenant: str, agent: str, dump: str = "") -> MadialResult:
    """Ingest the archive of ``folder`` into ``tenant`` (created if missing) as ``agent`` when not
    there yet and run the protocol (``benchmarks.madial``). Raises ``CommandError`` for an unreadable
    folder or an archive that does not match the stored memories."""
    path = Path(folder)
    try:
        dialogues = madial.load_dialogues(path)
    except (OSError, ValueError, KeyError) as exc:
        raise CommandError(f"cannot read the MADial files in {folder}: {exc}") from exc
    obj = tenant_get(schema_name=tenant) or tenant_create(slug=tenant)[0]
    result = MadialResult(locomo.GroupScores())
    dumped = []
    with tenant_context(obj):
        owner = Agent.objects.filter(name=agent).first() or agent_create(
            by=None, name=agent, role="MADial memory archive"
        )
        stands_for = _ingest(path, owner, obj)
        for dialogue in dialogues:
            t0 = time.perf_counter()
            hits = memory_search(
                agent=owner, query=dialogue.query, policy=obj.retrieval_policy, k=madial.DEPTH, touch=False
            )
            result.latencies.append((time.perf_counter() - t0) * 1000.0)
            ranked = [stands_for.get(str(h.memory.pk), frozenset()) for h in hits]
            scores = locomo.question_scores(ranked, dialogue.relevant, madial.KS)
            result.scores.add(scores)
            if dump:
                dumped.append(
                    {
                        "dialogue": dialogue.number,
                        "relevant": dialogue.relevant,
                        "ranked": [sorted(r) for r in ranked],
                        "scores": scores,
                    }
                )
    if dump:
        Path(dump).write_text("".join(json.dumps(row) + "\n" for row in dumped), encoding="utf-8")
    return result


def report(result: MadialResult) -> str:
    """The printed lines of ``result``: the headline metrics and the search latency."""
    figures = result.figures()
    header = f"{'MADial dev':<22}{'n':>5}" + "".join(
        f"{m if m != 'mrr' else 'mrr@20':>11}" for m in madial.HEADLINE
    )
    row = f"{'dialogues':<22}{result.scores.n:>5}" + "".join(f"{figures[m]:>11.3f}" for m in madial.HEADLINE)
    latency = (
        f"search latency over {len(result.latencies)} queries: p50 {locomo.percentile(result.latencies, 50):.1f} ms, "
        f"p95 {locomo.percentile(result.latencies, 95):.1f} ms"
    )
    return "\n".join([header, "-" * len(header), row, "", latency])


class Command(BaseCommand):
    help = "Recall the right past memory for each MADial dialogue; print hit@1/5, recall@5/10, MRR@20."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", help="the MADial dev folder, e.g. ../shared/data/madial")
        parser.add_argument("--tenant", required=True, help="tenant slug (created if missing)")
        parser.add_argument(
            "--agent", default="madial", help="agent that holds the archive (created if missing)"
        )
        parser.add_argument("--dump", default="", help="write per-dialogue results as JSON lines here")

    def handle(self, *args: Any, folder: str, tenant: str, agent: str, dump: str, **options: Any) -> None:
        self.stdout.write(report(madial_evaluate(folder=folder, tenant=tenant, agent=agent, dump=dump)))
