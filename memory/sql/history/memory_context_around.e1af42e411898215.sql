CREATE FUNCTION memory_context_around(
    p_agent bigint, p_scope text, p_session text, p_agents bigint[], p_roles text[],
    p_at timestamptz, p_id uuid
) RETURNS SETOF uuid LANGUAGE plpgsql STABLE ROWS 4 AS $$
BEGIN
    -- two ordered scans of semantic_session_order_idx, LIMIT 2 each: bounded whatever the corpus
    -- (ROWS 4 tells the planner so: with its default of 1,000 it joined them to a table scan)
    RETURN QUERY
    (SELECT s.id FROM memory_semanticmemory s
     WHERE s.session_id = p_session AND s.agent_id = p_agent AND s.scope = p_scope
       AND (s.created_at, s.id) < (p_at, p_id)
       AND s.visible_to_agents = p_agents AND s.visible_to_roles::text[] = p_roles
       AND s.forgotten_at IS NULL AND s.memory_type <> 'store'
     ORDER BY s.session_id DESC, s.agent_id DESC, s.scope DESC, s.created_at DESC, s.id DESC LIMIT 2)
    UNION ALL
    (SELECT s.id FROM memory_semanticmemory s
     WHERE s.session_id = p_session AND s.agent_id = p_agent AND s.scope = p_scope
       AND (s.created_at, s.id) > (p_at, p_id)
       AND s.visible_to_agents = p_agents AND s.visible_to_roles::text[] = p_roles
       AND s.forgotten_at IS NULL AND s.memory_type <> 'store'
     ORDER BY s.session_id, s.agent_id, s.scope, s.created_at, s.id LIMIT 2);
END $$;
