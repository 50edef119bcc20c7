CREATE FUNCTION memory_context_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_memorycontext c USING old_rows r WHERE c.memory_id = r.id;
    PERFORM memory_context_refresh(ARRAY(
        SELECT a.id FROM old_rows r
        CROSS JOIN LATERAL memory_context_around(
            r.agent_id, r.scope, r.session_id, r.visible_to_agents, r.visible_to_roles::text[],
            r.created_at, r.id) AS a(id)
        WHERE r.session_id IS NOT NULL));
    RETURN NULL;
END $$;
