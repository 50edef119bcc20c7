CREATE FUNCTION memory_lexical_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.lexical := memory_lexical_vector(to_tsvector('english'::regconfig, COALESCE(NEW.content, '')));
    RETURN NEW;
END $$;

CREATE TRIGGER semantic_lexical_set
    BEFORE INSERT OR UPDATE OF content ON memory_semanticmemory
    FOR EACH ROW EXECUTE FUNCTION memory_lexical_set();
