CREATE FUNCTION memory_context_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_context_refresh(ARRAY(
        SELECT NEW.id
        UNION
        SELECT a.id FROM memory_context_around(
            OLD.agent_id, OLD.scope, OLD.session_id, OLD.visible_to_agents, OLD.visible_to_roles::text[],
            OLD.created_at, OLD.id) AS a(id)
        WHERE OLD.session_id IS NOT NULL
        UNION
        SELECT a.id FROM memory_context_around(
            NEW.agent_id, NEW.scope, NEW.session_id, NEW.visible_to_agents, NEW.visible_to_roles::text[],
            NEW.created_at, NEW.id) AS a(id)
        WHERE NEW.session_id IS NOT NULL));
    RETURN NULL;
END $$;

CREATE TRIGGER semantic_context_inserted
    AFTER INSERT ON memory_semanticmemory REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_context_inserted();

CREATE TRIGGER semantic_context_deleted
    AFTER DELETE ON memory_semanticmemory REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_context_deleted();

CREATE TRIGGER semantic_context_updated
    AFTER UPDATE OF content, forgotten_at, session_id, scope, agent_id, visible_to_agents,
        visible_to_roles, memory_type, created_at ON memory_semanticmemory
    FOR EACH ROW WHEN (
        OLD.content IS DISTINCT FROM NEW.content
        OR OLD.forgotten_at IS DISTINCT FROM NEW.forgotten_at
        OR OLD.session_id IS DISTINCT FROM NEW.session_id
        OR OLD.scope IS DISTINCT FROM NEW.scope
        OR OLD.agent_id IS DISTINCT FROM NEW.agent_id
        OR OLD.visible_to_agents IS DISTINCT FROM NEW.visible_to_agents
        OR OLD.visible_to_roles IS DISTINCT FROM NEW.visible_to_roles
        OR OLD.memory_type IS DISTINCT FROM NEW.memory_type
        OR OLD.created_at IS DISTINCT FROM NEW.created_at)
    EXECUTE FUNCTION memory_context_updated();
