"""``manage.py locomo_ingest PATH --tenant SLUG [--agent NAME]``: load LoCoMo through the services.

Per conversation: every turn becomes one semantic memory (``memory_create``: shared scope, session
``"<sample_id>:<session_key>"``, tag ``<sample_id>``, metadata with the ``dia_id``) and then one episodic
``message`` event (``events_append``, one all-or-nothing batch per conversation) whose payload records
``sample_id``, ``dia_id``, ``speaker`` and the id of the memory the write returned. When a write is
merged into an existing memory (exact or near duplicate, the product's dedupe) that id is the merged
memory's, so ``locomo_eval`` can credit it with every turn it stands for.

Re-runs are idempotent: a conversation whose events exist is skipped whole. A run that died between
the memories and the events redoes the memories (exact duplicates: reinforced, not copied) and then
writes the events.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction
from django_tenants.utils import tenant_context

from agents.models import Agent
from agents.services import agent_create
from benchmarks import locomo
from core.tenancy import current_schema, maintenance
from memory.embeddings import get_embedder
from memory.episodic.models import Event, EventKind, EventRole
from memory.episodic.services import EventData, events_append
from memory.semantic import selectors
from memory.semantic.models import MemoryScope, MemoryType
from memory.semantic.services.writes import MemoryData, memory_create
from tenants.selectors import tenant_get
from tenants.services import tenant_create

# Texts are embedded shortest first in small batches: a batch is padded to its longest text, so
# grouping similar lengths halves the transformer's work (the vectors are the same).
EMBED_BATCH = 32
EVENT_BATCH = 1000  # settings.ENGRAM["MAX_EVENT_BATCH"]: the API's largest batch


def load_samples(path: str) -> list[dict[str, Any]]:
    """The LoCoMo samples in ``path`` (a JSON list). Raises ``CommandError`` if unreadable."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, list):
        raise CommandError(f"{path}: expected a JSON list of samples")
    return data


def embed_by_length(embedder: Any, texts: list[str]) -> list[Any]:
    """``embedder.embed(texts)`` row for row, computed in batches of similar length."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors: list[Any] = [None] * len(texts)
    for start in range(0, len(order), EMBED_BATCH):
        chunk = order[start : start + EMBED_BATCH]
        for i, vector in zip(chunk, embedder.embed([texts[i] for i in chunk]), strict=True):
            vectors[i] = vector
    return vectors


def statistics_refresh() -> None:
    """ANALYZE the current tenant's memory and lexical tables (as their owner) and drop the cached
    IDFs: search weighs words by these statistics (``lexeme_idf``), which autovacuum would make only
    later, so figures measured right after an ingest are those of a settled tenant."""
    with maintenance(), connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_semanticmemory")
        cursor.execute("ANALYZE memory_lexicalposting")
    selectors._lexicon.pop(current_schema(), None)


class Command(BaseCommand):
    help = "Load LoCoMo conversations as episodic events and semantic memories (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="LoCoMo JSON file, e.g. ../shared/data/locomo/locomo-dev5.json")
        parser.add_argument("--tenant", required=True, help="tenant slug (created if missing)")
        parser.add_argument("--agent", default="locomo", help="agent name (created if missing)")

    def handle(self, *args: Any, path: str, tenant: str, agent: str, **options: Any) -> None:
        samples = load_samples(path)
        obj = tenant_get(schema_name=tenant)
        if obj is None:
            obj, _ = tenant_create(slug=tenant)
            self.stdout.write(f"created tenant {tenant}")
        started = time.perf_counter()
        totals: Counter[str] = Counter()
        with tenant_context(obj):
            owner = Agent.objects.filter(name=agent).first()
            if owner is None:
                owner = agent_create(by=None, name=agent, role="LoCoMo conversation log")
                self.stdout.write(f"created agent {agent}")
            embedder = get_embedder()
            policy = obj.retrieval_policy
            for sample in samples:
                sample_id = str(sample["sample_id"])
                if Event.objects.filter(
                    agent=owner, kind=EventKind.MESSAGE, payload_index__sample_id=sample_id
                ).exists():
                    self.stdout.write(f"{sample_id}: events exist, skipped")
                    totals["skipped_conversations"] += 1
                    continue
                t0 = time.perf_counter()
                counts = self._ingest(sample, owner, embedder, policy)
                totals.update(counts)
                self.stdout.write(
                    f"{sample_id}: {counts['turns']} turns -> {counts['created']} new memories "
                    f"({counts['exact']} exact, {counts['near']} near duplicates merged), "
                    f"{counts['events']} events, {time.perf_counter() - t0:.1f}s"
                )
            if totals["turns"]:
                statistics_refresh()
        self.stdout.write(
            self.style.SUCCESS(
                f"done in {time.perf_counter() - started:.1f}s: {totals['turns']} turns, "
                f"{totals['created']} memories created, {totals['exact']} exact and {totals['near']} "
                f"near duplicates merged, {totals['events']} events, "
                f"{totals['skipped_conversations']} conversations skipped"
            )
        )

    def _ingest(self, sample: dict[str, Any], owner: Agent, embedder: Any, policy: Any) -> Counter[str]:
        turns = list(locomo.iter_turns(sample))
        contents = [locomo.memory_content(t) for t in turns]
        vectors = embed_by_length(embedder, contents)
        counts: Counter[str] = Counter(turns=len(turns))
        events: list[EventData] = []
        for turn, content, vector in zip(turns, contents, vectors, strict=True):
            session_id = f"{turn.sample_id}:{turn.session_key}"
            result = memory_create(
                agent=owner,
                data=MemoryData(
                    content=content,
                    memory_type=MemoryType.OBSERVATION,
                    scope=MemoryScope.SHARED,
                    session_id=session_id,
                    tags=[turn.sample_id],
                    metadata={
                        "source": "locomo",
                        "sample_id": turn.sample_id,
                        "dia_id": turn.dia_id,
                        "speaker": turn.speaker,
                    },
                    embedding=vector.tolist(),
                    embedding_model=embedder.name,
                ),
                policy=policy,
                embedder=embedder,
            )
            counts[result.outcome] += 1
            events.append(
                EventData(
                    session_id=session_id,
                    kind=EventKind.MESSAGE,
                    role=EventRole.USER,
                    content=turn.text,
                    occurred_at=turn.occurred_at,
                    payload={
                        "source": "locomo",
                        "sample_id": turn.sample_id,
                        "dia_id": turn.dia_id,
                        "speaker": turn.speaker,
                        "session_date_time": turn.when,
                        "memory_id": str(result.memory.pk),
                        "memory_outcome": result.outcome,
                    },
                )
            )
        with transaction.atomic():  # all of a conversation's events or none: the skip test stays exact
            for start in range(0, len(events), EVENT_BATCH):
                counts["events"] += len(
                    events_append(agent=owner, events=events[start : start + EVENT_BATCH])
                )
        return counts
