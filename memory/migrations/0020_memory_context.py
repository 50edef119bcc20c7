"""Recall quality: a softer BM25 length normalisation, and each memory's neighbours' text as a second
lexical signal (``MemoryContext``), kept by triggers.

- ``memory_bm25_saturation`` gets b = 0.3 and an average length of 16 lexemes (``BM25_B``,
  ``AVG_DOC_LEXEMES`` of ``memory.semantic.models``, frozen here); every memory's ``lexical`` vector
  and postings are recomputed with it.
- ``memory_context_around(...)``: the ``CONTEXT_NEIGHBOURS`` (2) live memories just before and just
  after a position ``(created_at, id)`` among the memories of one agent, scope, audience and
  session (never the store's rows).
- ``memory_context_refresh(ids)``: the context of each of ``ids`` rebuilt from its neighbours (per
  lexeme the largest saturation in any of them), or deleted when it has none.
- Triggers on ``memory_semanticmemory``: after an insert or a delete (per statement, from its
  transition table) and after an update of what places a memory or gives its text (content,
  forgetting, session, scope, agent, audience, type, time; per row), the contexts of the changed
  rows and of every memory within two places of their old and new positions are rebuilt: none keeps
  text of a memory that is gone, forgotten, merged or redacted.
"""

import django.contrib.postgres.fields
import django.db.models.deletion
import pgvector.django.sparsevec
from django.db import migrations, models

from core.sqlrules import ApplySqlRule

# Set-based, the indexes rebuilt rather than fed row by row: every changed row is a new version that
# every index of the table gets (the HNSW graph insert of a 384-d vector is ~1 ms a row; one build
# of the index after the update is ~25 s at 100k). Only rows whose vector changes are written (the
# saturation is the same for 6-lexeme memories). The postings are rebuilt in bulk the same way.
RECOMPUTE = """
SET LOCAL maintenance_work_mem = '1GB';
SET LOCAL work_mem = '256MB';
DO $$
DECLARE
    defs text[];
    def text;
BEGIN
    SELECT coalesce(array_agg(pg_get_indexdef(i.indexrelid)), '{}') INTO defs
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
    WHERE i.indrelid = 'memory_semanticmemory'::regclass AND a.amname = 'hnsw';
    EXECUTE (SELECT coalesce(string_agg('DROP INDEX ' || i.indexrelid::regclass::text, '; '), 'SELECT 1')
             FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
             WHERE i.indrelid = 'memory_semanticmemory'::regclass AND a.amname = 'hnsw');
    UPDATE memory_semanticmemory m SET lexical = v.lexical
    FROM (SELECT id, memory_lexical_vector(search) AS lexical FROM memory_semanticmemory) v
    WHERE m.id = v.id AND m.lexical IS DISTINCT FROM v.lexical;
    FOREACH def IN ARRAY defs LOOP
        EXECUTE def;
    END LOOP;
END $$;
TRUNCATE memory_lexicalposting;
DROP INDEX lexical_posting_rank_idx;
ALTER TABLE memory_lexicalposting DROP CONSTRAINT memory_lexicalposting_pkey;
INSERT INTO memory_lexicalposting (memory_id, lexeme, impact)
SELECT m.id, u.lexeme,
       memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), length(m.search))
FROM memory_semanticmemory m, unnest(m.search) AS u;
ALTER TABLE memory_lexicalposting ADD CONSTRAINT memory_lexicalposting_pkey PRIMARY KEY (memory_id, lexeme);
CREATE INDEX lexical_posting_rank_idx ON memory_lexicalposting (lexeme, impact DESC, memory_id);
ANALYZE memory_semanticmemory;
ANALYZE memory_lexicalposting;
"""

