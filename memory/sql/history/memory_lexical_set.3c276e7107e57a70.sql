-- Sets lexical from content (the expression of the generated search column) on insert and content
-- change, whatever wrote the row.
-- Python twin: core/fulltext.py query_lexemes (the same 'english' configuration, the query's side).

CREATE OR REPLACE FUNCTION memory_lexical_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.lexical := memory_lexical_vector(to_tsvector('english'::regconfig, COALESCE(NEW.content, '')));
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER semantic_lexical_set
    BEFORE INSERT OR UPDATE OF content ON memory_semanticmemory
    FOR EACH ROW EXECUTE FUNCTION memory_lexical_set();
