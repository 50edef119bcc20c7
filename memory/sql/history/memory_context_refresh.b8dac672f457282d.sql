-- The context of each of ids rebuilt from its neighbours (per lexeme the largest saturation in any of
-- them), or deleted when it has none. plpgsql, not sql: a non-inlined SQL function is planned on every
-- call, plpgsql once per connection.

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