# Every memory's context at once (what ``memory_context_refresh`` of every live memory gives): its
# neighbours are the two before and after it by (created_at, id) among the live, non-store memories
# of its session, agent, scope and audience (``memory_context_around``), so lag/lead over that
# partition; per lexeme the largest saturation in any neighbour; the sources every neighbour, for a
# memory whose neighbours hold at least one lexeme. Built before the triggers exist.
BUILD_CONTEXTS = """
SET LOCAL work_mem = '256MB';
WITH live AS (
    SELECT m.id,
           ARRAY[lag(m.id, 2) OVER w, lag(m.id, 1) OVER w, lead(m.id, 1) OVER w, lead(m.id, 2) OVER w] AS around
    FROM memory_semanticmemory m
    WHERE m.session_id IS NOT NULL AND m.forgotten_at IS NULL AND m.memory_type <> 'store'
      AND m.agent_id IS NOT NULL AND m.scope IS NOT NULL AND m.created_at IS NOT NULL
      AND m.visible_to_agents IS NOT NULL AND m.visible_to_roles IS NOT NULL
    WINDOW w AS (PARTITION BY m.session_id, m.agent_id, m.scope, m.visible_to_agents,
                              m.visible_to_roles::text[]
                 ORDER BY m.created_at, m.id)
), nb AS (
    SELECT l.id, a.source FROM live l, unnest(l.around) AS a(source) WHERE a.source IS NOT NULL
), lex AS (
    SELECT nb.id, u.lexeme,
           max(memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), length(n.search))) AS w
    FROM nb JOIN memory_semanticmemory n ON n.id = nb.source, unnest(n.search) AS u
    GROUP BY nb.id, u.lexeme
), built AS (
    SELECT l.id, memory_lexical_query(array_agg(l.lexeme), array_agg(l.w)) AS lexical
    FROM lex l GROUP BY l.id
)
INSERT INTO memory_memorycontext (memory_id, lexical, sources)
SELECT b.id, b.lexical, s.sources
FROM built b JOIN (SELECT id, array_agg(DISTINCT source) AS sources FROM nb GROUP BY id) s ON s.id = b.id;
ANALYZE memory_memorycontext;
"""

DROP_FUNCTIONS = """
DROP TRIGGER IF EXISTS semantic_context_updated ON memory_semanticmemory;
DROP TRIGGER IF EXISTS semantic_context_deleted ON memory_semanticmemory;
DROP TRIGGER IF EXISTS semantic_context_inserted ON memory_semanticmemory;
DROP FUNCTION IF EXISTS memory_context_updated();
DROP FUNCTION IF EXISTS memory_context_deleted();
DROP FUNCTION IF EXISTS memory_context_inserted();
DROP FUNCTION IF EXISTS memory_context_refresh(uuid[]);
DROP FUNCTION IF EXISTS memory_context_around(bigint, text, text, bigint[], text[], timestamptz, uuid);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0019_store_items"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="semanticmemory", name="semantic_session_idx"),
        migrations.AddIndex(
            model_name="semanticmemory",
            index=models.Index(
                fields=["session_id", "agent_id", "scope", "created_at", "id"],
                name="semantic_session_order_idx",
            ),
        ),
        migrations.CreateModel(
            name="MemoryContext",
            fields=[
                (
                    "memory",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        primary_key=True,
                        related_name="context",
                        serialize=False,
                        to="memory.semanticmemory",
                    ),
                ),
                (
                    "lexical",
                    pgvector.django.sparsevec.SparseVectorField(dimensions=1000000000, editable=False),
                ),
                (
                    "sources",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.UUIDField(), default=list, editable=False, size=None
                    ),
                ),
            ],
            options={"verbose_name": "memory context"},
        ),
        # the saturation, then every vector and posting recomputed with it; reversed, the same
        migrations.RunSQL(migrations.RunSQL.noop, RECOMPUTE),
        ApplySqlRule("memory_bm25_saturation", "85abaa7f57e35b04", previous="8ed216594e4847a1"),
        migrations.RunSQL(RECOMPUTE, migrations.RunSQL.noop),
        migrations.RunSQL(BUILD_CONTEXTS, migrations.RunSQL.noop),
        migrations.RunSQL(migrations.RunSQL.noop, DROP_FUNCTIONS),  # the rules below, undone
        ApplySqlRule("memory_context_around", "e1af42e411898215", reverse_sql=migrations.RunSQL.noop),
        ApplySqlRule("memory_context_refresh", "72a404f1682d56f4", reverse_sql=migrations.RunSQL.noop),
        ApplySqlRule("memory_context_inserted", "95e9fb0e12833375", reverse_sql=migrations.RunSQL.noop),
        ApplySqlRule("memory_context_deleted", "1dc6d390e6d80806", reverse_sql=migrations.RunSQL.noop),
        ApplySqlRule("memory_context_updated", "d32c7c54481d3064", reverse_sql=migrations.RunSQL.noop),
    ]
