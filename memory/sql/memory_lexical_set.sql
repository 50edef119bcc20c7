-- Sets lexical (the BM25 weights of memory_lexical_weights by hashed lexeme) and asked_share from
-- content on insert and content change, whatever wrote the row.
-- Python twin: core/fulltext.py query_lexemes (the same 'english' configuration, the query's side).

CREATE OR REPLACE FUNCTION memory_lexical_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.lexical := (
        SELECT (coalesce('{' || string_agg(t.i || ':' || t.w, ',' ORDER BY t.i) || '}', '{}') || '/1000000000')::sparsevec
        FROM (SELECT memory_lexeme_index(w.lexeme) AS i, sum(w.weight) AS w
              FROM memory_lexical_weights(NEW.content) AS w GROUP BY 1) t);
    NEW.asked_share := memory_asked_share(NEW.content);
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER semantic_lexical_set
    BEFORE INSERT OR UPDATE OF content ON memory_semanticmemory
    FOR EACH ROW EXECUTE FUNCTION memory_lexical_set();
