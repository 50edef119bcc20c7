"""``manage.py locomo_ingest PATH --tenant SLUG [--agent NAME]``: load LoCoMo through the product.

Every LoCoMo session is one call of the conversation operation's service
(``memory.conversations.services.messages_add``, what ``POST /api/v1/sessions/{id}/messages``
runs, without a language model): session ``"<sample_id>:<session_key>"``, each turn a ``user``
message named by its speaker at the session's date and time, shared memories tagged
``<sample_id>``. Each turn becomes one semantic memory (``"Caroline (1:56 pm on 8 May, 2023): ..."``,
its vector carrying the turn before it: ``memory.conversations.services.turn_vectors``)
and one episodic ``message`` event whose payload records ``sample_id``, ``dia_id`` and the id of the
memory the write returned. When a write is merged into an existing memory (exact or near duplicate,
the product's dedupe) that id is the merged memory's, so ``locomo_eval`` can credit it with every
turn it stands for.

Re-runs are idempotent: a session whose events exist is skipped (a session is one all-or-nothing
call).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django_tenants.utils import tenant_context

from agents.models import Agent
from agents.services import agent_create
from benchmarks import locomo
from core.tenancy import current_schema, maintenance
from memory.conversations.services import Message, messages_add
from memory.embeddings import Embedder, get_embedder
from memory.episodic.models import Event, EventRole
from memory.semantic import selectors
from memory.semantic.models import MemoryScope
from tenants.models import RetrievalPolicy
from tenants.selectors import tenant_get
from tenants.services import tenant_create


def load_samples(path: str) -> list[dict[str, Any]]:
    """The LoCoMo samples in ``path`` (a JSON list). Raises ``CommandError`` if unreadable."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, list):
        raise CommandError(f"{path}: expected a JSON list of samples")
    return data


EMBED_BATCH = 32  # texts per embedding call


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
                t0 = time.perf_counter()
                counts = self._ingest(sample, owner, embedder, policy)
                totals.update(counts)
                self.stdout.write(
                    f"{sample['sample_id']}: {counts['turns']} turns -> {counts['created']} new memories "
                    f"({counts['exact']} exact, {counts['near']} near duplicates merged), "
                    f"{counts['events']} events, {counts['skipped_sessions']} sessions skipped, "
                    f"{time.perf_counter() - t0:.1f}s"
                )
            if totals["turns"]:
                statistics_refresh()
        self.stdout.write(
            self.style.SUCCESS(
                f"done in {time.perf_counter() - started:.1f}s: {totals['turns']} turns, "
                f"{totals['created']} memories created, {totals['exact']} exact and {totals['near']} "
                f"near duplicates merged, {totals['events']} events, "
                f"{totals['skipped_sessions']} sessions skipped (already ingested)"
            )
        )

    def _ingest(
        self, sample: dict[str, Any], owner: Agent, embedder: Embedder, policy: RetrievalPolicy
    ) -> Counter[str]:
        """One conversation, a ``messages_add`` call per session not ingested before."""
        counts: Counter[str] = Counter()
        sessions: dict[str, list[locomo.Turn]] = {}
        for turn in locomo.iter_turns(sample):
            sessions.setdefault(f"{turn.sample_id}:{turn.session_key}", []).append(turn)
        for session_id, turns in sessions.items():
            if Event.objects.filter(agent=owner, session_id=session_id).exists():
                counts["skipped_sessions"] += 1
                continue
            added = messages_add(
                agent=owner,
                session_id=session_id,
                messages=[
                    Message(
                        role=EventRole.USER,
                        name=turn.speaker,
                        content=turn.text,
                        occurred_at=turn.occurred_at,
                        metadata={"source": "locomo", "sample_id": turn.sample_id, "dia_id": turn.dia_id},
                    )
                    for turn in turns
                ],
                policy=policy,
                scope=MemoryScope.SHARED,
                tags=[turns[0].sample_id],
                extraction="turns",
                embedder=embedder,
            )
            counts["turns"] += len(turns)
            counts["events"] += len(added.events)
            counts.update(result.outcome for _, result in added.memories)
        return counts
