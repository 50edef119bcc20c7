-- A document's lexical vector: per lexeme its BM25 saturation (memory_bm25_saturation), at its
-- memory_lexeme_index, so a memory's BM25 score is one dot product with memory_lexical_query.

CREATE OR REPLACE FUNCTION memory_lexical_vector(doc tsvector) RETURNS sparsevec
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (coalesce('{' || string_agg(i || ':' || w, ',' ORDER BY i) || '}', '{}') || '/1000000000')::sparsevec
    FROM (SELECT memory_lexeme_index(u.lexeme) AS i,
                 sum(memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), length(doc))) AS w
          FROM unnest(doc) AS u GROUP BY 1) t
$$;
