CREATE FUNCTION memory_lexeme_index(lexeme text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN ((hashtext(lexeme)::bigint & 2147483647) % 999999999 + 1)::integer;
