-- BM25 term saturation of a lexeme seen tf times in a document of dl distinct lexemes:
-- k1 = 1.2, b = 0.3, average length 16.
-- Python twin: memory/semantic/models.py BM25_K1, BM25_B, AVG_DOC_LEXEMES.

CREATE OR REPLACE FUNCTION memory_bm25_saturation(tf integer, dl integer) RETURNS double precision
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN tf * 2.2::float8 / (tf + 1.2::float8 * (0.7::float8 + 0.3::float8 * dl / 16.0::float8));
