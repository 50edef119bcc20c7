-- After an insert (per statement): the contexts of the new memories and of their neighbours.

CREATE OR REPLACE FUNCTION memory_context_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE TRIGGER semantic_context_inserted
    AFTER INSERT ON memory_semanticmemory REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_context_inserted();
