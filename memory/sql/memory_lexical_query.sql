-- The query's side of the lexical space: per lexeme its weight (the IDF), at its memory_lexeme_index.
-- Python twin: memory/semantic/selectors.py _QUERY_VECTOR_SQL (this body, inlined in the search).
-- plpgsql, not sql: a SQL function with a FROM cannot be inlined, and the SQL-function executor
-- plans its body on every statement that calls it; plpgsql keeps the plan for the connection.

CREATE OR REPLACE FUNCTION memory_lexical_query(lexemes text[], weights double precision[]) RETURNS sparsevec
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (
        SELECT (coalesce('{' || string_agg(i || ':' || w, ',' ORDER BY i) || '}', '{}') || '/1000000000')::sparsevec
        FROM (SELECT memory_lexeme_index(q.lexeme) AS i, sum(q.weight) AS w
              FROM unnest(lexemes, weights) AS q(lexeme, weight) GROUP BY 1) t);
END $$;
