CREATE FUNCTION memory_context_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_context_refresh(ARRAY(
        SELECT r.id FROM new_rows r WHERE r.session_id IS NOT NULL
        UNION
        SELECT a.id FROM new_rows r
        CROSS JOIN LATERAL memory_context_around(
            r.agent_id, r.scope, r.session_id, r.visible_to_agents, r.visible_to_roles::text[],
            r.created_at, r.id) AS a(id)
        WHERE r.session_id IS NOT NULL));
    RETURN NULL;
END $$;
