-- Keeps memory_lexicalposting equal to lexical (one row per lexeme, its weight of
-- memory_lexical_weights) on insert, content change (erasure) and delete, whatever wrote the row.

CREATE OR REPLACE FUNCTION memory_lexical_postings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM memory_lexicalposting WHERE memory_id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO memory_lexicalposting (memory_id, lexeme, impact)
        SELECT NEW.id, w.lexeme, w.weight FROM memory_lexical_weights(NEW.content, NEW.search) AS w;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER semantic_lexical_postings
    AFTER INSERT OR DELETE OR UPDATE OF content ON memory_semanticmemory
    FOR EACH ROW EXECUTE FUNCTION memory_lexical_postings();
