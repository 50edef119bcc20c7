"""An entity's live facts in recall order, and memory contexts refreshed in O(N log N) for N memories.

- ``fact_live_subject_page_idx`` / ``fact_live_object_page_idx``: the live facts (``active``,
  ``disputed``) of an entity as subject and as object, in ``(valid_from, id)`` order, so a recall reads
  one page of a hub's direct facts from two ordered index ranges (merged) instead of sorting all of
  them (``memory.knowledge.selectors.entity_recall``).
- ``memory_context_around`` (migration 0020) reads a memory's neighbours from the index in order
  on every call (its generic plan read the whole session before the position: O(N^2) for a
  statement touching N memories of a session).
- ``memory_context_refresh(ids)`` (migration 0020) gives the same contexts, but each context's
  ``sources`` are aggregated once per memory (``GROUP BY``) instead of by a subquery over every
  neighbour row of the call per memory: a statement touching N memories (a bulk erase, a bulk insert)
  cost O(N^2) in it, now O(N log N).
"""

import importlib

from django.db import migrations, models

# migration 0020's functions, as they were (their text, not a copy)
CONTEXT_0020 = importlib.import_module("memory.migrations.0020_memory_context")
OLD_AROUND = CONTEXT_0020.AROUND.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
OLD_REFRESH = CONTEXT_0020.REFRESH.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)

# The neighbours' lookup, unchanged but for ``enable_bitmapscan = off``: plpgsql's generic plan
# (from the sixth call of a connection) estimated one row and read the session's rows before the
# position with a bitmap scan and a sort, all of them, instead of the index backwards to the first
# two: 6.5 ms against 0.1 ms at 2,000 memories in a session, so a statement touching N memories of
# one session (a bulk erase, a bulk insert: N calls) cost O(N^2) (benchmarks/context_refresh.py).
AROUND = OLD_AROUND.replace("ROWS 4 AS $$", "ROWS 4\n    SET enable_bitmapscan = off AS $$", 1)
assert AROUND != OLD_AROUND

REFRESH = """
CREATE OR REPLACE FUNCTION memory_context_refresh(ids uuid[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH target AS (
        SELECT m.id, m.agent_id, m.scope, m.session_id, m.visible_to_agents, m.visible_to_roles,
               m.created_at
        FROM memory_semanticmemory m
        WHERE m.id = ANY(ids) AND m.forgotten_at IS NULL AND m.session_id IS NOT NULL
          AND m.memory_type <> 'store'
    ), nb AS (
        SELECT t.id, n.id AS source, n.search
        FROM target t
        CROSS JOIN LATERAL memory_context_around(
            t.agent_id, t.scope, t.session_id, t.visible_to_agents, t.visible_to_roles::text[],
            t.created_at, t.id) AS a(id)
        JOIN memory_semanticmemory n ON n.id = a.id
    ), lex AS (
        SELECT nb.id, u.lexeme,
               max(memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), length(nb.search))) AS w
        FROM nb, unnest(nb.search) AS u
        GROUP BY nb.id, u.lexeme
    ), src AS (
        SELECT nb.id, array_agg(DISTINCT nb.source) AS sources FROM nb GROUP BY nb.id
    ), built AS (
        SELECT l.id, memory_lexical_query(array_agg(l.lexeme), array_agg(l.w)) AS lexical
        FROM lex l GROUP BY l.id
    ), gone AS (
        DELETE FROM memory_memorycontext c
        WHERE c.memory_id = ANY(ids) AND NOT EXISTS (SELECT FROM built b WHERE b.id = c.memory_id)
    )
    INSERT INTO memory_memorycontext (memory_id, lexical, sources)
    SELECT b.id, b.lexical, s.sources FROM built b JOIN src s ON s.id = b.id
    ON CONFLICT (memory_id) DO UPDATE SET lexical = EXCLUDED.lexical, sources = EXCLUDED.sources;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0021_fact_graph_indexes"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(
                condition=models.Q(("status__in", ["active", "disputed"])),
                fields=["subject", "valid_from", "id"],
                name="fact_live_subject_page_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(
                condition=models.Q(("object_entity__isnull", False), ("status__in", ["active", "disputed"])),
                fields=["object_entity", "valid_from", "id"],
                name="fact_live_object_page_idx",
            ),
        ),
        migrations.RunSQL(AROUND + REFRESH, OLD_AROUND + OLD_REFRESH),
    ]
