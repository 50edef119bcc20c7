-- A lexeme's dimension in the lexical sparsevec space: 1 .. 999,999,999 of 1,000,000,000.
-- Python twin: memory/semantic/models.py LEXICAL_DIMENSIONS.

CREATE OR REPLACE FUNCTION memory_lexeme_index(lexeme text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN ((hashtext(lexeme)::bigint & 2147483647) % 999999999 + 1)::integer;
