-- Sets lexical (the BM25 weights of memory_lexical_weights, placed by memory_lexical_query) and
-- asked_share from content on insert and content change, whatever wrote the row.
-- Python twin: core/fulltext.py query_lexemes (the same 'english' configuration, the query's side).

CREATE OR REPLACE FUNCTION memory_lexical_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.lexical := (SELECT memory_lexical_query(array_agg(w.lexeme), array_agg(w.weight))
                    FROM memory_lexical_weights(NEW.content, to_tsvector('english'::regconfig, COALESCE(NEW.content, ''))) AS w);
    NEW.asked_share := memory_asked_share(NEW.content);
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER semantic_lexical_set
    BEFORE INSERT OR UPDATE OF content ON memory_semanticmemory
    FOR EACH ROW EXECUTE FUNCTION memory_lexical_set();
