"""Migration 0020 builds every context, lexical vector and posting set-based (a tenant of 100k
memories took over half an hour when each was built as the triggers do): the end state must be what
the live functions and triggers give for the same rows."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from django.core.management import call_command
from django.db import connection, transaction
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone
from django_tenants.utils import tenant_context

from memory.embeddings import get_embedder
from memory.semantic.models import MemoryScope
from memory.semantic.services.duplicates import content_hash
from tenants.models import Tenant
from tests.factories import make_caller, requires_model

pytestmark = requires_model

SNAPSHOT = {
    "lexical": "SELECT id::text, lexical::text FROM memory_semanticmemory ORDER BY id",
    "postings": "SELECT memory_id::text, lexeme, impact FROM memory_lexicalposting ORDER BY 1, 2",
    "contexts": "SELECT memory_id::text, lexical::text, sources::text FROM memory_memorycontext ORDER BY 1",
    "triggers": "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
    "WHERE tgrelid = 'memory_semanticmemory'::regclass AND NOT tgisinternal ORDER BY 1",
}


def _fetch(sql: str) -> list[tuple[object, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return [tuple(row) for row in cursor.fetchall()]


def _migrate(tenant: Tenant, *target: str) -> None:
    call_command("migrate_schemas", *target, schema_name=tenant.schema_name, interactive=False, verbosity=0)
    connection.set_schema_to_public()


def test_migration_0020_gives_what_the_triggers_give(scratch_tenant: Tenant) -> None:
    _migrate(scratch_tenant, "memory", "0019")
    # the rows are written as the table was at 0019 (the model of that state: later columns absent)
    SemanticMemory = (
        MigrationLoader(connection)
        .project_state(("memory", "0019_store_items"))
        .apps.get_model("memory", "SemanticMemory")
    )
    alice, bob = make_caller(scratch_tenant, "alice"), make_caller(scratch_tenant, "bob")
    embedder = get_embedder()
    rng = np.random.default_rng(7)
    t0 = timezone.now() - timedelta(days=1)
    words = ["kayak", "cello", "vienna", "zanzibar", "quentin", "river", "cake", "train", "storm"]
    with tenant_context(scratch_tenant):
        for i in range(90):
            v = rng.standard_normal(embedder.dimensions).astype(np.float32)
            content = " ".join(rng.choice(words, size=1 + i % 7)) + f" turn {i}"
            SemanticMemory.objects.create(
                agent_id=(alice, bob)[i % 2].agent.pk,
                scope=(
                    MemoryScope.HIERARCHICAL
                    if i % 13 == 0
                    else MemoryScope.PRIVATE
                    if i % 5 == 0
                    else MemoryScope.SHARED
                ),
                session_id=None if i % 11 == 0 else f"s{i % 3}",
                content=content,
                content_hash=content_hash(content),
                embedding=v / np.linalg.norm(v),
                embedding_model=embedder.name,
                embedding_dimensions=embedder.dimensions,
                # out of order, and ties on the time (ordered by id then)
                created_at=t0 + timedelta(minutes=(i * 37) % 60),
                visible_to_agents=[alice.agent.pk] if i % 13 == 0 else [],
                memory_type="store" if i % 17 == 0 else "fact",
                forgotten_at=timezone.now() if i % 7 == 0 else None,  # forgotten (merging forgets too)
                merged_into=None,
            )
        # a memory moved to another session after it was written, one emptied of words
        moved = SemanticMemory.objects.filter(session_id="s1").order_by("created_at").first()
        SemanticMemory.objects.filter(pk=moved.pk).update(session_id="s2")  # type: ignore[union-attr]
        SemanticMemory.objects.filter(session_id="s0", forgotten_at=None).order_by("id").filter(
            pk__in=SemanticMemory.objects.filter(session_id="s0").order_by("id").values("pk")[:1]
        ).update(content="")

    _migrate(scratch_tenant)
    with tenant_context(scratch_tenant):
        migrated = {name: _fetch(sql) for name, sql in SNAPSHOT.items()}
        assert len(migrated["contexts"]) > 30 and len(migrated["postings"]) > 200
        with transaction.atomic():
            # the live functions over the same rows: what the triggers would have built
            with connection.cursor() as cursor:
                cursor.execute("UPDATE memory_semanticmemory SET lexical = memory_lexical_vector(search)")
                cursor.execute("DELETE FROM memory_lexicalposting")
                cursor.execute(
                    "INSERT INTO memory_lexicalposting (memory_id, lexeme, impact) SELECT m.id, u.lexeme, "
                    "memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), length(m.search)) "
                    "FROM memory_semanticmemory m, unnest(m.search) AS u"
                )
                cursor.execute("DELETE FROM memory_memorycontext")
                cursor.execute(
                    "SELECT memory_context_refresh(ARRAY(SELECT id FROM memory_semanticmemory "
                    "WHERE session_id IS NOT NULL AND forgotten_at IS NULL))"
                )
            recomputed = {name: _fetch(sql) for name, sql in SNAPSHOT.items()}
            transaction.set_rollback(True)
        assert migrated == recomputed
        assert [name for name, _ in migrated["triggers"]] == [
            "semantic_context_deleted",
            "semantic_context_inserted",
            "semantic_context_updated",
            "semantic_lexical_postings",
            "semantic_lexical_set",
        ]
        # the triggers are live after the migration: a new turn becomes its neighbours' context
        s2 = SemanticMemory.objects.filter(session_id="s2", forgotten_at=None, memory_type="fact")
        last = s2.filter(agent_id=alice.agent.pk, scope=MemoryScope.SHARED, visible_to_agents=[]).latest(
            "created_at"
        )
        SemanticMemory.objects.filter(pk=last.pk).update(content="a brand new word: xylophone")
        assert _fetch(
            "SELECT count(*) FROM memory_memorycontext c, memory_lexicalposting p "
            f"WHERE p.memory_id = '{last.pk}' AND p.lexeme = 'xylophon' AND '{last.pk}' = ANY(c.sources)"
        ) != [(0,)]
    # back and forth again (the reverse builds the old lexical index set-based too)
    _migrate(scratch_tenant, "memory", "0019")
    _migrate(scratch_tenant)
